import KeepAlive

/// Decides when a daemon pauses for the system's sleep or the user's locked or idle session,
/// from what logind says. Pure logic, in the shape of swift-nio's state machines: one ``State``
/// whose cases carry their data, one mutating function per event returning the one ``Action``
/// the caller carries out; it calls ``idleTimerFired(now:)`` when the timer it was asked to arm
/// fires. No event is impossible here: logind may repeat a signal, and the caller's timer also
/// wakes it for other reasons.
///
/// Sleep always counts: the outputs close before the system sleeps, and only then may the
/// delay lock go, so sleep waits no longer than closing takes. Lock and idle count only when
/// asked for (`--pause-when`); idle counts from logind's `IdleSinceHint` (the user's last
/// activity), so a session idle for 10 minutes pauses with `--idle-after 10min` even when the
/// desktop reported it idle after 5.
///
/// ```swift
/// var machine = PauseStateMachine(policy: .init(pauseWhen: [.locked]))
/// machine.prepareForSleep(true)   // .sleep: pause for sleep, then release the sleep lock
/// machine.prepareForSleep(false)  // .wake: take the sleep lock, then resume
/// ```
struct PauseStateMachine: Sendable {
    /// What the user asked to pause for.
    struct Policy: Sendable, Hashable {
        var pauseWhen: Set<Condition>
        var idleAfter: Duration

        init(pauseWhen: Set<Condition> = [], idleAfter: Duration = Self.defaultIdleAfter) {
            self.pauseWhen = pauseWhen
            self.idleAfter = idleAfter
        }

        /// `--idle-after`'s default.
        static let defaultIdleAfter: Duration = .seconds(600)
    }

    /// A session condition `--pause-when` names.
    enum Condition: String, Sendable, Hashable, CaseIterable, Comparable {
        case locked, idle

        static func < (lhs: Condition, rhs: Condition) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// What the caller does next.
    enum Action: Sendable, Hashable {
        /// Nothing changes.
        case none
        /// The system is about to sleep: pause for sleep, then release the sleep lock (every
        /// output is closed: logind may go on).
        case sleep
        /// Back from sleep: take the sleep lock (hold up the next sleep again), then resume
        /// from sleep.
        case wake
        /// The session's holds changed: pause for `pause` first, then resume from `resume` (an
        /// output held for one reason or the other never opens in between), each in
        /// ``PauseReason`` order, then set the idle timer.
        case update(pause: Set<PauseReason>, resume: Set<PauseReason>, timer: IdleTimer)
    }

    /// What to do with the idle timer.
    enum IdleTimer: Sendable, Hashable {
        case unchanged
        /// Call ``idleTimerFired(now:)`` after this long.
        case arm(Duration)
        case disarm
    }

    /// Where the system and the session stand, as logind last said.
    enum State: Sendable, Hashable {
        case awake(Session)
        /// Between `PrepareForSleep(true)` and `PrepareForSleep(false)`: paused for sleep, the
        /// sleep lock released.
        case asleep(Session)

        var session: Session {
            switch self {
            case .awake(let session), .asleep(let session): session
            }
        }
    }

    /// The session's hints, and what was decided about idle.
    struct Session: Sendable, Hashable {
        /// logind's `LockedHint`.
        var locked = false
        var idle = Idle.active
    }

    enum Idle: Sendable, Hashable {
        case active
        /// Idle since `since` (CLOCK_MONOTONIC, the user's last activity).
        case idle(since: Duration, IdleDecision)
    }

    /// What was decided about an idle session.
    enum IdleDecision: Sendable, Hashable {
        /// Nothing: `--pause-when` leaves idle out.
        case ignored
        /// The idle timer runs for the rest of `--idle-after`.
        case timing
        /// Paused: idle for `--idle-after` already.
        case paused
    }

    private(set) var policy: Policy
    private(set) var state: State = .awake(Session())

    init(policy: Policy) {
        self.policy = policy
    }

    /// What the manager was told to pause for and not yet to resume.
    var paused: Set<PauseReason> { Self.paused(state, policy) }

    // MARK: - Events

    mutating func prepareForSleep(_ start: Bool) -> Action {
        // Close first, then let sleep go on; after resume, guard the next sleep before playing.
        switch (state, start) {
        case (.awake(let session), true):
            state = .asleep(session)
            return .sleep
        case (.asleep(let session), false):
            state = .awake(session)
            return .wake
        case (.awake, false), (.asleep, true):
            // A repeated signal changes nothing.
            return .none
        }
    }

    /// The session's `LockedHint`, `IdleHint` and `IdleSinceHintMonotonic` as logind has them
    /// now. `idleSince` is ignored while not idle; 0 (unknown) counts from when idle was
    /// first seen.
    mutating func session(locked: Bool, idle: Bool, idleSince: Duration, now: Duration) -> Action {
        var session = state.session
        session.locked = locked
        switch (session.idle, idle) {
        case (_, false):
            session.idle = .active
        case (.active, true):
            session.idle = .idle(since: idleSince == .zero ? now : idleSince, .ignored)
        case (.idle(_, let decision), true) where idleSince != .zero:
            session.idle = .idle(since: idleSince, decision)
        case (.idle, true):
            break
        }
        return decide(session, now: now, timerArmed: timerArmed)
    }

    /// The idle timer fired (or the caller's timer woke it early).
    mutating func idleTimerFired(now: Duration) -> Action {
        decide(state.session, now: now, timerArmed: false)
    }

    /// A reload changed `--pause-when` or `--idle-after`.
    mutating func policyChanged(_ policy: Policy, now: Duration) -> Action {
        let before = paused
        self.policy = policy
        return decide(state.session, now: now, timerArmed: timerArmed, pausedBefore: before)
    }

    /// logind is out of reach: nothing it said holds any more, so play (keeping awake is the
    /// safe side), and no idle timer runs.
    mutating func lost() -> Action {
        let action = Self.update(from: paused, to: [], timer: timerArmed ? .disarm : .unchanged)
        state = .awake(Session())
        return action
    }

    // MARK: - Rules

    private var timerArmed: Bool {
        if case .idle(_, .timing) = state.session.idle { true } else { false }
    }

    private static func paused(_ state: State, _ policy: Policy) -> Set<PauseReason> {
        var reasons: Set<PauseReason> = []
        if case .asleep = state { reasons.insert(.sleep) }
        let session = state.session
        if session.locked, policy.pauseWhen.contains(.locked) { reasons.insert(.locked) }
        if case .idle(_, .paused) = session.idle { reasons.insert(.idle) }
        return reasons
    }

    /// Decides idle against the clock for `session`, stores it, and says what changed since
    /// `pausedBefore` (by default what was paused before).
    private mutating func decide(_ session: Session, now: Duration, timerArmed: Bool, pausedBefore: Set<PauseReason>? = nil) -> Action {
        let before = pausedBefore ?? paused
        var session = session
        var timer = IdleTimer.unchanged
        if case .idle(let since, _) = session.idle {
            let elapsed = now - since
            if !policy.pauseWhen.contains(.idle) {
                session.idle = .idle(since: since, .ignored)
            } else if elapsed >= policy.idleAfter {
                session.idle = .idle(since: since, .paused)
            } else {
                session.idle = .idle(since: since, .timing)
                timer = .arm(policy.idleAfter - elapsed)
            }
        }
        if timer == .unchanged, timerArmed { timer = .disarm }
        switch state {
        case .awake: state = .awake(session)
        case .asleep: state = .asleep(session)
        }
        return Self.update(from: before, to: paused, timer: timer)
    }

    private static func update(from before: Set<PauseReason>, to after: Set<PauseReason>, timer: IdleTimer) -> Action {
        let pause = after.subtracting(before)
        let resume = before.subtracting(after)
        if pause.isEmpty, resume.isEmpty, timer == .unchanged { return .none }
        return .update(pause: pause, resume: resume, timer: timer)
    }
}
