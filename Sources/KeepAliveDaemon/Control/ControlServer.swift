import _KeepalivedControlProtocol
import CKeepAliveLinux
import KeepAlive
import Logging
import Glibc

/// The daemon's control socket: one Unix stream socket, only its owner (or root) may talk to it,
/// and members of the player group (``playerGroup``, `--player-group`) may ask it for a
/// `release` and nothing else.
///
/// It runs on a thread of its own, blocked in poll, so that no client (slow, hostile or many at
/// once) can delay the playback threads or the daemon's main loop, and nothing it waits for can
/// delay a player's `release`: a reload is queued for the main loop and its reply sent when it
/// comes, while the other clients are served; a release is decided here and answered as soon as
/// the outputs on its device are closed, which another thread does (``OutputsClosing``, waited
/// for as a reload is: a playback thread may be inside an open that asks this very socket,
/// keepalived's own through the front door; with `--power-on-wait`, once the `on-active` hook
/// has switched the amplifier on: a ``PowerOnGate``, waited for the same way, after a line that
/// tells the player how long at most; the device is released then). Nothing here waits for a
/// playback thread. Each connection gets at most
/// ``maximumRequestBytes`` per line, ``maximumClients`` connections are served at once (more are
/// told "busy" and closed), and a connection idle for ``clientTimeout`` is closed, but one that
/// asked for `events`: it stays open and gets each ``ActivityEvent`` as a line, until it hangs up
/// or stops reading (a subscriber whose socket is full is closed, never waited for).
///
/// Concurrency: its clients and listener belong to its own thread (claimed and checked:
/// ``ThreadOwner``); `thread` is written by `start()` and read by `stop()`, both on the thread that
/// made it: so `@unchecked Sendable`.
final class ControlServer: @unchecked Sendable {
    static let maximumRequestBytes = 64 * 1024
    static let maximumClients = 32
    /// Connections one uid other than the owner's and root's may hold at once: a member of the
    /// player group that opens connections and never closes them leaves the others' room (a
    /// player's release uses one, briefly).
    static let maximumClientsPerUID = 4
    static let clientTimeout: Duration = .seconds(5)
    /// How much longer than a held release's gate the player is told to wait.
    static let holdMargin: Duration = .milliseconds(250)

    /// What the server asks of the daemon.
    struct Handlers: Sendable {
        var status: @Sendable () -> DaemonStatus
        var stop: @Sendable () -> Void
        /// Queues a reload on the main loop; its reply is sent once the request is fulfilled.
        var reload: @Sendable () -> Result<MainLoopRequest, MainLoopQueue.QueueFailure>
        /// A player's release of one card device, for the process at the other end, which asked
        /// at `arrived`; `hungUp` says whether it has stopped waiting.
        var release: @Sendable (ReleaseRequest, _ pid: Int32, _ arrived: ContinuousClock.Instant, _ hungUp: () -> Bool) -> ReleaseAnswer
        /// A player's `carry`: true when its connection was handed to an output's playback
        /// thread (the server forgets it without closing it), false to refuse it.
        var carry: @Sendable (ReleaseRequest, _ pid: Int32, _ connection: Int32) -> Bool = { _, _, _ in false }
    }

    /// A group whose members may ask for a `release`: its name and id.
    struct PlayerGroup: Sendable {
        var name: String
        var id: gid_t
    }

    let path: String
    private let logger: Logger
    private let handlers: Handlers
    /// The activity events for `events` subscribers.
    private let events: EventLines?
    private let listener: Int32
    /// A pipe whose read end wakes the server thread when the service shuts down.
    private let stopSignal: Int32
    private let stopWriter: Int32
    private let ownerUID = geteuid()
    let playerGroup: PlayerGroup?
    /// The server thread: every client's state and every answer is its alone.
    private let serverThread = ThreadOwner("the control socket's thread")

    /// Binds the socket now, so that "already running" is reported before anything plays. With
    /// a `playerGroup` the socket is that group's, mode 0660, so that its members can connect.
    init(paths: RuntimePaths, logger: Logger, playerGroup: PlayerGroup? = nil, events: EventLines? = nil, handlers: Handlers) throws(ControlSocketError) {
        self.path = paths.socket
        self.logger = logger
        self.handlers = handlers
        self.events = events
        self.playerGroup = playerGroup
        do { try paths.prepareDirectory() } catch { throw .directory(paths.directory, error) }
        // A daemon that answers owns the socket; one that does not left a stale file behind.
        switch UnixSocket.connect(path) {
        case .success(let fd):
            let pid = Self.askPID(fd)
            close(fd)
            throw .alreadyRunning(pid: pid, socket: path)
        case .failure:
            unlink(path)
        }
        guard case (var address, let length)? = UnixSocket.address(path) else { throw .pathTooLong(path) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .socket(path, Errno(errno)) }
        let previousMask = umask(0o177)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        umask(previousMask)
        let opened: Bool
        if bound != 0 {
            opened = false
        } else if let playerGroup {
            // Made with the group already when it is the process's own (the system unit's
            // Group=audio): a sandbox without chown (SystemCallFilter=~@privileged) needs none.
            var info = stat()
            let grouped = stat(paths.socket, &info) == 0 && info.st_gid == playerGroup.id
            opened = (grouped || chown(paths.socket, uid_t.max, playerGroup.id) == 0) && chmod(paths.socket, 0o660) == 0
        } else {
            opened = chmod(paths.socket, 0o600) == 0
        }
        guard opened, listen(fd, 128) == 0 else {
            let code = errno
            close(fd)
            throw .socket(path, Errno(code))
        }
        var pipeEnds: [Int32] = [0, 0]
        guard csystem_pipe_nonblocking(&pipeEnds) == 0 else {
            let code = errno
            close(fd)
            throw .socket(path, Errno(code))
        }
        listener = fd
        stopSignal = pipeEnds[0]
        stopWriter = pipeEnds[1]
    }

    deinit {
        close(listener)
        close(stopSignal)
        close(stopWriter)
    }

    private var thread: JoinableThread?

    /// Starts serving on a thread of its own.
    /// - Throws: ``ControlSocketError/thread(_:)`` when that thread cannot be started: a daemon
    ///   nobody can stop or query is not one to leave running.
    func start() throws(ControlSocketError) {
        do {
            thread = try startThread(named: "keepalive-ctl") { [self] in serve() }
        } catch {
            unlink(path)
            throw ControlSocketError.thread(error)
        }
    }

    /// Stops serving: the thread ends, the socket file is removed.
    func stop() {
        guard let thread = thread.take() else { return }
        var byte: UInt8 = 1
        _ = write(stopWriter, &byte, 1)
        thread.join()
        unlink(path)
    }

    private static func askPID(_ fd: Int32) -> Int32? {
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard UnixSocket.send(fd, #"{"request":"status"}"# + "\n") else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        var filled = 0
        while filled < buffer.count {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + filled, $0.count - filled, 0) }
            if count <= 0 { break }
            filled += count
            if buffer[0..<filled].contains(UInt8(ascii: "\n")) { break }
        }
        let reply = try? ControlJSON.decode(ControlReply.self, from: buffer[0..<filled].split(separator: UInt8(ascii: "\n")).first ?? [])
        return reply?.status?.pid ?? reply?.pid
    }

    // MARK: - The server thread

    private struct Client {
        var fd: Int32
        var pid: Int32
        var uid: UInt32
        /// Only a `release` (a member of the player group that is not the owner).
        var playerOnly: Bool
        var reader = ControlRequestReader(limit: ControlServer.maximumRequestBytes)
        var deadline: ContinuousClock.Instant
        /// A reply that waits: it goes out before the client's next line is read, at the latest
        /// at `deadline`.
        var pending: Pending?
        /// Asked for `events`: no deadline, and each event line is sent to it.
        var subscribed = false
        /// Handed to a playback thread (`carry`): dropped from the server without a close.
        var handedOver = false
    }

    /// What a client's reply waits for.
    private enum Pending {
        /// A reload queued for the main loop.
        case reload(MainLoopRequest)
        /// A release held for the power (`--power-on-wait`): `release` runs once `gate` opens;
        /// `settling` once its hooks have ended (it then waits for `deadline`, the gate's
        /// opening, not for a descriptor).
        case powerOn(PowerOnGate, release: @Sendable (_ hungUp: () -> Bool) -> ReleaseAnswer, pid: Int32, arrived: ContinuousClock.Instant, settling: Bool)
        /// A release whose `reply` goes once keepalived's outputs on its device are closed.
        case closing(OutputsClosing, reply: ControlReply, pid: Int32, arrived: ContinuousClock.Instant)

        /// What the server thread polls for it: nothing (-1) while it only waits for a time.
        var descriptor: Int32 {
            switch self {
            case .reload(let request): request.readyDescriptor
            case .closing(let closing, _, _, _): closing.descriptor
            case .powerOn(_, _, _, _, true): -1
            case .powerOn(let gate, _, _, _, false): gate.descriptor
            }
        }
    }

    private func serve() {
        serverThread.claim()
        var clients: [Client] = []
        var set = ControlPollSet()
        set.watch(.stop, stopSignal)
        var backoff = AcceptBackoff()
        var warnedBusy = Set<uid_t>()
        let clock = ContinuousClock()
        while true {
            let now = clock.now
            // Left out while accept fails: a client waiting keeps it readable, every turn.
            set.watch(.listener, backoff.listens(at: now) ? listener : -1)
            set.watch(.events, events?.descriptor ?? -1)
            // A client waiting for a reload: its reply's descriptor, not its own.
            set.watchClients(clients.lazy.map { $0.pending?.descriptor ?? $0.fd })
            // Rounded up: a deadline less than 1 ms ahead would otherwise be polled for at once,
            // again and again.
            let nearest = clients.filter { !$0.subscribed }.map(\.deadline).min().map { now.duration(to: $0).pollTimeout } ?? -1
            let timeout = earliestPollTimeout(nearest, backoff.rest(at: now).map(\.pollTimeout) ?? -1)
            // Interrupted by a signal, nothing is ready, and the turn's deadlines are still looked at.
            do { _ = try set.wait(timeout: timeout) } catch {
                logger.error("control socket poll failed", metadata: ["error": "\(error)"])
                return
            }
            if set.isReady(.stop) { break }
            var closing = Set<Int32>()
            for client in clients.indices where set.isClientReady(client) {
                let open = clients[client].pending == nil ? readRequests(&clients[client]) : replyPending(&clients[client], timedOut: false)
                if !open { closing.insert(clients[client].fd) }
            }
            if set.isReady(.events), let events { send(events.take(), to: clients, closing: &closing) }
            let expired = clock.now
            for index in clients.indices where !clients[index].subscribed && clients[index].deadline < expired && !closing.contains(clients[index].fd) {
                if clients[index].pending != nil {
                    if !replyPending(&clients[index], timedOut: true) { closing.insert(clients[index].fd) }
                    continue
                }
                UnixSocket.send(clients[index].fd, ControlJSON.encode(ControlReply.failure("timed out waiting for a request")) + "\n")
                closing.insert(clients[index].fd)
            }
            if !closing.isEmpty {
                for fd in closing where !clients.contains(where: { $0.fd == fd && $0.handedOver }) { close(fd) }
                clients.removeAll { closing.contains($0.fd) }
                backoff.descriptorFreed()
            }
            let later = clock.now
            if set.isReady(.listener) || backoff.retries(at: later) { acceptClients(&clients, backoff: &backoff, warnedBusy: &warnedBusy, at: later) }
        }
        // The daemon stops, its outputs already closed (DaemonRuntime.stop): a player held for
        // the power goes on to the card now, told so, rather than reading a closed socket.
        for client in clients {
            switch client.pending {
            case .powerOn(_, _, let pid, let arrived, _):
                logger.notice("keepalived stops: a held player's open goes on now", metadata: [
                    "pid": "\(pid)", "ms": "\((ContinuousClock.now - arrived).wholeMilliseconds)"])
                UnixSocket.send(client.fd, ControlJSON.encode(ControlReply(ok: true, released: [])) + "\n")
            case .closing(_, let reply, _, _):
                // The outputs were closed before this thread was stopped.
                UnixSocket.send(client.fd, ControlJSON.encode(reply) + "\n")
            case .reload?, nil:
                break
            }
        }
        for client in clients { close(client.fd) }
    }

    /// Sends each event line to every subscriber; one that cannot take a line now is closed.
    private func send(_ lines: [String], to clients: [Client], closing: inout Set<Int32>) {
        guard !lines.isEmpty else { return }
        let text = lines.joined()
        for client in clients where client.subscribed && !closing.contains(client.fd) {
            // Never waits: the client socket is non-blocking; a full one is a reader that stopped.
            if !UnixSocket.send(client.fd, text) {
                logger.notice("control socket: closed an events subscriber that stopped reading", metadata: ["pid": "\(client.pid)"])
                closing.insert(client.fd)
            }
        }
    }

    /// `warnedBusy`: the users told of once for refused connections (uid_t.max: the whole socket
    /// was full).
    private func acceptClients(_ clients: inout [Client], backoff: inout AcceptBackoff, warnedBusy: inout Set<uid_t>, at now: ContinuousClock.Instant) {
        while true {
            let fd = csystem_accept_nonblocking(listener)
            guard fd >= 0 else {
                let code = errno
                switch backoff.failed(code, at: now) {
                case .exhausted:
                    logger.warning("control socket: cannot accept a connection; waiting for one to close, or retrying after a pause",
                                   metadata: ["error": "\(Errno(code))"])
                case .recovered: logger.info("control socket: accepting connections again")
                case nil: break
                }
                return
            }
            let deadline = now + Self.clientTimeout
            let peer = UnixSocket.peerCredentials(fd)
            let owner = peer.map { $0.uid == ownerUID || $0.uid == 0 } ?? false
            let player = !owner && peer != nil && playerGroup.map { csystem_peer_in_group(fd, $0.id) == 1 } == true
            guard let peer, owner || player else {
                let who = peer.map { "uid \($0.uid) pid \($0.pid)" } ?? "unknown peer"
                logger.warning("control socket: refused a client", metadata: ["peer": "\(who)"])
                let players = playerGroup.map { "; members of group \($0.name) may ask for a release" } ?? ""
                UnixSocket.send(fd, ControlJSON.encode(ControlReply.failure("permission denied: only uid \(ownerUID) or root may control this daemon\(players)")) + "\n")
                close(fd)
                continue
            }
            guard clients.count < Self.maximumClients,
                  owner || clients.count(where: { $0.uid == peer.uid }) < Self.maximumClientsPerUID else {
                let full = clients.count >= Self.maximumClients
                // Once per user: a flood must not flood the journal too.
                if warnedBusy.insert(full ? uid_t.max : peer.uid).inserted {
                    logger.warning("control socket: refused a connection: \(full ? "too many connections" : "too many of one user's")", metadata: [
                        "peer": "uid \(peer.uid) pid \(peer.pid)"])
                }
                UnixSocket.send(fd, ControlJSON.encode(ControlReply.failure(full ? "busy: too many control connections" : "busy: too many control connections from uid \(peer.uid)")) + "\n")
                close(fd)
                continue
            }
            clients.append(Client(fd: fd, pid: peer.pid, uid: peer.uid, playerOnly: player, deadline: deadline))
        }
    }

    /// Reads what is there and answers each complete line; false when the connection should close.
    private func readRequests(_ client: inout Client) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return false }
            if count < 0 { return errno == EAGAIN || errno == EINTR }
            client.reader.append(contentsOf: chunk[0..<count])
            guard answerBuffered(&client) else { return false }
            // Waiting for a reload: what else it sent is read after the reply.
            if client.pending != nil { return true }
        }
    }

    /// Answers the complete lines read so far, in order, until one must wait for the main loop;
    /// false when the connection should close.
    private func answerBuffered(_ client: inout Client) -> Bool {
        while client.pending == nil, let next = client.reader.next() {
            switch next {
            case .request(let command):
                let arrived = ContinuousClock.now
                guard let reply = answer(command, from: &client, arrived: arrived) else {
                    if client.handedOver { return false }
                    continue
                }
                guard UnixSocket.send(client.fd, ControlJSON.encode(reply) + "\n") else { return false }
            case .invalid(let error):
                guard UnixSocket.send(client.fd, ControlJSON.encode(ControlReply.failure("\(error)")) + "\n") else { return false }
            case .overLimit(let error):
                UnixSocket.send(client.fd, ControlJSON.encode(ControlReply.failure("\(error)")) + "\n")
                return false
            }
        }
        return true
    }

    /// Sends a waiting reply: a reload's once the main loop gave it, or says it is still waiting
    /// once `timedOut`; a held release's once its gate opens (at the latest at its deadline,
    /// which is the client's). Then answers what the client sent meanwhile. False when the
    /// connection should close.
    private func replyPending(_ client: inout Client, timedOut: Bool) -> Bool {
        guard let pending = client.pending else { return true }
        let reply: ControlReply
        switch pending {
        case .reload(let request):
            if let given = request.reply {
                reply = given
            } else if timedOut {
                reply = .failure("reload still waiting after \(MainLoopQueue.replyTimeout.components.seconds) s; it will be applied when the daemon gets to it")
            } else {
                return true
            }
        case .powerOn(let gate, let release, let pid, let arrived, let settling):
            if !settling { gate.acknowledge() }
            let now = ContinuousClock.now
            guard timedOut || gate.isOpen(at: now) else {
                // The hooks ended: the settle is a time, not a descriptor.
                if let opensAt = gate.opensAt {
                    client.deadline = opensAt
                    client.pending = .powerOn(gate, release: release, pid: pid, arrived: arrived, settling: true)
                }
                return true
            }
            let metadata: Logger.Metadata = ["pid": "\(pid)", "ms": "\((now - arrived).wholeMilliseconds)"]
            if gate.hooksOutlasted {
                logger.warning("\(gate.waitingFor) at --power-on-wait's end: the player's open goes on", metadata: metadata)
            } else {
                logger.info("the player's open goes on: the power is on", metadata: metadata)
            }
            let fd = client.fd
            switch release({ csystem_peer_hung_up(fd) == 1 }) {
            case .reply(let given):
                reply = given
            case .afterClose(let closing, let given):
                wait(&client, for: closing, reply: given, pid: pid, arrived: arrived)
                return true
            case .afterPowerOn:
                preconditionFailure("a release held for the power twice")
            }
        case .closing(let closing, let given, let pid, let arrived):
            if closing.isFinished {
                reply = given
            } else if timedOut {
                logger.warning("keepalived's outputs did not close for a player's release in time: its open goes on", metadata: [
                    "pid": "\(pid)", "ms": "\((ContinuousClock.now - arrived).wholeMilliseconds)"])
                reply = .failure("keepalived's outputs on the device are still closing after \(Self.clientTimeout.components.seconds) s")
            } else {
                return true
            }
        }
        client.pending = nil
        client.deadline = ContinuousClock.now + Self.clientTimeout
        guard UnixSocket.send(client.fd, ControlJSON.encode(reply) + "\n") else { return false }
        return answerBuffered(&client) && readRequests(&client)
    }

    /// The reply to `command`; nil when it waits (``Client/pending``): a reload for the main
    /// loop, a release for the power (after its interim line, sent here) or for keepalived's
    /// outputs on its device to close.
    private func answer(_ command: ControlCommand, from client: inout Client, arrived: ContinuousClock.Instant) -> ControlReply? {
        serverThread.preconditionOwned("ControlServer.answer")
        if client.playerOnly, command.name != "release", command.name != "carry" {
            return .failure("permission denied: members of group \(playerGroup?.name ?? "?") may only ask for a release")
        }
        switch command {
        case .carry(let request):
            // keepalived's own open of a keepalived: PCM is never carried by itself.
            guard client.pid != getpid(), handlers.carry(request, client.pid, client.fd) else {
                return ControlReply(ok: false, error: "keepalived does not carry a player on card \(request.card) device \(request.device) now")
            }
            client.handedOver = true
            return nil
        case .release(let request):
            // keepalived itself opening a keepalived: PCM (named as an output): its playback
            // thread waits in that open, which the release would join.
            guard client.pid != getpid() else { return ControlReply(ok: true, released: []) }
            let fd = client.fd
            switch handlers.release(request, client.pid, arrived, { csystem_peer_hung_up(fd) == 1 }) {
            case .reply(let reply):
                return reply
            case .afterClose(let closing, let reply):
                wait(&client, for: closing, reply: reply, pid: client.pid, arrived: arrived)
                return nil
            case .afterPowerOn(let gate, let release):
                // How long the player's open may wait for the final line: a little past the
                // gate's deadline, so that the reply, not the player's own deadline, ends it.
                let wait = (ContinuousClock.now.duration(to: gate.deadline) + Self.holdMargin).wholeMilliseconds
                logger.info("a player waits while the power comes on (--power-on-wait)", metadata: [
                    "card": "\(request.card)", "device": "\(request.device)", "player": "\(request.program ?? "?") (pid \(client.pid))"])
                UnixSocket.send(fd, ControlJSON.encode(ControlReply(ok: true, wait: Int(max(wait, 0)))) + "\n")
                // A second player at a hold whose hooks ended already (its descriptor was read
                // for the first): the settle is all that is left, a time.
                let opensAt = gate.opensAt
                client.pending = .powerOn(gate, release: release, pid: client.pid, arrived: arrived, settling: opensAt != nil)
                client.deadline = opensAt ?? gate.deadline
                return nil
            }
        case .status:
            return ControlReply(ok: true, pid: getpid(), status: handlers.status())
        case .stop:
            logger.info("stop requested on the control socket")
            handlers.stop()
            return ControlReply(ok: true, pid: getpid())
        case .events:
            guard events != nil else { return .failure("events are not available") }
            client.subscribed = true
            return ControlReply(ok: true, pid: getpid())
        case .reload:
            switch handlers.reload() {
            case .success(let request):
                client.pending = .reload(request)
                client.deadline = ContinuousClock.now + MainLoopQueue.replyTimeout
                return nil
            case .failure(let failure):
                return failure.reply
            }
        }
    }
}

extension ControlServer {
    /// Holds `client`'s `reply` until `closing` is finished, at most ``clientTimeout``.
    private func wait(_ client: inout Client, for closing: OutputsClosing, reply: ControlReply, pid: Int32, arrived: ContinuousClock.Instant) {
        client.pending = .closing(closing, reply: reply, pid: pid, arrived: arrived)
        client.deadline = ContinuousClock.now + Self.clientTimeout
    }
}

/// Why the control socket could not be set up.
enum ControlSocketError: Error, CustomStringConvertible {
    case alreadyRunning(pid: Int32?, socket: String)
    case directory(String, Errno)
    case pathTooLong(String)
    case socket(String, Errno)
    case thread(ThreadStartError)

    var description: String {
        switch self {
        case .alreadyRunning(let pid, let socket):
            "already running (pid \(pid.map(String.init) ?? "unknown")) on \(socket)"
        case .directory(let path, let error): "cannot use runtime directory \(path): \(error)"
        case .pathTooLong(let path): "control socket path is too long: \(path)"
        case .socket(let path, let error): "cannot create control socket \(path): \(error)"
        case .thread(let error): "cannot serve the control socket: \(error)"
        }
    }
}
