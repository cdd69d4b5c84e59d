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
    /// Its `application.name` ("keepalived" for keepalived's streams), as ``displayName(_:)``
    /// makes it: any client names its streams as it likes (a sandboxed app included).
    package var application: String
    /// Its sample rate (0 when the server gave none).
    package var rate: UInt32
    /// For a stream of keepalived's own: the name of the sink it was opened for (its
    /// `keepalived.sink` property), wherever the server has it now; nil for any other.
    package var home: String?

    package init(index: UInt32, sink: UInt32, isCorked: Bool, isOwn: Bool, application: String, rate: UInt32 = 0, home: String? = nil) {
        self.index = index
        self.sink = sink
        self.isCorked = isCorked
        self.isOwn = isOwn
        self.application = Self.displayName(application)
        self.rate = rate
        self.home = home
    }

    /// The longest name kept, in Unicode scalars.
    package static let maximumNameLength = 64

    /// A name another program chose, fit to show and to pass on (logs, `status`, a hook's
    /// `KEEPALIVED_PROGRAM`): control characters (a newline, an escape sequence) become `?`, and
    /// it is cut to ``maximumNameLength``.
    package static func displayName(_ name: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in name.unicodeScalars.prefix(maximumNameLength) {
            let control = scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}"
            scalars.append(control ? "?" : scalar)
        }
        return String(scalars)
    }

    /// Another keepalived's stream: it keeps a sink awake, but is not a sound that needs it.
    package var isAnotherKeepalived: Bool {
        !isOwn && (application == "keepalived" || application.hasSuffix("[keepalived]"))
    }
}
