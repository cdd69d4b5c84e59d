/// One stream playing to a sink of the sound server (a sink input), as ``ServerListing`` listed
/// it.
///
/// ```swift
/// let stream = ServerStream(index: 7, sink: 0, isCorked: false, isOwn: false, application: "mpv")
/// stream.isAnotherKeepalived   // false: a sound that needs its sink awake
/// ```
package struct ServerStream: Sendable, Equatable {
    package var index: UInt32
    /// The index of the sink it plays to.
    package var sink: UInt32
    /// Paused by its client (a corked stream plays nothing).
    package var isCorked: Bool
    /// One of this process's: its process id, or its client's (PipeWire leaves the id on the
    /// client only), is keepalived's.
    package var isOwn: Bool
    /// Its `application.name` ("keepalived" for keepalived's streams).
    package var application: String
    /// Its sample rate (0 when the server gave none).
    package var rate: UInt32

    package init(index: UInt32, sink: UInt32, isCorked: Bool, isOwn: Bool, application: String, rate: UInt32 = 0) {
        self.index = index
        self.sink = sink
        self.isCorked = isCorked
        self.isOwn = isOwn
        self.application = application
        self.rate = rate
    }

    /// Another keepalived's stream: it keeps a sink awake, but is not a sound that needs it.
    package var isAnotherKeepalived: Bool {
        !isOwn && (application == "keepalived" || application.hasSuffix("[keepalived]"))
    }
}
