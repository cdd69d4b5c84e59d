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
///     switch event.kind {
///     case .opened:
///         if let device = event.device, let format = event.format { print("\(device): \(format)") }
///     case .recovered:
///         if let device = event.device, let reason = event.reason, let downtime = event.downtime {
///             print("\(device) recovered from \(reason) after \(downtime)")
///         }
///     default: break
///     }
/// }
/// ```
///
/// A struct, not an enumeration, so that the library can add events without breaking anyone's
/// `switch`: switch over ``kind`` with a `default`, and read an event's fields from its
/// accessors (``device``, ``state``, ``format``, ``reason``, ``downtime``, ``message``,
/// ``pauseReason``), each `nil` on an event that has no such field. Events are made and compared
/// as an enumeration's cases were (`event == .opened(device: "pulse", format: format)`).
public struct KeepAliveEvent: Sendable, Equatable, CustomStringConvertible {
    /// The library's own exhaustive view: its switches must still handle every event, and only
    /// an embedder's may end in `default`.
    enum Storage: Sendable, Equatable {
        case started
        case stopped
        case stateChanged(device: String, state: KeepAliveState)
        case opened(device: String, format: OutputFormat)
        case recovered(device: String, reason: InterruptionReason, downtime: Duration)
        case error(device: String, reason: InterruptionReason, message: String)
        case paused(device: String?, reason: PauseReason)
        case resumed(device: String?, reason: PauseReason)
    }

    let storage: Storage

    init(_ storage: Storage) { self.storage = storage }

    /// ``KeepAliveManager/start()`` began playback.
    public static let started = KeepAliveEvent(.started)
    /// ``KeepAliveManager/stop()`` ended it; every stream is dropped. Always the last event of a
    /// run, after each output's ``stateChanged(device:state:)`` to ``KeepAliveState/stopped``.
    public static let stopped = KeepAliveEvent(.stopped)
    /// An output's state changed; see <doc:StateMachine>.
    public static func stateChanged(device: String, state: KeepAliveState) -> KeepAliveEvent {
        KeepAliveEvent(.stateChanged(device: device, state: state))
    }
    /// An output opened with the negotiated format.
    public static func opened(device: String, format: OutputFormat) -> KeepAliveEvent {
        KeepAliveEvent(.opened(device: device, format: format))
    }
    /// An output plays again after an interruption that lasted `downtime`; `reason` is what
    /// interrupted it first.
    public static func recovered(device: String, reason: InterruptionReason, downtime: Duration) -> KeepAliveEvent {
        KeepAliveEvent(.recovered(device: device, reason: reason, downtime: downtime))
    }
    /// An output hit a fault; it recovers on its own. Sent for every failed attempt, so a device
    /// that stays missing sends one per retry.
    public static func error(device: String, reason: InterruptionReason, message: String) -> KeepAliveEvent {
        KeepAliveEvent(.error(device: device, reason: reason, message: message))
    }
    /// ``KeepAliveManager/pause(_:)`` (`device` `nil`) or ``KeepAliveManager/pause(_:output:)``
    /// took effect; each output it closed also sends ``stateChanged(device:state:)``.
    public static func paused(device: String?, reason: PauseReason) -> KeepAliveEvent {
        KeepAliveEvent(.paused(device: device, reason: reason))
    }
    /// The matching resume; outputs no other reason holds open again.
    public static func resumed(device: String?, reason: PauseReason) -> KeepAliveEvent {
        KeepAliveEvent(.resumed(device: device, reason: reason))
    }

    /// Which event this is, without its fields: what a `switch` matches.
    ///
    /// ```swift
    /// let errors = manager.events.filter { $0.kind == .error }
    /// ```
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        /// The kind's name, as `stateChanged`.
        public let description: String
        private init(_ name: String) { description = name }

        /// ``KeepAliveEvent/started``.
        public static let started = Kind("started")
        /// ``KeepAliveEvent/stopped``.
        public static let stopped = Kind("stopped")
        /// ``KeepAliveEvent/stateChanged(device:state:)``.
        public static let stateChanged = Kind("stateChanged")
        /// ``KeepAliveEvent/opened(device:format:)``.
        public static let opened = Kind("opened")
        /// ``KeepAliveEvent/recovered(device:reason:downtime:)``.
        public static let recovered = Kind("recovered")
        /// ``KeepAliveEvent/error(device:reason:message:)``.
        public static let error = Kind("error")
        /// ``KeepAliveEvent/paused(device:reason:)``.
        public static let paused = Kind("paused")
        /// ``KeepAliveEvent/resumed(device:reason:)``.
        public static let resumed = Kind("resumed")
    }

    /// Which event this is, without its fields.
    public var kind: Kind {
        switch storage {
        case .started: .started
        case .stopped: .stopped
        case .stateChanged: .stateChanged
        case .opened: .opened
        case .recovered: .recovered
        case .error: .error
        case .paused: .paused
        case .resumed: .resumed
        }
    }

    /// The output the event is about, or `nil` for ``started``, ``stopped`` and a pause or
    /// resume of the whole manager.
    ///
    /// ```swift
    /// let hdmiEvents = manager.events.filter { $0.device == "hdmi:CARD=PCH,DEV=0" }
    /// ```
    public var device: String? {
        switch storage {
        case .started, .stopped: nil
        case .stateChanged(let device, _), .opened(let device, _), .recovered(let device, _, _), .error(let device, _, _): device
        case .paused(let device, _), .resumed(let device, _): device
        }
    }

    /// The output's new state in ``stateChanged(device:state:)``, `nil` in any other event.
    public var state: KeepAliveState? {
        if case .stateChanged(_, let state) = storage { state } else { nil }
    }

    /// The negotiated format in ``opened(device:format:)``, `nil` in any other event.
    public var format: OutputFormat? {
        if case .opened(_, let format) = storage { format } else { nil }
    }

    /// What interrupted the output in ``recovered(device:reason:downtime:)`` and
    /// ``error(device:reason:message:)``, `nil` in any other event.
    ///
    /// ```swift
    /// for await event in manager.events where event.kind == .recovered {
    ///     if let reason = event.reason { print("back after \(reason)") }
    /// }
    /// ```
    public var reason: InterruptionReason? {
        switch storage {
        case .recovered(_, let reason, _), .error(_, let reason, _): reason
        default: nil
        }
    }

    /// How long the output was interrupted in ``recovered(device:reason:downtime:)``, `nil` in
    /// any other event.
    public var downtime: Duration? {
        if case .recovered(_, _, let downtime) = storage { downtime } else { nil }
    }

    /// The fault's text in ``error(device:reason:message:)``, `nil` in any other event.
    public var message: String? {
        if case .error(_, _, let message) = storage { message } else { nil }
    }

    /// The reason in ``paused(device:reason:)`` and ``resumed(device:reason:)``, `nil` in any
    /// other event.
    public var pauseReason: PauseReason? {
        switch storage {
        case .paused(_, let reason), .resumed(_, let reason): reason
        default: nil
        }
    }

    /// One line for a log: the event's name, then its fields as `key=value`.
    ///
    /// ```swift
    /// print(KeepAliveEvent.recovered(device: "pulse", reason: .serverGone, downtime: .milliseconds(1500)))
    /// // recovered device=pulse reason=server-gone downtime=1.5 seconds
    /// ```
    public var description: String {
        switch storage {
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
