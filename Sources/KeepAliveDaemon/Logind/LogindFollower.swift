import KeepAlive
import Logging

/// Pauses the manager for the system's sleep and, when asked, for a locked or idle session:
/// ``LogindWatcher`` reads logind, ``PauseStateMachine`` decides, this performs. Lives on the
/// daemon's main thread; its two descriptors (the bus and the idle timer) join the one `poll`.
///
/// ```swift
/// let follower = try LogindFollower(manager: manager, policy: try options.playback.session.policy, logger: logger)
/// // on the main loop, after every wakeup (DaemonRuntime.handleReady), the idle timer readable or not:
/// follower.process(idleTimerFired: true, on: runtime.mainLoop)
/// ```
/// A system bus that goes away (dbus-daemon restarted) leaves the outputs playing and is
/// tried again (``ReconnectBackoff``).
///
/// Concurrency: the watcher, the machine and the backoff are the main loop's: made on the main
/// thread before it claims its ``ThreadOwner``, then touched only by
/// ``process(idleTimerFired:on:)``, which checks that owner in every build (`preconditionOwned`).
/// ``policyChanged(_:)`` runs on any thread: it only hands the policy over behind ``Locked`` and
/// arms the timer. The poll's accessors (`busDescriptor`, `busEvents`, `pollTimeout`) are read by
/// the main loop between turns, unchecked. So `@unchecked Sendable`.
final class LogindFollower: @unchecked Sendable {
    let manager: KeepAliveManager
    let logger: Logger
    private(set) var watcher: LogindWatcher?
    let idleTimer: IntervalTimer
    private var machine: PauseStateMachine
    /// A reload's new policy, handed over from whichever thread reloaded.
    private let pendingPolicy = Locked<PauseStateMachine.Policy?>(nil)
    private var warnedNoSession = false
    /// After a lost bus: when to try it again.
    private var backoff: ReconnectBackoff

    init(manager: KeepAliveManager, policy: PauseStateMachine.Policy, logger: Logger) throws(Errno) {
        self.manager = manager
        self.logger = logger
        idleTimer = try IntervalTimer()
        machine = PauseStateMachine(policy: policy)
        watcher = LogindWatcher.open(logger: logger)
        backoff = ReconnectBackoff(connectedAt: monotonicNow())
        warnIfUnfollowable()
    }

    /// For `poll`: the bus (its events change between polls) and the idle timer.
    var busDescriptor: Int32 { watcher?.descriptor ?? -1 }
    var busEvents: Int16 { watcher?.events ?? 0 }
    var pollTimeout: Int32 {
        if let watcher { return watcher.pollTimeout }
        return backoff.due.map { monotonicPollTimeout(until: $0) } ?? -1
    }

    /// Safe from any thread (a reload runs on the control socket's): the idle timer, set to
    /// fire at once, wakes the main loop, which takes the new policy.
    func policyChanged(_ policy: PauseStateMachine.Policy) {
        pendingPolicy.withLock { $0 = policy }
        idleTimer.arm(after: .zero)
    }

    /// Reads what logind said and acts on it; on the main loop only.
    func process(idleTimerFired: Bool, on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("LogindFollower.process")
        let now = monotonicNow()
        if let policy = pendingPolicy.withLock({ $0.take() }), policy != machine.policy {
            perform(machine.policyChanged(policy, now: now))
            warnedNoSession = false
            warnIfUnfollowable()
        }
        if idleTimerFired, idleTimer.acknowledge() > 0 {
            perform(machine.idleTimerFired(now: now))
        }
        if watcher == nil, backoff.isDue(at: now) { reconnect(now: now) }
        guard let watcher else { return }
        for event in watcher.process() {
            switch event {
            case .prepareForSleep(let start):
                perform(machine.prepareForSleep(start))
            case .session(let hints):
                perform(machine.session(locked: hints.locked, idle: hints.idle, idleSince: hints.idleSince, now: now))
            case .lost:
                perform(machine.lost())
                self.watcher = nil
                backoff.lost(at: now)
            }
        }
    }

    private func perform(_ action: PauseStateMachine.Action) {
        switch action {
        case .none:
            break
        case .sleep:
            manager.pause(.sleep)
            watcher?.releaseSleepLock()
        case .wake:
            watcher?.takeSleepLock()
            manager.resume(.sleep)
        case .update(let pause, let resume, let timer):
            // New holds before released ones: an output held for one reason or the other never
            // opens in between.
            for reason in pause.sorted() { manager.pause(reason) }
            for reason in resume.sorted() { manager.resume(reason) }
            switch timer {
            case .unchanged: break
            case .arm(let delay): idleTimer.arm(after: delay)
            case .disarm: idleTimer.disarm()
            }
        }
    }

    /// Tries the bus again after a loss: on success logind is followed as at start (a new
    /// lock, the session's hints read at once); otherwise waits longer.
    private func reconnect(now: Duration) {
        guard let opened = LogindWatcher.open(logger: logger) else {
            backoff.failed(at: now)
            return
        }
        // logind may come back after the bus: the watcher takes it up when it does.
        logger.notice("back on the system bus; following logind")
        watcher = opened
        backoff.connected(at: now)
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
