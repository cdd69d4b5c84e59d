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
struct ControlRequestReader {
    /// What the next complete line held.
    enum Next: Equatable {
        /// A well-formed request.
        case request(ControlCommand)
        /// A complete line that is not a request; the connection may go on.
        case invalid(ControlRequestError)
        /// A line grew past the limit; the connection must close.
        case overLimit(ControlRequestError)
    }

    /// The longest line accepted, in bytes, not counting its newline.
    let limit: Int
    private var pending: [UInt8] = []
    /// Where the next line starts in `pending`; consumed lines are dropped in one move per
    /// ``append(contentsOf:)`` rather than one per line.
    private var start = 0

    init(limit: Int = 64 * 1024) { self.limit = limit }

    /// Bytes of an incomplete line held so far.
    var bufferedByteCount: Int { pending.count - start }

    /// Adds bytes as they arrived from the connection.
    mutating func append(contentsOf bytes: some Collection<UInt8>) {
        if start > 0 {
            pending.removeSubrange(..<start)
            start = 0
        }
        pending.append(contentsOf: bytes)
    }

    /// The next complete line's meaning, or nil when no complete line is buffered.
    mutating func next() -> Next? {
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

/// What a client may ask of the daemon.
enum ControlCommand: String, Equatable, CaseIterable {
    case status, stop, reload

    /// Reads `{"request":"status"}` and the like; extra keys are ignored, as JSON readers do.
    init(parsing line: some Collection<UInt8>) throws(ControlRequestError) {
        let request: ControlRequest
        do {
            request = try ControlJSON.decode(ControlRequest.self, from: line)
        } catch {
            throw .malformed
        }
        guard let command = ControlCommand(rawValue: request.request) else {
            throw .unknown(String(request.request.prefix(64)))
        }
        self = command
    }
}

/// Why a line on the control socket was refused; the text is sent back to the client.
enum ControlRequestError: Error, Equatable, CustomStringConvertible {
    case malformed
    case unknown(String)
    case tooLarge(limit: Int)

    var description: String {
        switch self {
        case .malformed: "malformed request: expected one JSON object like {\"request\":\"status\"} per line"
        case .unknown(let name): "unknown request '\(name)': expected status, stop or reload"
        case .tooLarge(let limit): "request too large: over \(limit) bytes without a newline"
        }
    }
}
