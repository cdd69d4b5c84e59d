import ArgumentParser
import _KeepalivedControlProtocol
import Glibc

/// `keepalived events`: a running daemon's changes of activity, one JSON line each, as they
/// happen, until it stops or this is interrupted. For scripts and home automation:
/// `keepalived events | while read -r line; do …; done`.
package struct EventsCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print each output's changes between active and idle as JSON lines, as they happen.",
        discussion: """
            Each line is one object: {"event":"active"|"idle","output":PCM,"program":NAME,"card":N,"device":N,"sink":NAME,"time":UNIX_SECONDS} \
            (card and device for a card's output, sink for a sound server's). An output is active from \
            the first real audio on it (a player through the keepalived: PCM, another stream on its sink) \
            and idle once none has played for --on-idle-after. Exit status: 0 when the daemon stops, \
            3 when none runs, 1 when the socket misbehaves.
            """)

    @OptionGroup var socket: SocketOption

    package func run() throws {
        let paths = socket.paths
        let fd: Int32
        switch UnixSocket.connect(paths.socket) {
        case .success(let connected): fd = connected
        case .failure(let error) where [ENOENT, ECONNREFUSED, ENOTDIR].contains(error.code):
            printError("keepalived is not running (no daemon on \(paths.socket))")
            throw ExitCode(3)
        case .failure(let error):
            printError("keepalived: error: cannot connect to \(paths.socket): \(error)")
            throw ExitCode(1)
        }
        defer { close(fd) }
        guard UnixSocket.send(fd, ControlJSON.encode(ControlRequest(request: "events")) + "\n") else {
            printError("keepalived: error: cannot send to \(paths.socket): \(Errno(errno))")
            throw ExitCode(1)
        }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var answered = false
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            pending += chunk[0..<count]
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(pending[...newline])
                pending.removeSubrange(...newline)
                if answered {
                    // At once: a reader waits for each line, not for a buffer to fill.
                    line.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
                    continue
                }
                answered = true
                guard let reply = try? ControlJSON.decode(ControlReply.self, from: line.dropLast()) else {
                    printError("keepalived: error: malformed reply from \(paths.socket)")
                    throw ExitCode(1)
                }
                guard reply.ok else {
                    printError("keepalived: error: \(reply.error ?? "request refused")")
                    throw ExitCode(1)
                }
            }
        }
        guard answered else {
            printError("keepalived: error: no reply from \(paths.socket)")
            throw ExitCode(1)
        }
    }
}
