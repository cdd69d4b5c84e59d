/// Where a keep-alive, or one of its outputs, stands.
///
/// Each output moves through these states on its own (see <doc:StateMachine> for the diagram);
/// ``KeepAliveManager/state`` sums them up: ``stopped`` when the manager is not running,
/// ``playing`` when every output plays, otherwise the state of the first output that does not
/// (an output still ``starting`` first).
///
/// ```swift
/// switch manager.state {
/// case .playing: print("awake")
/// case .waitingForDevice(let reason): print("waiting: \(reason)")
/// default: break
/// }
/// ```
public enum KeepAliveState: Sendable, Hashable, CustomStringConvertible {
    /// Not playing and not trying to.
    case stopped
    /// Opening the output for the first time.
    case starting
    /// The stream is running: the device took the first audio. With
    /// ``KeepAliveSignal/openOnly``, which writes nothing, it is open and held.
    case playing
    /// The output cannot be opened; the engine retries with backoff.
    case waitingForDevice(InterruptionReason)
    /// The stream was interrupted and is being brought back.
    case recovering(InterruptionReason)
    /// Held closed on purpose (``KeepAliveManager/pause(_:)``) until resumed; the strongest
    /// reason that holds the output. Named `sleeping` for ``PauseReason/sleep``, `paused`
    /// otherwise.
    case paused(PauseReason)

    /// A short machine-readable name: `stopped`, `starting`, `playing`, `waiting`, `recovering`,
    /// `sleeping`, `paused`.
    public var name: String {
        switch self {
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
        switch self {
        case .waitingForDevice(let reason), .recovering(let reason): reason
        default: nil
        }
    }

    /// Why a paused output is held, `nil` otherwise.
    public var pauseReason: PauseReason? {
        if case .paused(let reason) = self { reason } else { nil }
    }

    /// The name, with the reason in parentheses for a waiting, recovering or paused state:
    /// `playing`, `waiting for device (no-device)`, `recovering (underrun)`, `paused (locked)`,
    /// `sleeping`.
    public var description: String {
        switch self {
        case .waitingForDevice(let reason): "waiting for device (\(reason))"
        case .recovering(let reason): "recovering (\(reason))"
        case .paused(.sleep): name
        case .paused(let reason): "paused (\(reason))"
        default: name
        }
    }
}
