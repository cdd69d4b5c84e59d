import Glibc
import Logging
import Synchronization
import Testing
import _KeepalivedControlProtocol
import TestSupport

@testable import KeepAliveDaemon

/// The control socket's server in this process, on a real Unix socket in a directory of its own:
/// what it binds, who it refuses, and that a request waiting for the main loop holds up no other
/// client. The daemon's own use of it (and a player group's member) is ControlSocketTests'.
@Suite("Control server: one socket, its owner's, answered on a thread of its own", .serialized)
struct ControlServerTests {
    /// What the handlers were asked, and the reload the test plays the main loop for.
    final class Daemon: Sendable {
        let stops = Atomic<Int>(0)
        let reloads = Mutex<[MainLoopRequest]>([])
        let releases = Atomic<Int>(0)
        let refuseReloads: Bool
        let releaseAnswer: ReleaseAnswer

        init(refuseReloads: Bool = false, releaseAnswer: ReleaseAnswer = .reply(.failure("no release here"))) {
            self.refuseReloads = refuseReloads
            self.releaseAnswer = releaseAnswer
        }

        var handlers: ControlServer.Handlers {
            .init(
                status: { DaemonStatus(state: "playing", pid: getpid(), uptimeSeconds: 1, socket: "test", outputs: []) },
                stop: { self.stops.add(1, ordering: .relaxed) },
                reload: {
                    if self.refuseReloads { return .failure(MainLoopQueue.QueueFailure(reply: .failure("reload not queued: test"))) }
                    let request = try! MainLoopRequest.awaited(trigger: "control socket")
                    self.reloads.withLock { $0.append(request) }
                    return .success(request)
                },
                release: { _, _, _, _ in
                    self.releases.add(1, ordering: .relaxed)
                    return self.releaseAnswer
                })
        }
    }

    let directory: String
    let paths: RuntimePaths

    init() throws {
        var template = Array("/tmp/keepalived-control-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        directory = String(cString: try #require(made))
        paths = RuntimePaths(socketOverride: directory + "/control.sock")
    }

    func removeDirectory() {
        unlink(paths.socket)
        rmdir(directory)
    }

    func server(_ daemon: Daemon) throws -> ControlServer {
        try ControlServer(paths: paths, logger: .quiet, handlers: daemon.handlers)
    }

    @Test("the socket is bound before it serves, mode 0600; a second server on its path is refused, naming the first's pid")
    func bindsOnce() throws {
        defer { removeDirectory() }
        let first = try server(Daemon())
        var info = stat()
        #expect(stat(paths.socket, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFSOCK)
        #expect(info.st_mode & 0o777 == 0o600)
        try first.start()
        defer { first.stop() }
        #expect {
            _ = try server(Daemon())
        } throws: { error in
            guard case ControlSocketError.alreadyRunning(let pid, let socket) = error else { return false }
            return pid == getpid() && socket == paths.socket
        }
    }

    @Test("a socket file nobody answers on (a daemon that died) is replaced; stop() removes it")
    func staleSocket() throws {
        defer { removeDirectory() }
        // What a killed daemon leaves behind: the file of a socket nobody listens on.
        let dead = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard case (var address, let length)? = UnixSocket.address(paths.socket) else { throw Errno(ENAMETOOLONG) }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(dead, $0, length) } }
        close(dead)
        #expect(bound == 0 && access(paths.socket, F_OK) == 0)

        let replacement = try server(Daemon())
        try replacement.start()
        #expect((try? ControlClient.send("stop", to: paths, timeout: .seconds(10)).get())?.ok == true)
        replacement.stop()
        #expect(access(paths.socket, F_OK) != 0, "the socket file is gone after stop()")
    }

    @Test("stop asks the daemon to stop and answers with its pid; an unknown request is refused with the known ones")
    func requests() throws {
        defer { removeDirectory() }
        let daemon = Daemon()
        let server = try server(daemon)
        try server.start()
        defer { server.stop() }
        let stopped = try ControlClient.send("stop", to: paths, timeout: .seconds(10)).get()
        #expect(stopped.pid == getpid())
        #expect(daemon.stops.load(ordering: .relaxed) == 1)
        let status = try ControlClient.send("status", to: paths, timeout: .seconds(10)).get()
        #expect(status.status?.state == "playing")
        guard case .failure(.refused(let message)) = ControlClient.send("dance", to: paths, timeout: .seconds(10)) else {
            Issue.record("an unknown request was not refused")
            return
        }
        #expect(message.contains("unknown request 'dance'") && message.contains("status, stop, reload or release"), "\(message)")
        #expect(daemon.stops.load(ordering: .relaxed) == 1, "nothing but stop stops")
    }

    @Test("a reload waits for the main loop while another client is answered; its reply is the main loop's")
    func reloadDoesNotHoldOthers() throws {
        defer { removeDirectory() }
        let daemon = Daemon()
        let server = try server(daemon)
        try server.start()
        defer { server.stop() }
        let reloading = try Connection(paths.socket)
        try reloading.send(#"{"request":"reload"}"#)
        // Bounded wait for the server to queue the reload: an observable state, not a time.
        pollUntil(timeout: .seconds(20), every: .milliseconds(1)) { !daemon.reloads.withLock { $0.isEmpty } }
        let queued = try #require(daemon.reloads.withLock { $0.first }, "the reload never reached the main loop")

        // The main loop has not answered: another client is served meanwhile.
        let status = try ControlClient.send("status", to: paths, timeout: .seconds(10)).get()
        #expect(status.ok)
        #expect(queued.reply == nil)

        queued.fulfil(ControlReply(ok: true, changed: true))
        let line = try reloading.receiveLine()
        let reply = try ControlJSON.decode(ControlReply.self, from: Array(line.utf8))
        #expect(reply.ok && reply.changed == true, "\(line)")
    }

    @Test("a release whose outputs are still closing: other clients are answered meanwhile, and its reply goes once they are closed")
    func releaseWaitsForClose() throws {
        defer { removeDirectory() }
        let closing = try OutputsClosing()
        let daemon = Daemon(releaseAnswer: .afterClose(closing, reply: ControlReply(ok: true, released: ["hw:0,0"])))
        let server = try server(daemon)
        try server.start()
        defer { server.stop() }
        // Another process: the server answers its own process's releases itself (keepalived's
        // own front door). It prints the reply and the monotonic time it came.
        // (posix_spawn, not Foundation's Process: its weak reference's side table is a leak
        // LeakSanitizer reports at the suite's exit.)
        let player = try Spawned("/usr/bin/python3", ["-c", """
            import socket, sys, time
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(20)
            s.sendall(b'{"request":"release","card":0,"device":0,"program":"mpd"}\\n')
            line = s.makefile().readline().strip()
            print(time.monotonic_ns(), line)
            """, paths.socket])
        pollUntil(timeout: .seconds(20), every: .milliseconds(1)) { daemon.releases.load(ordering: .relaxed) != 0 }
        #expect(daemon.releases.load(ordering: .relaxed) == 1, "the release never reached the handler")

        let status = try ControlClient.send("status", to: paths, timeout: .seconds(10)).get()
        #expect(status.ok, "answered while the release waits")
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let finished = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        closing.finish()
        let printed = player.output()
        let fields = printed.split(separator: " ", maxSplits: 1)
        #expect(fields.count == 2 && fields[1].contains(#""released":["hw:0,0"]"#), "\(printed)")
        // The reply came after the close, never before: an order, whatever the scheduler did.
        #expect(fields.first.flatMap { Int64($0) }.map { $0 >= finished } == true, "replied at \(printed), closed at \(finished)")
    }

    @Test("a reload the main loop cannot take is refused at once, with the reason")
    func reloadRefused() throws {
        defer { removeDirectory() }
        let server = try server(Daemon(refuseReloads: true))
        try server.start()
        defer { server.stop() }
        guard case .failure(.refused(let message)) = ControlClient.send("reload", to: paths, timeout: .seconds(10)) else {
            Issue.record("the reload was not refused")
            return
        }
        #expect(message == "reload not queued: test")
    }

    @Test("a line longer than the limit is refused and the connection closed; the server serves the next client")
    func oversizedLine() throws {
        defer { removeDirectory() }
        let server = try server(Daemon())
        try server.start()
        defer { server.stop() }
        let flooding = try Connection(paths.socket)
        // No newline: the server must stop reading at its limit rather than buffer for ever.
        _ = try? flooding.send(String(repeating: "x", count: ControlServer.maximumRequestBytes + 1), newline: false)
        let line = try flooding.receiveLine()
        #expect(line.contains("request too large"), "\(line)")
        #expect(try flooding.receiveLine() == "", "closed after the refusal")
        #expect((try? ControlClient.send("status", to: paths, timeout: .seconds(10)).get())?.ok == true)
    }
}

/// A child process whose standard output the test reads to its end.
private final class Spawned {
    let pid: pid_t
    private let reading: Int32

    init(_ path: String, _ arguments: [String]) throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw Errno(errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_addclose(&actions, ends[0])
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(ends[1])
        guard result == 0 else {
            close(ends[0])
            throw Errno(result)
        }
        self.pid = pid
        reading = ends[0]
    }

    /// Everything it wrote, once it exits.
    func output() -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(reading, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return String(decoding: bytes, as: UTF8.self)
    }

    deinit { close(reading) }
}

/// One blocking client connection, with a receive bound so that a server that never answers
/// fails the test instead of hanging it.
private final class Connection {
    let fd: Int32

    init(_ path: String) throws {
        guard case .success(let fd) = UnixSocket.connect(path) else { throw Errno(errno) }
        self.fd = fd
        var limit = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ text: String, newline: Bool = true) throws {
        guard UnixSocket.send(fd, text + (newline ? "\n" : "")) else { throw Errno(errno) }
    }

    /// The next line, without its newline; "" once the server closed the connection.
    func receiveLine() throws -> String {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = recv(fd, &byte, 1, 0)
            if count < 0, errno == EINTR { continue }
            // A server that closes with bytes of ours unread resets the connection.
            if count < 0, errno == ECONNRESET { break }
            if count < 0 { throw Errno(errno) }
            if count == 0 || byte == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }
}
