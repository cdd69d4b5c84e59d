import CPulse
import KeepAlive
import Logging
import Synchronization
import Glibc

/// Follows the sound server's sinks and cards with libpulse (PulseAudio, or PipeWire through
/// pipewire-pulse), for a selection that keeps sinks awake: every sink, card, stream or server
/// event lists them again, and a change that matters to a selection (a sink or card that came or
/// went, a profile switched) rings ``doorbell``. The daemon's main loop polls the doorbell and
/// rescans. A stream of keepalived's that the server moved off the sink its output keeps awake
/// is moved back (``StreamHomes``).
///
/// Runs on the process's one libpulse connection (``SoundServerConnection``, shared with the
/// sinks' streams and `--linger`): one thread blocked in poll while nothing changes. When
/// the server goes away it reports ``SoundServerReachability/unreachable(_:)`` and reconnects
/// with backoff, so a restarted server's sinks come back.
///
/// ```swift
/// let watcher = try SinkWatcher(logger: logger)
/// watcher.start()
/// let first = watcher.waitForAnswer(timeout: .seconds(2))
/// // poll watcher.doorbell.descriptor; on POLLIN: watcher.doorbell.drain(), read watcher.reachability
/// watcher.stop()
/// ```
final class SinkWatcher: @unchecked Sendable {
    let logger: Logger
    /// Rung when the server's view changed in a way a selection sees, or it came or went.
    let doorbell = Doorbell()

    // Touched only on the main loop's thread, or with its lock held.
    private let connection: PulseConnection
    private var warnedUnreachable = false
    private var draft = SoundServerView(server: "", sinks: [])

    /// keepalived's own streams in the listing under way (sink input → sink index), and the
    /// clients of this process (PipeWire leaves the process id on the client).
    private var ownStreams: [UInt32: UInt32] = [:]
    private var ownClients: Set<UInt32> = []
    private let ownProcessID = String(getpid())
    private var homes = StreamHomes()
    /// The sinks that sink outputs keep awake now (``keep(_:)``).
    private let kept = Mutex<Set<String>>([])

    private let published = Mutex<SoundServerReachability>(.unknown)
    private let everOwned = Mutex<Set<Int>>([])
    /// Rung on every publication, also one that changes nothing a selection sees.
    private let answered = Doorbell()

    /// Loads libpulse. Throws its loader's message when it cannot.
    init(logger: Logger) throws(PulseConnection.LibraryMissing) {
        connection = try PulseConnection(facilities: CPULSE_WATCH_SINKS | CPULSE_WATCH_CARDS | CPULSE_WATCH_SERVER | CPULSE_WATCH_SINK_INPUTS,
                                         firstRetry: .milliseconds(250))
        self.logger = logger
        connection.queries = queries()
        connection.onListed = { [unowned self] in listed() }
        connection.onLost = { [unowned self] error in connectionLost(error) }
    }

    /// Whether a server could answer this process at all: libpulse looks for one through
    /// PULSE_SERVER, the user's runtime directory, or the system-wide socket. A system service
    /// has none of them, and then nothing is watched (no reconnect timer wakes it).
    static func mayReachServer(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) -> Bool {
        if environment("PULSE_SERVER") != nil || environment("XDG_RUNTIME_DIR") != nil { return true }
        let systemSockets = ["/run/pulse/native", "/var/run/pulse/native"]
        return systemSockets.contains { path in access(path, F_OK) == 0 }
    }

    /// Says which sinks sink outputs keep awake: a stream of keepalived's the server moves off
    /// one of them is moved back (``StreamHomes``).
    func keep(_ sinks: Set<String>) { kept.withLock { $0 = sinks } }

    /// What the server showed last.
    var reachability: SoundServerReachability { published.withLock { $0 } }

    /// Every card a server owned since the watcher started: left to it while it is gone.
    var formerServerCards: Set<Int> { everOwned.withLock { $0 } }

    /// Joins the process's connection (connecting, and starting its thread, if nothing else did).
    func start() {
        if !connection.start() { publish(.unreachable("cannot start libpulse's main loop")) }
    }

    /// Leaves the connection (the last to leave stops its thread and lets go of the server).
    func stop() { connection.stop() }

    /// Tries the server again now when it does not answer (``PulseConnection/retryNow()``).
    func retryNow() { connection.retryNow() }

    /// Waits until the server answered (or was found unreachable), at most `timeout`; returns
    /// what is known then (`.unknown` after the timeout).
    func waitForAnswer(timeout: Duration) -> SoundServerReachability {
        let deadline = ContinuousClock.now + timeout
        while case .unknown = reachability {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { break }
            var fd = pollfd(fd: answered.descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&fd, 1, left.pollTimeout) > 0 { answered.drain() }
        }
        return reachability
    }

    private func publish(_ next: SoundServerReachability) {
        if let view = next.view { everOwned.withLock { $0.formUnion(view.ownedCards) } }
        let changed = published.withLock { current in
            defer { current = next }
            return Self.selectionSees(current) != Self.selectionSees(next)
        }
        answered.ring()
        if changed { doorbell.ring() }
    }

    /// What a selection decides on: the states of sinks and the default sink change nothing.
    static func selectionSees(_ reachability: SoundServerReachability) -> SoundServerReachability {
        guard case .connected(var view) = reachability else {
            // Every reason of an unreachable server means the same to a selection.
            if case .unreachable = reachability { return .unreachable("") }
            return reachability
        }
        view.defaultSink = nil
        for index in view.sinks.indices { view.sinks[index].state = .other }
        return .connected(view)
    }

    // MARK: - The connection

    private func connectionLost(_ lost: String) {
        let pipewire = PipeWireWithoutPulse.socket()
        let error = PipeWireWithoutPulse.explain(lost, socket: pipewire)
        if case .connected(let view) = reachability {
            logger.notice("the sound server went away; its cards are left to it until it answers again",
                          metadata: ["server": "\(view.server)", "error": "\(error)"])
        } else if !warnedUnreachable {
            // Without a server a box's cards are keepalived's: nothing to say. PipeWire without
            // its pulse server owns them all, and keepalived keeps nothing awake: say why.
            if pipewire != nil {
                logger.warning("no sound server answers", metadata: ["error": "\(error)"])
            } else {
                logger.debug("no sound server answers", metadata: ["error": "\(error)"])
            }
        }
        warnedUnreachable = true
        publish(.unreachable(error))
    }

    // MARK: - What the server shows

    /// The server, the sinks, the cards and keepalived's own streams, listed on every event
    /// (``PulseConnection``).
    private func queries() -> [PulseConnection.Query] {
        [
            .server { [unowned self] server in
                draft = SoundServerView(server)
                ownStreams = [:]
                ownClients = []
            },
            .sinks { [unowned self] sink in draft.sinks.append(ServerSink(sink)) },
            .cards { [unowned self] card in draft.cards.append(ServerCard(card)) },
            .clients { [unowned self] client in
                if client.process_id.map({ String(cString: $0) }) == ownProcessID { ownClients.insert(client.index) }
            },
            .sinkInputs { [unowned self] input in
                // PulseAudio copies the client's process id onto its streams; PipeWire leaves it
                // on the client.
                if input.process_id.map({ String(cString: $0) }) == ownProcessID || ownClients.contains(input.client) {
                    ownStreams[input.index] = input.sink
                }
            },
        ]
    }

    private func listed() {
        if warnedUnreachable, reachability.view == nil {
            logger.notice("the sound server answers", metadata: ["server": "\(draft.server)", "sinks": "\(draft.sinks.count)"])
        }
        warnedUnreachable = false
        publish(.connected(draft))
        keepStreamsHome()
    }

    private func keepStreamsHome() {
        let names = Dictionary(draft.sinks.map { ($0.index, $0.name) }, uniquingKeysWith: { first, _ in first })
        let streams = ownStreams.compactMapValues { names[$0] }
        for move in homes.observe(streams: streams, kept: kept.withLock { $0 }, sinks: Set(names.values)) {
            logger.notice("the sound server moved a stream of keepalived's off its sink: moving it back",
                          metadata: ["stream": "\(move.stream)", "from": "\(streams[move.stream] ?? "")", "sink": "\(move.sink)"])
            _ = connection.moveSinkInput(move.stream, to: move.sink)
        }
    }
}

extension SoundServerView {
    /// A listing's start, from the server's answer; the strings are copied.
    init(_ server: cpulse_server) {
        let name = server.name.map { String(cString: $0) } ?? "sound server"
        let version = server.version.map { String(cString: $0) }
        self.init(server: version.map { "\(name) \($0)" } ?? name, defaultSink: server.default_sink.map { String(cString: $0) }, sinks: [])
    }
}

extension ServerSink {
    /// A sink as libpulse listed it; the strings are copied (they live only in the callback).
    init(_ sink: cpulse_sink) {
        self.init(name: String(cString: sink.name), description: sink.description.map { String(cString: $0) } ?? "")
        index = sink.index
        driver = sink.driver.map { String(cString: $0) } ?? ""
        state = switch Int(sink.state) {
        case Int(CPULSE_SINK_RUNNING): .running
        case Int(CPULSE_SINK_IDLE): .idle
        case Int(CPULSE_SINK_SUSPENDED): .suspended
        default: .other
        }
        isHardware = sink.hardware != 0
        activePort = sink.active_port.map { String(cString: $0) }
        activePortType = Int(sink.active_port_type)
        sampleRate = sink.rate > 0 ? Int(sink.rate) : nil
        properties = Self.read(sink.properties)
    }

    /// The properties keepalived reads, from a libpulse property list.
    static func read(_ list: UnsafeRawPointer?) -> [String: String] {
        var properties: [String: String] = [:]
        for key in Property.all {
            if let value = cpulse_property(list, key) { properties[key] = String(cString: value) }
        }
        return properties
    }
}

extension ServerCard {
    init(_ card: cpulse_card) {
        self.init(name: String(cString: card.name), activeProfile: card.active_profile.map { String(cString: $0) },
                  properties: ServerSink.read(card.properties))
        index = card.index
    }
}
