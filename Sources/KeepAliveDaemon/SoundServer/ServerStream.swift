/// One stream playing to a sink of the sound server (a sink input), as ``ServerListing`` listed
/// it.
///
/// ```swift
/// let stream = ServerStream(index: 7, sink: 0, isCorked: false, isOwn: false, application: "mpv")
/// stream.isAnotherKeepalived   // false: a sound that needs its sink awake
/// ```
struct ServerStream: Sendable, Equatable {
    var index: UInt32
    /// The index of the sink it plays to.
    var sink: UInt32
    /// Paused by its client (a corked stream plays nothing).
    var isCorked: Bool
    /// One of this process's: its process id, or its client's (PipeWire leaves the id on the
    /// client only), is keepalived's.
    var isOwn: Bool
    /// Its `application.name` ("keepalived" for keepalived's streams).
    var application: String

    /// Another keepalived's stream: it keeps a sink awake, but is not a sound that needs it.
    var isAnotherKeepalived: Bool {
        !isOwn && (application == "keepalived" || application.hasSuffix("[keepalived]"))
    }
}
