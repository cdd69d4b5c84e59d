import Foundation
import Synchronization

/// A listening Unix socket that accepts every connection and never answers: a wedged server as
/// its clients meet it (PipeWire's native protocol waits for the server's hello). Counts the
/// connections, so a test sees each attempt of a client that would otherwise only time out.
final class SilentSocket: Sendable {
    let path: String
    private let listener: Int32
    private let connections = Connections()

    private final class Connections: Sendable {
        let accepted = Mutex<[Int32]>([])
    }

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("silent-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0, withUnixAddress(path, { bind(listener, $0, $1) }) == 0, listen(listener, 64) == 0 else {
            let code = errno
            if listener >= 0 { close(listener) }
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        let thread = Thread { [listener, connections] in
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 {
                    if errno == EINTR { continue }
                    return
                }
                connections.accepted.withLock { $0.append(fd) }
            }
        }
        thread.start()
    }

    /// The connections accepted so far.
    var accepted: Int { connections.accepted.withLock { $0.count } }

    deinit {
        // Wakes the accepting thread (accept fails on a shut-down socket) and frees the rest.
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in connections.accepted.withLock({ $0 }) { close(fd) }
        unlink(path)
    }
}
