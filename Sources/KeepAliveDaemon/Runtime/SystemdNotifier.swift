import CKeepAliveSDBus
import KeepAlive
import Logging

/// Speaks systemd's notify protocol when `NOTIFY_SOCKET` is set: `READY=1` once every output is
/// playing or waiting for its device (a selection that found nothing yet is waiting too), a
/// `STATUS=` line per state change, `STOPPING=1` on shutdown, and `WATCHDOG=1` only while the
/// playback threads keep reporting (a wedged thread stops the pings, so systemd restarts the
/// daemon).
///
/// Driven by the daemon's main loop: ``update()`` after a state change, ``pingWatchdog()`` every
/// ``watchdogInterval``.
///
/// ```swift
/// if let notifier = SystemdNotifier(manager: manager, awaited: { "output" }, logger: logger) { notifier.update() }
/// ```
final class SystemdNotifier {
    let manager: KeepAliveManager
    /// Half of `WatchdogSec` (systemd's advice), when the unit has a watchdog for this process.
    let watchdogInterval: Duration?
    /// How long a playback thread may go without reporting before it counts as wedged: it reports
    /// at least once per write while streaming, once per retry while waiting, once per health
    /// check in a ring loop (the manager allows for that). The longest buffer counts: outputs
    /// come and go with a selection, and a sink's buffer is longer than a card's.
    var responsiveness: Duration {
        let configuration = manager.configuration
        let buffers = configuration.devices.map { configuration.configuration(for: $0).bufferDuration }
        return max(buffers.max() ?? .zero, configuration.defaults.bufferDuration, configuration.defaults.retry.maximumDelay) + .seconds(1)
    }
    /// What a selection that found nothing waits for ("output", "digital output").
    let awaited: () -> String
    /// Outputs a selection leaves to another program now, with why; asked only while there is
    /// no output, so that a status that says nothing plays says why.
    let withheld: () -> [String: String]
    let logger: Logger
    private var ready = false
    private var lastStatus = ""

    /// A notifier for the environment systemd gave this process, or nil when not under a
    /// notify-type unit.
    init?(manager: KeepAliveManager, awaited: @escaping () -> String = { "output" },
          withheld: @escaping () -> [String: String] = { [:] }, logger: Logger) {
        guard RuntimePaths.environment("NOTIFY_SOCKET") != nil else { return nil }
        self.manager = manager
        self.awaited = awaited
        self.withheld = withheld
        self.logger = logger
        // libsystemd ignores a WATCHDOG_PID that names another process: a watchdog inherited
        // from a parent is not this process's to feed. Here and in sd_notify the environment
        // stays as it is (unset_environment 0): unsetenv is not safe while other threads (the
        // playback threads' alsa-lib) may read it.
        var usec: UInt64 = 0
        watchdogInterval = sd_watchdog_enabled(0, &usec) > 0 ? .microseconds(Int64(usec / 2)) : nil
    }

    /// Sends READY once and the status line when it changed.
    func update() {
        // One snapshot: the outputs a status names are the ones its state was computed from.
        let snapshot = manager.snapshot
        // A "stopped" before the manager ever ran would be news of nothing.
        guard ready || snapshot.isRunning else { return }
        let status = Self.status(snapshot, awaiting: awaited(), withheld: snapshot.outputs.isEmpty ? withheld() : [:])
        var message = ""
        if !ready, snapshot.isRunning, snapshot.outputs.allSatisfy({ $0.state != .starting && $0.state != .stopped }) {
            ready = true
            message += "READY=1\n"
        }
        if status != lastStatus {
            lastStatus = status
            message += status
        }
        if !message.isEmpty { send(message) }
    }

    /// `STATUS=playing on hdmi:CARD=PCH,DEV=0`, one entry per output when there are several, and
    /// what a selection that found nothing waits for, with the outputs it leaves to others.
    static func status(_ snapshot: KeepAliveSnapshot, awaiting what: String = "output", withheld: [String: String] = [:]) -> String {
        let state = snapshot.state
        switch snapshot.outputs.count {
        case 0 where !withheld.isEmpty:
            let left = withheld.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; ")
            return "STATUS=\(state): no \(what) yet; left to others: \(left)"
        case 0:
            return "STATUS=\(state): no \(what) yet"
        case 1:
            return "STATUS=\(state) on \(snapshot.outputs[0].device)"
        default:
            return "STATUS=\(state) (\(snapshot.outputs.map { "\($0.device): \($0.state)" }.joined(separator: ", ")))"
        }
    }

    /// Pings the watchdog if every playback thread reported recently; else says why not, once
    /// per missed ping.
    func pingWatchdog() {
        if manager.isResponsive(within: responsiveness) {
            send("WATCHDOG=1")
        } else {
            logger.warning("playback loop unresponsive; withholding the watchdog ping")
        }
    }

    func stopping() {
        send("STOPPING=1\nSTATUS=stopping")
    }

    /// Best effort, as systemd means it: a manager that went away or a full socket costs one
    /// message, never the daemon.
    private func send(_ message: String) {
        _ = sd_notify(0, message)
    }
}
