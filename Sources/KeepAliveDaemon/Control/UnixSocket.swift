import CKeepAliveLinux
import Glibc

/// The small amount of Unix-socket plumbing the control socket needs.
enum UnixSocket {
    /// The longest path `sockaddr_un` holds, less the terminating NUL.
    static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Builds a `sockaddr_un` for `path`; a leading `@` names an abstract socket. Returns nil
    /// when the path does not fit.
    static func address(_ path: String) -> (sockaddr_un, socklen_t)? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength else { return nil }
        let abstract = bytes[0] == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let length = MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1)
        return (address, socklen_t(length))
    }

    /// Connects a stream socket to `path`; returns the descriptor or a positive errno.
    static func connect(_ path: String) -> Result<Int32, Errno> {
        guard let (found, length) = address(path) else { return .failure(Errno(ENAMETOOLONG)) }
        var address = found
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(Errno(errno)) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            return .failure(Errno(code))
        }
        return .success(fd)
    }

    /// The uid and pid of the process at the other end of a connected Unix socket.
    static func peerCredentials(_ fd: Int32) -> (pid: pid_t, uid: uid_t)? {
        var peer = csystem_peer()
        guard csystem_peer_credentials(fd, &peer) == 0 else { return nil }
        return (peer.pid, peer.uid)
    }

    /// Writes all of `text`, giving up on a peer that does not read (never blocks long).
    @discardableResult
    static func send(_ fd: Int32, _ text: String) -> Bool {
        var bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                return false
            }
            sent += count
        }
        return true
    }
}
