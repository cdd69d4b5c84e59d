/// What a client may ask of the daemon.
///
/// ```swift
/// let command = try ControlCommand(parsing: Array(#"{"request":"stop"}"#.utf8))   // .stop
/// ```
public enum ControlCommand: Equatable, Sendable {
    /// The daemon's state and its outputs'.
    case status
    /// Stop the daemon.
    case stop
    /// Reread the options file and apply it.
    case reload
    /// Let the caller have one card device: close keepalived's outputs on it until the caller
    /// closes it.
    case release(ReleaseRequest)
    /// Keep the connection open and send an ``ActivityEvent`` line for each change of activity.
    case events
    /// Carry the caller's audio on keepalived's open stream on one card device (the
    /// `keepalived:` PCM's first question): the connection then belongs to the output's
    /// playback thread, and its close ends the carrying. Same fields as ``release(_:)``.
    case carry(ReleaseRequest)

    /// The request's name on the wire.
    public var name: String {
        switch self {
        case .status: "status"
        case .stop: "stop"
        case .reload: "reload"
        case .release: "release"
        case .events: "events"
        case .carry: "carry"
        }
    }

    /// Reads `{"request":"status"}` and the like; extra keys are ignored, as JSON readers do.
    public init(parsing line: some Collection<UInt8>) throws(ControlRequestError) {
        let request: ControlRequest
        do {
            request = try ControlJSON.decode(ControlRequest.self, from: line)
        } catch {
            throw .malformed
        }
        switch request.request {
        case "status": self = .status
        case "stop": self = .stop
        case "reload": self = .reload
        case "release": self = .release(try ReleaseRequest(request))
        case "events": self = .events
        case "carry": self = .carry(try ReleaseRequest(request))
        default: throw .unknown(String(request.request.prefix(64)))
        }
    }
}
