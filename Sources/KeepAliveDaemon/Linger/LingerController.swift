import KeepAlive
import Logging

/// `--linger` in the running daemon: the plan and the ``LingerWatcher`` carrying it out, replaced
/// as a whole when a reload changes the duration or the outputs it applies to (outputs the old
/// watcher let sleep play again first; the new one starts with a whole window, as at start), and
/// following the outputs a selection adds or drops (``follow(_:on:)``).
///
/// ```swift
/// let linger = LingerController(plan: plan, manager: manager, logger: logger)
/// linger.start(on: runtime.mainLoop)
/// linger.apply(newPlan, on: runtime.mainLoop)   // on reload; nil turns --linger off
/// linger.follow(manager.configuration.devices, on: runtime.mainLoop)   // after a rescan
/// linger.stop(on: runtime.mainLoop)
/// ```
///
/// Concurrency: every change comes from the daemon's main loop, which applies reloads and rescans
/// in turn (each call checks it); `status` reads ``snapshot`` from the control socket's thread.
/// The lock is a leaf: a watcher is made, started and stopped outside it (joining or leaving the
/// sound server's connection takes that connection's locks).
final class LingerController: Sendable {
    let manager: KeepAliveManager
    let logger: Logger
    private let current: Locked<Current>

    private struct Current {
        var plan: LingerPlan?
        var watcher: LingerWatcher?
        var running = false
    }

    init(plan: LingerPlan?, manager: KeepAliveManager, logger: Logger) {
        self.manager = manager
        self.logger = logger
        let watcher = plan.flatMap { Self.watcher(for: $0, manager: manager, logger: logger) }
        current = Locked(Current(plan: plan, watcher: watcher))
    }

    /// What `status` shows: the plan and its watcher, from one moment.
    var snapshot: (plan: LingerPlan?, watcher: LingerWatcher?) {
        current.withLock { ($0.plan, $0.watcher) }
    }

    func start(on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("LingerController.start")
        setRunning(true)?.start()
    }

    /// Lets go of the server; the outputs stay as they are (the manager stops them next).
    func stop(on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("LingerController.stop")
        setRunning(false)?.stop()
    }

    /// Whether a watcher made later starts at once; returns the watcher now, to start or stop
    /// outside the lock.
    private func setRunning(_ running: Bool) -> LingerWatcher? {
        current.withLock { current in
            current.running = running
            return current.watcher
        }
    }

    /// A reload's plan (nil: no `--linger`); nothing happens when it is the running one.
    func apply(_ plan: LingerPlan?, on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("LingerController.apply")
        let (running, old) = current.withLock { ($0.running, $0.watcher) }
        guard plan != current.withLock({ $0.plan }) else { return }
        if let old {
            old.stop()
            for output in old.outputs { manager.resume(.linger, output: output) }
        }
        let watcher = plan.flatMap { Self.watcher(for: $0, manager: manager, logger: logger) }
        current.withLock { current in
            current.plan = plan
            current.watcher = watcher
        }
        if let plan {
            logger.notice("--linger \(plan.duration.spoken) now applies to \(plan.outputs.isEmpty ? "no output" : plan.outputs.joined(separator: ", "))")
        } else {
            logger.notice("--linger is off: every output is kept awake")
        }
        if running { watcher?.start() }
    }

    /// Follows the outputs after a rescan (a sink plugged in or gone): each sound-server output
    /// lingers, the new ones with a whole window; the others are left as they are. Without
    /// `--linger`, nothing.
    func follow(_ devices: [String], on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("LingerController.follow")
        let (old, watcher, running) = current.withLock { ($0.plan, $0.watcher, $0.running) }
        guard let old,
              let plan = try? LingerPlan(duration: old.duration, devices: devices, hasSelection: true),
              plan != old else { return }
        for (device, why) in plan.keptAwake where old.keptAwake[device] == nil {
            logger.warning("--linger is not supported here: \(why); it is kept awake all the time")
        }
        if let watcher {
            current.withLock { $0.plan = plan }
            watcher.follow(plan.outputs)
        } else {
            let made = Self.watcher(for: LingerPlan(sameAs: plan, unsupported: []), manager: manager, logger: logger)
            current.withLock { current in
                current.plan = plan
                current.watcher = made
            }
            if running { made?.start() }
        }
    }

    /// The watcher a plan needs, after warning once about each output it does not apply to;
    /// nil when nothing can linger. Without libpulse every output is kept awake (fail safe).
    private static func watcher(for plan: LingerPlan, manager: KeepAliveManager, logger: Logger) -> LingerWatcher? {
        for why in plan.unsupported {
            logger.warning("--linger is not supported here: \(why); it is kept awake all the time")
        }
        guard !plan.outputs.isEmpty else { return nil }
        do {
            return try LingerWatcher(duration: plan.duration, outputs: plan.outputs, manager: manager, logger: logger)
        } catch {
            logger.warning("--linger disabled: \(error); keeping \(plan.outputs.joined(separator: ", ")) awake all the time")
            return nil
        }
    }
}
