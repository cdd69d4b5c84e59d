/// Turns the bytes of one control connection into requests, one JSON object per line.
///
/// This is the only code that reads what a client sends, so it is kept free of sockets to be
/// fuzzed on its own (`Tests/Fuzz`): whatever arrives, it either yields a request, an error to
/// send back, or asks for more bytes, and it never holds more than ``limit`` bytes of one line
/// plus the last chunk read.
///
/// ```swift
/// var reader = ControlRequestReader()
/// reader.append(contentsOf: Array(#"{"request":"status"}"#.utf8) + [0x0A])
/// let next = reader.next()   // .request(.status)
/// ```
public struct ControlRequestReader: Sendable {
    /// What the next complete line held.
    public enum Next: Equatable, Sendable {
        /// A well-formed request.
        case request(ControlCommand)
        /// A complete line that is not a request; the connection may go on.
        case invalid(ControlRequestError)
        /// A line grew past the limit; the connection must close.
        case overLimit(ControlRequestError)
    }

    /// The longest line accepted, in bytes, not counting its newline.
    public let limit: Int
    private var pending: [UInt8] = []
    /// Where the next line starts in `pending`; consumed lines are dropped in one move per
    /// ``append(contentsOf:)`` rather than one per line.
    private var start = 0

    /// A reader that refuses lines longer than `limit` bytes.
    public init(limit: Int = 64 * 1024) { self.limit = limit }

    /// Bytes of an incomplete line held so far.
    public var bufferedByteCount: Int { pending.count - start }

    /// Adds bytes as they arrived from the connection.
    public mutating func append(contentsOf bytes: some Collection<UInt8>) {
        if start > 0 {
            pending.removeSubrange(..<start)
            start = 0
        }
        pending.append(contentsOf: bytes)
    }

    /// The next complete line's meaning, or nil when no complete line is buffered.
    public mutating func next() -> Next? {
        guard let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) else {
            guard bufferedByteCount > limit else { return nil }
            return .overLimit(.tooLarge(limit: limit))
        }
        let line = pending[start..<newline]
        start = newline + 1
        guard line.count <= limit else { return .overLimit(.tooLarge(limit: limit)) }
        do {
            return .request(try ControlCommand(parsing: line))
        } catch {
            return .invalid(error)
        }
    }
}

/// Why a line on the control socket was refused; the text is sent back to the client.
///
/// ```swift
/// print(ControlRequestError.tooLarge(limit: 65536))   // request too large: over 65536 bytes without a newline
/// ```
public enum ControlRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not one JSON object with a string `request`.
    case malformed
    /// A request name the daemon does not know (cut to 64 characters).
    case unknown(String)
    /// A `release` without a card or device number, or with one out of ALSA's range (the
    /// field's name, and the range).
    case badRelease(String)
    /// A line longer than the reader's limit.
    case tooLarge(limit: Int)

    /// The text sent back to the client.
    public var description: String {
        switch self {
        case .malformed: "malformed request: expected one JSON object like {\"request\":\"status\"} per line"
        case .unknown(let name): "unknown request '\(name)': expected status, stop, reload or release"
        case .badRelease(let why): "bad release request: \(why)"
        case .tooLarge(let limit): "request too large: over \(limit) bytes without a newline"
        }
    }
}
