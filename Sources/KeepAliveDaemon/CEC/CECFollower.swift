import _KeepalivedControlProtocol
import KeepAlive
import Logging

/// `--cec`: keepalived on the HDMI-CEC bus, following the box's real audio. The rest of the
/// daemon talks to it from any thread and never waits: ``BoxActivity`` reports the box
/// becoming active or idle (``boxChanged(active:gate:)``), a reload hands it new settings
/// (``apply(_:)``), the control socket's thread reads ``report``. Each is queued and the
/// adapter's own thread (`keepalive-cec`, a ``CECAdapter``) is woken to act on it: that thread
/// alone touches the adapter, and no fault of the adapter reaches the rest of the daemon.
///
/// The thread starts with the first `--cec` (at start or on a reload) and runs until ``stop()``;
/// with `--cec` taken away on a reload it closes the adapter and sleeps.
///
/// ```swift
/// let follower = CECFollower(settings: try options.playback.cec.settings, logger: logger)
/// follower.boxChanged(active: true)    // from BoxActivity, under its lock: queued
/// follower.report?.lastMessage         // "4→5 System Audio Mode Request (2.0.0.0)"
/// follower.stop()
/// ```
final class CECFollower: Sendable {
    /// What the options ask for.
    struct Settings: Equatable, Sendable {
        /// The adapter's node; nil without `--cec`.
        var device: String?
        var machine = CECStateMachine.Settings()
    }

    /// One change of the box: active or idle, and with it a player's open held for the
    /// receiver's wake (`--power-on-wait`), to be let go once the wake is confirmed.
    struct BoxChange: Sendable {
        var active: Bool
        var gate: PowerOnGate?
    }

    /// What waits for the adapter's thread, in the order it came.
    struct Inbox: Sendable {
        var settings: Settings
        /// The box's changes not yet handled; queued only while the thread runs.
        var box: [BoxChange] = []
        /// The box now, for a thread that starts on a reload while audio plays.
        var active = false
        /// The adapter's thread: the one record of whether it was started and runs.
        var thread = AdapterThread.notStarted
        var stopping = false
        /// Whether changes are queued for the thread.
        var running: Bool { thread == .running }
    }

    /// The adapter's thread, started at most once (a failed start is not tried again until the
    /// daemon's next start).
    enum AdapterThread: Sendable, Equatable {
        case notStarted, running, failedToStart
    }

    let logger: Logger
    /// The adapter's thread's doorbell, or why it could not be made: then ``start()`` treats it
    /// as a thread that cannot start (logged, and `--cec` does nothing).
    private let madeDoorbell: Result<Doorbell, DoorbellError>
    private let inbox: Locked<Inbox>
    private let published = Locked<CECReport?>(nil)
    private let thread = Locked<JoinableThread?>(nil)
    private let observers = Locked<[@Sendable () -> Void]>([])

    init(settings: Settings, logger: Logger) {
        self.logger = logger
        inbox = Locked(Inbox(settings: settings))
        madeDoorbell = Result { () throws(DoorbellError) in try Doorbell() }
    }

    /// The adapter's thread's doorbell: only that thread waits on it, and it starts only once
    /// the doorbell was made.
    var doorbell: Doorbell {
        guard case .success(let doorbell) = madeDoorbell else { preconditionFailure("the CEC adapter's thread ran without its doorbell") }
        return doorbell
    }

    /// Rings the adapter's thread, which runs only with its doorbell.
    private func ring() {
        if case .success(let doorbell) = madeDoorbell { doorbell.ring() }
    }

    /// Starts the adapter's thread when `--cec` names an adapter; a failure to start is logged
    /// and `--cec` does nothing (the daemon plays on without it).
    func start() {
        let starts = inbox.withLock { inbox in
            guard inbox.settings.device != nil, inbox.thread == .notStarted else { return false }
            // From now on every change is queued, after the box as it is.
            inbox.thread = .running
            inbox.box = inbox.active ? [BoxChange(active: true)] : []
            return true
        }
        guard starts else { return }
        do {
            _ = try madeDoorbell.get()
            var handle: JoinableThread? = try startThread(named: "keepalive-cec") { [self] in
                CECAdapter(follower: self).run()
            }
            thread.withLock { $0 = handle.take() }
        } catch {
            inbox.withLock { $0.thread = .failedToStart }
            logger.error("--cec: \(error); HDMI-CEC is off until the next start", metadata: ["device": "\(inbox.withLock { $0.settings.device ?? "" })"])
        }
    }

    /// A reload's settings: a new adapter is opened, the old one let go; nothing is sent.
    func apply(_ settings: Settings) {
        let changed = inbox.withLock { inbox in
            defer { inbox.settings = settings }
            return inbox.settings != settings
        }
        guard changed else { return }
        start()
        ring()
    }

    /// The box became active (the first output with real audio) or idle (the last output went
    /// idle). Called under ``BoxActivity``'s lock, which keeps the changes in order. `gate`: a
    /// player's open held for the receiver's wake; with no adapter's thread to wake it, it goes
    /// on at once.
    func boxChanged(active: Bool, gate: PowerOnGate? = nil) {
        let running = inbox.withLock { inbox in
            inbox.active = active
            if inbox.running { inbox.box.append(BoxChange(active: active, gate: gate)) }
            return inbox.running
        }
        if running { ring() } else { gate?.runEnded(at: .now) }
    }

    /// What `status` shows; nil without `--cec`.
    var report: CECReport? {
        guard inbox.withLock({ $0.settings.device != nil }) else { return nil }
        return published.withLock { $0 }
    }

    /// Ends the thread (the daemon's stop); the adapter's addresses stay claimed by the kernel.
    func stop() {
        inbox.withLock { $0.stopping = true }
        if case .success(let doorbell) = madeDoorbell { doorbell.raise() }
        guard let handle = thread.withLock({ $0.take() }) else { return }
        handle.join()
    }

    // MARK: - For the adapter's thread

    /// Everything queued since the last call.
    func take() -> Inbox {
        inbox.withLock { inbox in
            defer { inbox.box = [] }
            return inbox
        }
    }

    /// The adapter's thread's latest state, for ``report``.
    func publish(_ report: CECReport?) {
        let changed = published.withLock { published in
            defer { published = report }
            return published != report
        }
        guard changed else { return }
        for observer in observers.withLock({ $0 }) { observer() }
    }

    /// Calls `observer` after each change of ``report``, on the adapter's thread (`--mqtt`'s
    /// publisher): it must not wait.
    func observe(_ observer: @escaping @Sendable () -> Void) {
        observers.withLock { $0.append(observer) }
    }
}
