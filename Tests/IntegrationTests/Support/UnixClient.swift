import Foundation
import TestSupport

/// A raw Unix-socket client for poking the daemon's control socket (and a datagram receiver for
/// systemd's notify protocol), with every read bounded by a timeout.
final class UnixClient {
    let fd: Int32

    init(connectingTo path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let result = withUnixAddress(path) { connect(fd, $0, $1) }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
    }

    deinit { close(fd) }

    /// Sends as much of `bytes` as the peer takes within `timeout`; returns the count sent.
    @discardableResult
    func send(_ bytes: [UInt8], timeout: Duration = .seconds(2)) -> Int {
        setTimeout(SO_SNDTIMEO, timeout)
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { break }
            sent += count
        }
        return sent
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    /// Reads one line (without the newline), or nil on EOF or timeout (stretched under a
    /// sanitizer).
    func readLine(timeout: Duration = .seconds(2)) -> String? {
        setTimeout(SO_RCVTIMEO, timeout.underSanitizer)
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while recv(fd, &byte, 1, 0) == 1 {
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
        return line.isEmpty ? nil : String(decoding: line, as: UTF8.self)
    }

    /// Sends a request line and decodes the JSON reply, waiting at most `timeout` for it
    /// (stretched under a sanitizer).
    func request(_ name: String, timeout: Duration = .seconds(2)) throws -> [String: Any] {
        send(#"{"request":"\#(name)"}"# + "\n")
        guard let line = readLine(timeout: timeout) else { throw DeadlineExceeded(what: "a reply to \(name)", timeout: timeout.underSanitizer) }
        return try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
    }

    private func setTimeout(_ option: Int32, _ timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// A datagram socket standing in for systemd's NOTIFY_SOCKET.
final class NotifyListener {
    let fd: Int32
    let path: String
    private(set) var messages: [(at: ContinuousClock.Instant, text: String)] = []

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        let result = withUnixAddress(path) { bind(fd, $0, $1) }
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// Collects every datagram that arrived so far.
    @discardableResult
    func drain() -> [(at: ContinuousClock.Instant, text: String)] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            messages.append((ContinuousClock.now, String(decoding: buffer[0..<count], as: UTF8.self)))
        }
        return messages
    }

    /// Every `KEY=value` assignment received, in order.
    var assignments: [(at: ContinuousClock.Instant, line: String)] {
        drain().flatMap { message in message.text.split(separator: "\n").map { (message.at, String($0)) } }
    }
}

/// Calls `body` with a `sockaddr_un` for `path` (connect, bind).
func withUnixAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}
