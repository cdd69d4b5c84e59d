import Glibc
import KeepAlive
import _KeepalivedControlProtocol

/// Sends one request to a running daemon's control socket and reads its reply.
enum ControlClient {
    enum Failure: Error, CustomStringConvertible {
        /// No daemon listens on the socket (missing, or stale and refusing).
        case notRunning
        /// The daemon answered with an error.
        case refused(String)
        /// The socket misbehaved (timeout, bad reply).
        case failed(String)

        var description: String {
            switch self {
            case .notRunning: "keepalived is not running"
            case .refused(let message): message
            case .failed(let message): message
            }
        }
    }

    static func send(_ request: String, to paths: RuntimePaths, timeout: Duration = .seconds(2)) -> Result<ControlReply, Failure> {
        let fd: Int32
        switch UnixSocket.connect(paths.socket) {
        case .success(let connected): fd = connected
        case .failure(let error) where [ENOENT, ECONNREFUSED, ENOTDIR].contains(error.code): return .failure(.notRunning)
        case .failure(let error): return .failure(.failed("cannot connect to \(paths.socket): \(error)"))
        }
        defer { close(fd) }
        var limit = timeout.timeval
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        // A daemon that refuses the peer answers and hangs up at once, maybe before the request
        // is out: a failed send still leaves its answer to read.
        let sent = UnixSocket.send(fd, ControlJSON.encode(ControlRequest(request: request)) + "\n")
        let sendError = Errno(errno)
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while !reply.contains(UInt8(ascii: "\n")) {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            if count < 0, !sent { break }
            if count < 0 { return .failure(.failed("no reply from \(paths.socket): \(Errno(errno))")) }
            if count == 0 { break }
            reply += chunk[0..<count]
            if reply.count > 1 << 20 { return .failure(.failed("reply from \(paths.socket) is too large")) }
        }
        let line = reply.split(separator: UInt8(ascii: "\n")).first ?? []
        if !sent, line.isEmpty { return .failure(.failed("cannot send to \(paths.socket): \(sendError)")) }
        guard let decoded = try? ControlJSON.decode(ControlReply.self, from: line) else {
            return .failure(.failed("malformed reply from \(paths.socket)"))
        }
        guard decoded.ok else { return .failure(.refused(decoded.error ?? "request refused")) }
        return .success(decoded)
    }
}
