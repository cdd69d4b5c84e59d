/// Something that happened to a keep-alive, delivered on ``KeepAliveManager/events``.
///
/// One run of a healthy output looks like this (outputs begin in ``KeepAliveState/starting``
/// when ``KeepAliveManager/start()`` returns, so no event announces that state):
///
/// ```
/// started
/// opened(device: "default", format: S16_LE 44100 Hz 1 ch, …)
/// stateChanged(device: "default", state: .playing)
/// …
/// stateChanged(device: "default", state: .stopped)
/// stopped
/// ```
///
/// An interruption adds ``error(device:reason:message:)`` (once per failed attempt),
/// ``stateChanged(device:state:)`` to ``KeepAliveState/recovering(_:)`` or
/// ``KeepAliveState/waitingForDevice(_:)``, then ``recovered(device:reason:downtime:)`` and
/// ``stateChanged(device:state:)`` back to ``KeepAliveState/playing`` once audio flows again.
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
public enum KeepAliveEvent: Sendable, Equatable, CustomStringConvertible {
    /// ``KeepAliveManager/start()`` began playback.
    case started
    /// ``KeepAliveManager/stop()`` ended it; every stream is dropped. Always the last event of a
    /// run, after each output's ``stateChanged(device:state:)`` to ``KeepAliveState/stopped``.
    case stopped
    /// An output's state changed; see <doc:StateMachine>.
    case stateChanged(device: String, state: KeepAliveState)
    /// An output opened with the negotiated format.
    case opened(device: String, format: OutputFormat)
    /// An output plays again after an interruption that lasted `downtime`; `reason` is what
    /// interrupted it first.
    case recovered(device: String, reason: InterruptionReason, downtime: Duration)
    /// An output hit a fault; it recovers on its own. Sent for every failed attempt, so a device
    /// that stays missing sends one per retry.
    case error(device: String, reason: InterruptionReason, message: String)
    /// ``KeepAliveManager/pause(_:)`` (`device` `nil`) or ``KeepAliveManager/pause(_:output:)``
    /// took effect; each output it closed also sends ``stateChanged(device:state:)``.
    case paused(device: String?, reason: PauseReason)
    /// The matching resume; outputs no other reason holds open again.
    case resumed(device: String?, reason: PauseReason)

    /// The output the event is about, or `nil` for ``started``, ``stopped`` and a pause or
    /// resume of the whole manager.
    ///
    /// ```swift
    /// let hdmiEvents = manager.events.filter { $0.device == "hdmi:CARD=PCH,DEV=0" }
    /// ```
    public var device: String? {
        switch self {
        case .started, .stopped: nil
        case .stateChanged(let device, _), .opened(let device, _), .recovered(let device, _, _), .error(let device, _, _): device
        case .paused(let device, _), .resumed(let device, _): device
        }
    }

    /// One line for a log: the event's name, then its fields as `key=value`.
    ///
    /// ```swift
    /// print(KeepAliveEvent.recovered(device: "pulse", reason: .serverGone, downtime: .milliseconds(1500)))
    /// // recovered device=pulse reason=server-gone downtime=1.5 seconds
    /// ```
    public var description: String {
        switch self {
        case .started: "started"
        case .stopped: "stopped"
        case .stateChanged(let device, let state): "state device=\(device) state=\(state)"
        case .opened(let device, let format): "opened device=\(device) format=\(format)"
        case .recovered(let device, let reason, let downtime): "recovered device=\(device) reason=\(reason) downtime=\(downtime)"
        case .error(let device, let reason, let message): "error device=\(device) reason=\(reason) message=\(message)"
        case .paused(let device, let reason): "paused\(device.map { " device=\($0)" } ?? "") reason=\(reason)"
        case .resumed(let device, let reason): "resumed\(device.map { " device=\($0)" } ?? "") reason=\(reason)"
        }
    }
}
