import CPulse
import KeepAlive
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--linger DURATION`: watches the sound server's streams with libpulse (loaded only now; it
/// speaks to PulseAudio and to PipeWire's pipewire-pulse alike) and pauses the sound-server
/// outputs once nothing else played on their sink for DURATION, resuming them as soon as another
/// stream plays. The decisions are ``LingerStateMachine``'s; this class only connects, lists
/// streams and carries the actions out.
///
/// Everything runs on libpulse's threaded main loop: one thread blocked in poll while nothing
/// changes, so an idle daemon gets no wakeup from it. It calls the manager directly: its pause
/// and resume are thread-safe and return once the output is closed or reopening. When the server
/// goes away the outputs play (fail safe) and the watcher reconnects with backoff.
///
/// ```swift
/// let watcher = try LingerWatcher(duration: .seconds(600), outputs: ["pulse"], manager: manager, logger: logger)
/// try watcher.start()
/// // …
/// watcher.stop()
/// ```
final class LingerWatcher: @unchecked Sendable {
    let duration: Duration
    /// The sound-server outputs it pauses and resumes, together.
    let outputs: [String]
    let manager: KeepAliveManager
    let logger: Logger

    // Touched only on the main loop's thread, or with its lock held.
    private let connection: PulseConnection
    private var loop: OpaquePointer { connection.loop }
    private var context: OpaquePointer? { connection.context }
    private var lingerTimer: OpaquePointer?
    private var machine: LingerStateMachine
    private var warnedUnreachable = false
    private var defaultSinkName: String?
    private var sinkNames: [UInt32: String] = [:]
    private var streams: [LingerView.Stream] = []
    private var ownClients: Set<UInt32> = []
    private let ownProcessID = String(getpid())

    /// What `status` shows, updated after every decision.
    private let published: Mutex<LingerStatus>

    /// Loads libpulse. Throws its loader's message when it cannot.
    init(duration: Duration, outputs: [String], manager: KeepAliveManager, logger: Logger) throws(PulseConnection.LibraryMissing) {
        connection = try PulseConnection(name: "keepalived --linger", facilities: CPULSE_WATCH_SINKS | CPULSE_WATCH_SINK_INPUTS | CPULSE_WATCH_SERVER,
                                         firstRetry: .milliseconds(500))
        self.duration = duration
        self.outputs = outputs
        self.manager = manager
        self.logger = logger
        machine = LingerStateMachine(duration: duration)
        published = Mutex(LingerStatus(seconds: duration.seconds))
        connection.onReady = { [unowned self] in
            if warnedUnreachable { logger.notice("--linger: the sound server answers again") }
            warnedUnreachable = false
            query()
        }
        connection.onChange = { [unowned self] in query() }
        connection.onLost = { [unowned self] error in connectionLost(error) }
    }

    /// Starts the window (the outputs play for DURATION from now) and the main loop's thread.
    func start() {
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        let started = connection.start {
            lingerTimer = cpulse_timer_new(loop, { LingerWatcher.from($0).lingerTimerFired() }, userdata)
            apply(machine.start(at: .now), because: "")
        }
        if !started {
            logger.warning("--linger: cannot start libpulse's main loop: keeping \(outputs.joined(separator: ", ")) awake")
        }
    }

    /// Stops the thread and lets go of the server; the outputs stay as they are (the manager
    /// stops them next).
    func stop() {
        connection.stop {
            if let lingerTimer { cpulse_timer_free(loop, lingerTimer) }
            lingerTimer = nil
        }
    }

    /// For `status`.
    var status: LingerStatus { published.withLock { $0 } }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> LingerWatcher {
        Unmanaged<LingerWatcher>.fromOpaque(userdata!).takeUnretainedValue()
    }

    // MARK: - The connection

    private func connectionLost(_ error: String) {
        if !warnedUnreachable {
            warnedUnreachable = true
            logger.warning("--linger: cannot watch the sound server (\(error)): keeping \(outputs.joined(separator: ", ")) awake; retrying")
        }
        apply(machine.serverLost(), because: "the sound server cannot be watched")
    }

    // MARK: - What the server shows

    /// Lists the default sink, the sinks, the clients and the streams, one query after the other; a change
    /// that comes meanwhile runs the whole list once more.
    private func query() {
        guard let context, connection.beginQuery() else { return }
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        cpulse_query_default_sink(context, { userdata, name in
            let watcher = LingerWatcher.from(userdata)
            watcher.defaultSinkName = name.map { String(cString: $0) }
            watcher.sinkNames = [:]
            guard let context = watcher.context else { return }
            cpulse_query_sinks(context, { userdata, sink in
                let watcher = LingerWatcher.from(userdata)
                if let sink {
                    watcher.sinkNames[sink.pointee.index] = String(cString: sink.pointee.name)
                    return
                }
                watcher.ownClients = []
                guard let context = watcher.context else { return }
                cpulse_query_clients(context, { userdata, client in
                    let watcher = LingerWatcher.from(userdata)
                    if let client {
                        if client.pointee.process_id.map({ String(cString: $0) }) == watcher.ownProcessID {
                            watcher.ownClients.insert(client.pointee.index)
                        }
                        return
                    }
                    watcher.streams = []
                    guard let context = watcher.context else { return }
                    cpulse_query_sink_inputs(context, { userdata, input in
                        let watcher = LingerWatcher.from(userdata)
                        if let input {
                            // PulseAudio copies the client's process id onto its streams; PipeWire
                            // leaves it on the client.
                            let pid = input.pointee.process_id.map { String(cString: $0) }
                            let isOwn = pid == watcher.ownProcessID || watcher.ownClients.contains(input.pointee.client)
                            let application = input.pointee.application.map { String(cString: $0) } ?? ""
                            // Another keepalived's stream keeps a sink awake; it is not a sound that
                            // needs it (two lingering daemons would keep each other awake for ever).
                            if !isOwn, application == "keepalived" || application.hasSuffix("[keepalived]") { return }
                            watcher.streams.append(LingerView.Stream(sink: input.pointee.sink, isCorked: input.pointee.corked != 0, isOwn: isOwn))
                            return
                        }
                        watcher.listed()
                    }, userdata)
                }, userdata)
            }, userdata)
        }, userdata)
    }

    private func listed() {
        let again = connection.endQuery()
        // A query that ended because the connection failed lists nothing: the state callback
        // reports the loss instead.
        guard connection.isReady else { return }
        let defaultSink = defaultSinkName.flatMap { name in sinkNames.first { $0.value == name }?.key }
        let view = LingerView(streams: streams, sinks: Set(sinkNames.keys), defaultSink: defaultSink)
        apply(machine.serverChanged(view, at: .now), because: "")
        if again { query() }
    }

    private func lingerTimerFired() {
        apply(machine.timerFired(at: .now), because: "")
    }

    // MARK: - Actions

    private func apply(_ action: LingerStateMachine.Action, because reason: String) {
        let sink = machine.sink.flatMap { sinkNames[$0] } ?? "?"
        switch action {
        case .none:
            break
        case .pause:
            logger.notice("nothing else played on sink \(sink) for \(Self.describe(duration)): letting it sleep (--linger)")
            for output in outputs { manager.pause(.linger, output: output) }
        case .resume:
            if reason.isEmpty {
                logger.notice("another stream plays on sink \(sink): keeping it awake (--linger)")
            } else {
                logger.notice("\(reason): keeping \(outputs.joined(separator: ", ")) awake (--linger)")
            }
            for output in outputs { manager.resume(.linger, output: output) }
        case .armTimer(let deadline):
            let delay = max(ContinuousClock.now.duration(to: deadline), .milliseconds(1))
            if let lingerTimer { cpulse_timer_arm(loop, lingerTimer, delay.microseconds) }
        case .cancelTimer:
            if let lingerTimer { cpulse_timer_disarm(loop, lingerTimer) }
        }
        let machine = machine
        let connected = context != nil && machine.isConnected
        published.withLock {
            $0.sink = machine.sink.flatMap { sinkNames[$0] }
            $0.othersPlaying = machine.othersPlaying
            $0.connected = connected
            $0.paused = machine.isPaused
            $0.deadline = machine.deadline
        }
    }

    /// `10 min`, `90 s`, `1 h 30 min`.
    static func describe(_ duration: Duration) -> String {
        let seconds = Int(duration.seconds.rounded())
        switch seconds {
        case ..<120 where seconds % 60 != 0 || seconds < 60: return "\(seconds) s"
        case ..<3600: return seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds / 60) min \(seconds % 60) s"
        default: return seconds % 3600 == 0 ? "\(seconds / 3600) h" : "\(seconds / 3600) h \(seconds / 60 % 60) min"
        }
    }
}

/// What `status` reports about `--linger` on a sound-server output.
struct LingerStatus: Sendable {
    var seconds: Double
    var sink: String?
    var othersPlaying = false
    var connected = false
    var paused = false
    var deadline: ContinuousClock.Instant?
}

extension Duration {
    var microseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds / 1_000_000_000_000))
    }
}
