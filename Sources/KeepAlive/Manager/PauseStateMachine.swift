/// Decides whether a keep-alive plays, sleeps with the system, or pauses for a locked or idle
/// session, from logind's events. Pure logic: the caller performs the returned actions in order.
///
/// Sleep comes first: the outputs close before the system sleeps (then the delay lock may go,
/// so sleep is never held up longer than closing takes) and nothing reopens until resume. Lock
/// and idle only count when the user asked for them (`--pause-when`).
///
/// ```swift
/// var machine = PauseStateMachine(pauseWhen: [.locked])
/// machine.prepareForSleep(true)   // [.pause(.sleep), .releaseSleepLock]
/// machine.prepareForSleep(false)  // [.takeSleepLock, .resume]
/// ```
struct PauseStateMachine: Sendable {
    enum Cause: String, Sendable, Hashable, CaseIterable {
        case sleep, locked, idle
    }

    enum Action: Sendable, Hashable {
        /// Close every output (or keep them closed) for this cause.
        case pause(Cause)
        case resume
        /// Closing is done: logind may go on with sleep.
        case releaseSleepLock
        case takeSleepLock
    }

    let pauseWhen: Set<Cause>
    private(set) var sleeping = false
    private(set) var locked = false
    private(set) var idle = false

    init(pauseWhen: Set<Cause>) {
        self.pauseWhen = pauseWhen.subtracting([.sleep])
    }

    /// Why the outputs are closed now, `nil` while they play. Sleep wins over lock, lock over idle.
    var cause: Cause? {
        if sleeping { return .sleep }
        if locked && pauseWhen.contains(.locked) { return .locked }
        if idle && pauseWhen.contains(.idle) { return .idle }
        return nil
    }

    mutating func prepareForSleep(_ start: Bool) -> [Action] {
        guard start != sleeping else { return [] }
        let before = cause
        sleeping = start
        // Already closed for a lock or idle: the pause only renames the cause, so the lock can
        // still go at once.
        if start { return [.pause(.sleep), .releaseSleepLock] }
        return [.takeSleepLock] + transition(from: before)
    }

    mutating func lockedChanged(_ value: Bool) -> [Action] {
        let before = cause
        locked = value
        return transition(from: before)
    }

    mutating func idleChanged(_ value: Bool) -> [Action] {
        let before = cause
        idle = value
        return transition(from: before)
    }

    private func transition(from before: Cause?) -> [Action] {
        let after = cause
        guard after != before else { return [] }
        guard let after else { return [.resume] }
        return [.pause(after)]
    }
}
