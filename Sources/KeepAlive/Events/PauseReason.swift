/// Why outputs are held closed on purpose: the caller asked for a pause, nothing failed.
///
/// Several reasons can hold at once (a locked session that then sleeps); an output plays again
/// only when every reason that holds it has been resumed. A state shows the strongest reason that
/// holds: reasons sort from the strongest (``strength``, highest first) to the weakest.
///
/// ```swift
/// manager.pause(.locked)            // the session locked: let the speakers sleep
/// manager.state                     // .paused(.locked)
/// manager.resume(.locked)           // unlocked: every output opens again at once
/// ```
///
/// A struct, not an enumeration, so that a program can hold outputs for reasons of its own and
/// the library can add reasons without breaking anyone's `switch`. Declare yours once, with a
/// name for logs and a strength that places it among the library's (``sleep`` 300, ``locked``
/// 200, ``idle`` 100):
///
/// ```swift
/// extension PauseReason {
///     /// A call is on: the speakers stay quiet until it ends.
///     static let call = PauseReason(name: "call", strength: 250)
/// }
///
/// manager.pause(.call, output: "pulse")
/// manager.resume(.call, output: "pulse")
/// ```
public struct PauseReason: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The name used in logs, events and a daemon's status: `sleep`, `locked`, `idle`, or a
    /// program's own. One name names one reason.
    public let name: String

    /// How strong the reason is: a state shows the strongest reason that holds an output.
    public let strength: Int

    /// A reason of the program's own, with the name logs show and the strength that ranks it.
    public init(name: String, strength: Int) {
        self.name = name
        self.strength = strength
    }

    /// The system is about to sleep: a device must not be written while it suspends.
    public static let sleep = PauseReason(name: "sleep", strength: 300)
    /// The user's session is locked.
    public static let locked = PauseReason(name: "locked", strength: 200)
    /// The user's session has been idle for a while.
    public static let idle = PauseReason(name: "idle", strength: 100)

    /// The reason's ``name``.
    public var description: String { name }

    /// Stronger reasons sort first; reasons of one strength by name.
    public static func < (lhs: PauseReason, rhs: PauseReason) -> Bool {
        lhs.strength != rhs.strength ? lhs.strength > rhs.strength : lhs.name < rhs.name
    }
}
