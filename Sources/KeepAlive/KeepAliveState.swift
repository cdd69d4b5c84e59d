/// Where a keep-alive, or one of its outputs, stands.
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
    /// The stream is running.
    case playing
    /// The output cannot be opened; the engine retries with backoff.
    case waitingForDevice(InterruptionReason)
    /// The stream was interrupted and is being brought back.
    case recovering(InterruptionReason)

    /// A short machine-readable name: `stopped`, `starting`, `playing`, `waiting`, `recovering`.
    public var name: String {
        switch self {
        case .stopped: "stopped"
        case .starting: "starting"
        case .playing: "playing"
        case .waitingForDevice: "waiting"
        case .recovering: "recovering"
        }
    }

    /// The reason behind a waiting or recovering state.
    public var reason: InterruptionReason? {
        switch self {
        case .waitingForDevice(let reason), .recovering(let reason): reason
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .waitingForDevice(let reason): "waiting for device (\(reason))"
        case .recovering(let reason): "recovering (\(reason))"
        default: name
        }
    }
}
