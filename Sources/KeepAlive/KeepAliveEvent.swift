/// Something that happened to a keep-alive, delivered on ``KeepAliveManager/events``.
///
/// ```swift
/// for await event in manager.events {
///     switch event {
///     case .opened(let device, let format): print("\(device): \(format)")
///     case .recovered(let device, let reason, let downtime): print("\(device) recovered from \(reason) after \(downtime)")
///     default: break
///     }
/// }
/// ```
public enum KeepAliveEvent: Sendable, Equatable {
    /// ``KeepAliveManager/start()`` began playback.
    case started
    /// ``KeepAliveManager/stop()`` ended it; every stream is dropped.
    case stopped
    /// An output's state changed.
    case stateChanged(device: String, state: KeepAliveState)
    /// An output opened with the negotiated format.
    case opened(device: String, format: OutputFormat)
    /// An output plays again after an interruption that lasted `downtime`.
    case recovered(device: String, reason: InterruptionReason, downtime: Duration)
    /// An output hit a fault; it recovers on its own.
    case error(device: String, reason: InterruptionReason, message: String)
}
