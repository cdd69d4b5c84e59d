import KeepAlive
import Logging
import Synchronization

/// Pauses the manager for the system's sleep and, when asked, for a locked or idle session:
/// ``LogindWatcher`` reads logind, ``PauseStateMachine`` decides, this performs. Lives on the
/// daemon's main thread; its two descriptors (the bus and the idle timer) join the one `poll`.
///
/// ```swift
/// let follower = try LogindFollower(manager: manager, policy: try options.session.policy, logger: logger)
/// // in the poll loop, after every wakeup:
/// follower.process(idleTimerFired: fds[6].revents != 0)
/// ```
/// Concurrency: everything but ``policyChanged(_:)`` runs on the main thread.
final class LogindFollower: @unchecked Sendable {
    let manager: KeepAliveManager
    let logger: Logger
    let watcher: LogindWatcher?
    let idleTimer: IntervalTimer
    private var machine: PauseStateMachine
    /// A reload's new policy, handed over from whichever thread reloaded.
    private let pendingPolicy = Mutex<PauseStateMachine.Policy?>(nil)
    private var warnedNoSession = false

    init(manager: KeepAliveManager, policy: PauseStateMachine.Policy, logger: Logger) throws(Errno) {
        self.manager = manager
        self.logger = logger
        idleTimer = try IntervalTimer()
        machine = PauseStateMachine(policy: policy)
        watcher = LogindWatcher.open(logger: logger)
        warnIfUnfollowable()
    }

    /// For `poll`: the bus (its events change between polls) and the idle timer.
    var busDescriptor: Int32 { watcher?.descriptor ?? -1 }
    var busEvents: Int16 { watcher?.events ?? 0 }
    var pollTimeout: Int32 { watcher?.pollTimeout ?? -1 }

    /// Safe from any thread (a reload runs on the control socket's): the idle timer, set to
    /// fire at once, wakes the main loop, which takes the new policy.
    func policyChanged(_ policy: PauseStateMachine.Policy) {
        pendingPolicy.withLock { $0 = policy }
        idleTimer.arm(after: .zero)
    }

    /// Reads what logind said and acts on it.
    func process(idleTimerFired: Bool) {
        let now = LogindWatcher.monotonicNow()
        if let policy = pendingPolicy.withLock({ $0.take() }), policy != machine.policy {
            perform(machine.policyChanged(policy, now: now))
            warnedNoSession = false
            warnIfUnfollowable()
        }
        if idleTimerFired, idleTimer.acknowledge() > 0 {
            perform(machine.idleTimerFired(now: now))
        }
        guard let watcher else { return }
        for event in watcher.process() {
            switch event {
            case .prepareForSleep(let start):
                perform(machine.prepareForSleep(start))
            case .session(let hints):
                perform(machine.session(locked: hints.locked, idle: hints.idle, idleSince: hints.idleSince, now: now))
            case .lost:
                perform(machine.lost())
            }
        }
    }

    private func perform(_ actions: [PauseStateMachine.Action]) {
        for action in actions {
            switch action {
            case .pause(let reason): manager.pause(reason)
            case .resume(let reason): manager.resume(reason)
            case .releaseSleepLock: watcher?.releaseSleepLock()
            case .takeSleepLock: watcher?.takeSleepLock()
            case .armIdleTimer(let delay): idleTimer.arm(after: delay)
            case .disarmIdleTimer: idleTimer.disarm()
            }
        }
    }

    /// `--pause-when` without a session to follow would silently never pause: say so once.
    private func warnIfUnfollowable() {
        let asked = machine.policy.pauseWhen
        guard !asked.isEmpty, !warnedNoSession, watcher?.session == nil else { return }
        warnedNoSession = true
        let why = watcher == nil ? "logind is not reachable on the system bus" : "this process belongs to no login session and its user has no display session"
        logger.warning("--pause-when \(asked.sorted().map(\.rawValue).joined(separator: ",")) has no session to follow: \(why); playing regardless")
    }
}
