/// Decides when a daemon pauses for the system's sleep or the user's locked or idle session,
/// from what logind says. Pure logic: the caller performs the returned actions in order and
/// calls ``idleTimerFired(now:)`` when the timer it was asked to arm fires.
///
/// Sleep always counts: the outputs close before the system sleeps, and only then may the
/// delay lock go, so sleep waits no longer than closing takes. Lock and idle count only when
/// asked for (`--pause-when`); idle counts from logind's `IdleSinceHint` (the user's last
/// activity), so a session idle for 10 minutes pauses with `--idle-after 10min` even when the
/// desktop reported it idle after 5.
///
/// ```swift
/// var machine = PauseStateMachine(policy: .init(pauseWhen: [.locked]))
/// machine.prepareForSleep(true)   // [.pause(.sleep), .releaseSleepLock]
/// machine.prepareForSleep(false)  // [.takeSleepLock, .resume(.sleep)]
/// ```
package struct PauseStateMachine: Sendable {
    /// What the user asked to pause for.
    package struct Policy: Sendable, Hashable {
        package var pauseWhen: Set<Condition>
        package var idleAfter: Duration

        package init(pauseWhen: Set<Condition> = [], idleAfter: Duration = Self.defaultIdleAfter) {
            self.pauseWhen = pauseWhen
            self.idleAfter = idleAfter
        }

        /// `--idle-after`'s default.
        package static let defaultIdleAfter: Duration = .seconds(600)
    }

    /// A session condition `--pause-when` names.
    package enum Condition: String, Sendable, Hashable, CaseIterable, Comparable {
        case locked, idle

        package static func < (lhs: Condition, rhs: Condition) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    package enum Action: Sendable, Hashable {
        case pause(PauseReason)
        case resume(PauseReason)
        /// Every output is closed: logind may go on with sleep.
        case releaseSleepLock
        /// Back from sleep: hold up the next sleep again.
        case takeSleepLock
        /// Call ``idleTimerFired(now:)`` after this long.
        case armIdleTimer(Duration)
        case disarmIdleTimer
    }

    package private(set) var policy: Policy
    private var sleeping = false
    private var locked = false
    /// Since when the session is idle (CLOCK_MONOTONIC), `nil` while it is active.
    private var idleSince: Duration?
    /// What the manager was told to pause for and not yet to resume.
    package private(set) var paused: Set<PauseReason> = []
    private var timerArmed = false

    package init(policy: Policy) {
        self.policy = policy
    }

    package mutating func prepareForSleep(_ start: Bool) -> [Action] {
        guard start != sleeping else { return [] }
        sleeping = start
        // Close first, then let sleep go on; after resume, guard the next sleep before playing.
        if start { return reconcile(now: nil) + [.releaseSleepLock] }
        return [.takeSleepLock] + reconcile(now: nil)
    }

    /// The session's `LockedHint`, `IdleHint` and `IdleSinceHintMonotonic` as logind has them
    /// now. `idleSince` is ignored while not idle; 0 (unknown) counts from `now`.
    package mutating func session(locked: Bool, idle: Bool, idleSince: Duration, now: Duration) -> [Action] {
        self.locked = locked
        if !idle {
            self.idleSince = nil
        } else if self.idleSince == nil || idleSince != .zero {
            self.idleSince = idleSince == .zero ? now : idleSince
        }
        return reconcile(now: now)
    }

    package mutating func idleTimerFired(now: Duration) -> [Action] {
        timerArmed = false
        return reconcile(now: now)
    }

    /// A reload changed `--pause-when` or `--idle-after`.
    package mutating func policyChanged(_ policy: Policy, now: Duration) -> [Action] {
        self.policy = policy
        return reconcile(now: now)
    }

    /// logind is out of reach: nothing it said holds any more, so play (keeping awake is the
    /// safe side).
    package mutating func lost() -> [Action] {
        sleeping = false
        locked = false
        idleSince = nil
        return reconcile(now: nil)
    }

    private var wanted: Set<PauseReason> {
        var reasons: Set<PauseReason> = []
        if sleeping { reasons.insert(.sleep) }
        if locked, policy.pauseWhen.contains(.locked) { reasons.insert(.locked) }
        return reasons
    }

    private mutating func reconcile(now: Duration?) -> [Action] {
        var want = wanted
        var actions: [Action] = []
        // Idle is decided against the clock; an event without `now` keeps the idle decision.
        var idleDue: Duration?
        if policy.pauseWhen.contains(.idle), let idleSince {
            if let now {
                let elapsed = now - idleSince
                if elapsed >= policy.idleAfter { want.insert(.idle) } else { idleDue = policy.idleAfter - elapsed }
            } else if paused.contains(.idle) {
                want.insert(.idle)
            }
        }
        // New holds before released ones: an output held for one reason or the other never
        // opens in between.
        for reason in PauseReason.allCases where want.contains(reason) && !paused.contains(reason) {
            actions.append(.pause(reason))
        }
        for reason in PauseReason.allCases where paused.contains(reason) && !want.contains(reason) {
            actions.append(.resume(reason))
        }
        paused = want
        if let idleDue {
            actions.append(.armIdleTimer(idleDue))
            timerArmed = true
        } else if timerArmed, now != nil {
            actions.append(.disarmIdleTimer)
            timerArmed = false
        }
        return actions
    }
}
