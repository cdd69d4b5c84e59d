/// Why outputs are held closed on purpose: the caller asked for a pause, nothing failed.
///
/// Several reasons can hold at once (a locked session that then sleeps); an output plays again
/// only when every reason that holds it has been resumed. Declared from the strongest to the
/// weakest: a state shows the strongest reason that holds.
///
/// ```swift
/// manager.pause(.locked)            // the session locked: let the speakers sleep
/// manager.state                     // .paused(.locked)
/// manager.resume(.locked)           // unlocked: every output opens again at once
/// ```
public enum PauseReason: String, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
    /// The system is about to sleep: a device must not be written while it suspends.
    case sleep
    /// A player on the same machine has the output's card device: the keepalived daemon lends
    /// it through its `keepalived:` ALSA PCM, and takes it back once the player closes it.
    case lent
    /// The user's session is locked.
    case locked
    /// The user's session has been idle for a while.
    case idle
    /// Nothing else has played on the output's sink for a while: keeping it awake no longer helps.
    case linger

    /// The name used in logs and the CLI: `sleep`, `lent`, `locked`, `idle`, `linger`.
    public var description: String { rawValue }

    /// Stronger reasons sort first.
    public static func < (lhs: PauseReason, rhs: PauseReason) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
