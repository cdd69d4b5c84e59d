/// Where a keep-alive, or one of its outputs, stands.
///
/// Each output moves through these states on its own (see <doc:StateMachine> for the diagram);
/// ``KeepAliveManager/state`` sums them up: ``stopped`` when the manager is not running,
/// ``playing`` when every output plays, otherwise the state of the first output that does not
/// (an output still ``starting`` first).
///
/// ```swift
/// let state = manager.state
/// switch state.kind {
/// case .playing: print("awake")
/// case .waitingForDevice: print("waiting: \(state.reason ?? .unknown)")
/// default: break
/// }
/// ```
///
/// A struct, not an enumeration, so that the library can add a state without breaking anyone's
/// `switch`: switch over ``kind`` with a `default`, and read the reason behind a state from
/// ``reason`` or ``pauseReason``. The values are made and compared as an enumeration's cases
/// were (`state == .recovering(.underrun)`).
public struct KeepAliveState: Sendable, Hashable, CustomStringConvertible {
    /// The library's own exhaustive view: its switches must still handle every state, and only
    /// an embedder's may end in `default`.
    enum Storage: Sendable, Hashable {
        case stopped
        case starting
        case playing
        case waitingForDevice(InterruptionReason)
        case recovering(InterruptionReason)
        case paused(PauseReason)
    }

    let storage: Storage

    init(_ storage: Storage) { self.storage = storage }

    /// Not playing and not trying to.
    public static let stopped = KeepAliveState(.stopped)
    /// Opening the output for the first time.
    public static let starting = KeepAliveState(.starting)
    /// The stream is running: the device took the first audio. With
    /// ``KeepAliveSignal/openOnly``, which writes nothing, it is open and held.
    public static let playing = KeepAliveState(.playing)
    /// The output cannot be opened; the engine retries with backoff.
    public static func waitingForDevice(_ reason: InterruptionReason) -> KeepAliveState { KeepAliveState(.waitingForDevice(reason)) }
    /// The stream was interrupted and is being brought back.
    public static func recovering(_ reason: InterruptionReason) -> KeepAliveState { KeepAliveState(.recovering(reason)) }
    /// Held closed on purpose (``KeepAliveManager/pause(_:)``) until resumed; the strongest
    /// reason that holds the output. Named `sleeping` for ``PauseReason/sleep``, `paused`
    /// otherwise.
    public static func paused(_ reason: PauseReason) -> KeepAliveState { KeepAliveState(.paused(reason)) }

    /// Which state this is, without its reason: what a `switch` matches.
    ///
    /// ```swift
    /// let state = manager.state
    /// if state.kind == .recovering, let reason = state.reason { print("recovering from \(reason)") }
    /// ```
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        /// The kind's name, as `waitingForDevice`.
        public let description: String
        private init(_ name: String) { description = name }

        /// ``KeepAliveState/stopped``.
        public static let stopped = Kind("stopped")
        /// ``KeepAliveState/starting``.
        public static let starting = Kind("starting")
        /// ``KeepAliveState/playing``.
        public static let playing = Kind("playing")
        /// ``KeepAliveState/waitingForDevice(_:)``, whatever its reason.
        public static let waitingForDevice = Kind("waitingForDevice")
        /// ``KeepAliveState/recovering(_:)``, whatever its reason.
        public static let recovering = Kind("recovering")
        /// ``KeepAliveState/paused(_:)``, whatever its reason (``PauseReason/sleep`` included).
        public static let paused = Kind("paused")
    }

    /// Which state this is, without its reason.
    public var kind: Kind {
        switch storage {
        case .stopped: .stopped
        case .starting: .starting
        case .playing: .playing
        case .waitingForDevice: .waitingForDevice
        case .recovering: .recovering
        case .paused: .paused
        }
    }

    /// A short machine-readable name: `stopped`, `starting`, `playing`, `waiting`, `recovering`,
    /// `sleeping`, `paused`.
    public var name: String {
        switch storage {
        case .stopped: "stopped"
        case .starting: "starting"
        case .playing: "playing"
        case .waitingForDevice: "waiting"
        case .recovering: "recovering"
        case .paused(.sleep): "sleeping"
        case .paused: "paused"
        }
    }

    /// The reason behind a waiting or recovering state, `nil` otherwise.
    public var reason: InterruptionReason? {
        switch storage {
        case .waitingForDevice(let reason), .recovering(let reason): reason
        default: nil
        }
    }

    /// Why a paused output is held, `nil` otherwise.
    public var pauseReason: PauseReason? {
        if case .paused(let reason) = storage { reason } else { nil }
    }

    /// The name, with the reason in parentheses for a waiting, recovering or paused state:
    /// `playing`, `waiting for device (no-device)`, `recovering (underrun)`, `paused (locked)`,
    /// `sleeping`.
    public var description: String {
        switch storage {
        case .waitingForDevice(let reason): "waiting for device (\(reason))"
        case .recovering(let reason): "recovering (\(reason))"
        case .paused(.sleep): name
        case .paused(let reason): "paused (\(reason))"
        default: name
        }
    }
}
