import CKeepAlivePulse
import KeepAlive
import Logging
import Glibc

/// Follows the sound server's sinks and cards with libpulse (PulseAudio, or PipeWire through
/// pipewire-pulse), for a selection that keeps sinks awake: every sink, card, stream or server
/// event lists them again, and a change that matters to a selection (a sink or card that came or
/// went, a profile switched) rings ``doorbell``. The daemon's main loop polls the doorbell and
/// rescans. A stream of keepalived's that the server moved off the sink its output keeps awake
/// is moved back (``StreamHomes``).
///
/// Hears the daemon's one listing of the server (``ServerWatchers``, shared with `--linger`), on
/// the process's one libpulse connection: one thread blocked in poll while nothing changes. When
/// the server goes away it reports ``SoundServerReachability/unreachable(_:)``; the listing
/// reconnects with backoff, so a restarted server's sinks come back.
///
/// ```swift
/// let watcher = try SinkWatcher(logger: logger)
/// watcher.start()
/// let first = watcher.waitForAnswer(timeout: .seconds(2))
/// // poll watcher.doorbell.descriptor; on POLLIN: watcher.doorbell.drain(), read watcher.reachability
/// watcher.stop()
/// ```
///
/// Concurrency: its mutable state (`warnedUnreachable`, `homes`) is touched on the sound server
/// connection's thread or with its loop locked, which each callback checks in every build
/// (``ServerWatchers/preconditionLocked(_:file:line:)``: the connection's own check); what other
/// threads read (`reachability`, `formerServerCards`, the sinks kept) is behind ``Locked``: so
/// `@unchecked Sendable`.
final class SinkWatcher: SoundServerListener, @unchecked Sendable {
    let logger: Logger
    /// Rung when the server's view changed in a way a selection sees, or it came or went.
    let doorbell: Doorbell

    private let listing: ServerWatchers
    // Touched only on the listing's thread, or with its lock held.
    private var warnedUnreachable = false
    private var homes = StreamHomes()
    /// The sinks that sink outputs keep awake now (``keep(_:)``).
    private let kept = Locked<Set<String>>([])

    private let published = Locked<SoundServerReachability>(.unknown)
    private let everOwned = Locked<Set<Int>>([])
    /// Rung on every publication, also one that changes nothing a selection sees.
    private let answered: Doorbell

    /// Loads libpulse. Throws its loader's message when it cannot, or ``DoorbellError`` when
    /// the process is out of descriptors: either way the caller follows no server and says why.
    init(logger: Logger) throws {
        doorbell = try Doorbell()
        answered = try Doorbell()
        listing = try ServerWatchers.shared(logger: logger)
        self.logger = logger
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

    /// Joins the listing (connecting, and starting its thread, if nothing else did).
    func start() {
        if !listing.join(self) { publish(.unreachable("cannot start libpulse's main loop")) }
    }

    /// Leaves the listing (the last to leave stops its thread and lets go of the server).
    func stop() { listing.leave(self) }

    /// Tries the server again now when it does not answer (``ServerWatchers/retryNow()``).
    func retryNow() { listing.retryNow() }

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

    /// What a selection decides on: the states of sinks, the default sink and the streams change
    /// nothing.
    static func selectionSees(_ reachability: SoundServerReachability) -> SoundServerReachability {
        guard case .connected(var view) = reachability else {
            // Every reason of an unreachable server means the same to a selection.
            if case .unreachable = reachability { return .unreachable("") }
            return reachability
        }
        view.defaultSink = nil
        view.streams = []
        for index in view.sinks.indices { view.sinks[index].state = .other }
        return .connected(view)
    }

    // MARK: - SoundServerListener, on the listing's thread

    func connectionReady() {}

    func connectionLost(_ lost: String) {
        listing.preconditionLocked("SinkWatcher.connectionLost")
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
        // The next server numbers its streams anew: a home kept by index would send a new
        // stream to the sink of the old stream that had its number.
        homes.forgetAll()
        publish(.unreachable(error))
    }

    func serverListed(_ view: SoundServerView) {
        listing.preconditionLocked("SinkWatcher.serverListed")
        if warnedUnreachable, reachability.view == nil {
            logger.notice("the sound server answers", metadata: ["server": "\(view.server)", "sinks": "\(view.sinks.count)"])
        }
        warnedUnreachable = false
        publish(.connected(view))
        keepStreamsHome(view)
    }

    private func keepStreamsHome(_ view: SoundServerView) {
        let names = Dictionary(view.sinks.map { ($0.index, $0.name) }, uniquingKeysWith: { first, _ in first })
        let own = Dictionary(view.streams.filter(\.isOwn).map { ($0.index, $0.sink) }, uniquingKeysWith: { first, _ in first })
        let streams = own.compactMapValues { names[$0] }
        let opened = Dictionary(view.streams.filter(\.isOwn).compactMap { stream in stream.home.map { (stream.index, $0) } },
                                uniquingKeysWith: { first, _ in first })
        for move in homes.observe(streams: streams, opened: opened, kept: kept.withLock { $0 }, sinks: Set(names.values), at: .now) {
            logger.notice("the sound server moved a stream of keepalived's off its sink: moving it back",
                          metadata: ["stream": "\(move.stream)", "from": "\(streams[move.stream] ?? "")", "sink": "\(move.sink)"])
            _ = listing.moveSinkInput(move.stream, to: move.sink)
        }
    }
}
