import CKeepAlivePulse
import KeepAlive
import Logging
import Glibc

/// `--linger DURATION`: watches the sound server's streams with libpulse (loaded now unless a
/// selection or a sink's stream loaded it first; it speaks to PulseAudio and to PipeWire's
/// pipewire-pulse alike) and pauses each sound-server
/// output once nothing else played on its sink for DURATION, resuming it as soon as another
/// stream plays there. Each output has a ``LingerStateMachine`` of its own (a sink output
/// watches its sink, `pulse` the sink its stream plays on); this class only connects, lists
/// streams and carries the actions out. Outputs a selection adds or drops while running are
/// followed with ``follow(_:)``, each new one with a whole window.
///
/// Everything runs on the daemon's one listing of the server (``ServerWatchers``, shared with the
/// sink watcher) and the process's one libpulse connection and main loop: one thread
/// blocked in poll while nothing changes, so an idle daemon gets no wakeup from it. The
/// manager's pause and resume are carried out in order off that thread (``SerialCalls``): they
/// join the output's playback thread, whose sink stream needs the loop's lock to close. When the
/// server goes away the outputs play (fail safe) and the watcher reconnects with backoff.
///
/// ```swift
/// let watcher = try LingerWatcher(duration: .seconds(600), outputs: ["pulse"], manager: manager, logger: logger)
/// try watcher.start()
/// // …
/// watcher.stop()
/// ```
///
/// Concurrency: its timers and machines are touched only on the sound server connection's thread or
/// with its loop locked, which every callback, its timer and ``follow(_:)``'s work check in every
/// build (``ServerWatchers/preconditionLocked(_:file:line:)``, the connection's
/// ``SoundServerConnection/preconditionLocked(_:file:line:)``); what other threads read is behind
/// ``Locked``: so `@unchecked Sendable`.
final class LingerWatcher: SoundServerListener, @unchecked Sendable {
    let duration: Duration
    let manager: KeepAliveManager
    let logger: Logger

    private let listing: ServerWatchers
    // Touched only on the listing's thread, or with its lock held.
    private var loop: OpaquePointer { listing.loop }
    /// Joined to the listing (between start and stop).
    private var joined = false
    private var lingerTimer: OpaquePointer?
    /// One per output, by PCM name, and the deadline each asked for.
    private var machines: [String: LingerStateMachine] = [:]
    private var deadlines: [String: ContinuousClock.Instant] = [:]
    private var started = false
    private var warnedUnreachable = false
    private var defaultSinkName: String?
    private var sinkNames: [UInt32: String] = [:]
    private var streams: [LingerView.Stream] = []

    /// The outputs followed and what `status` shows of each, updated after every decision.
    private let published: Locked<(outputs: [String], status: [String: LingerStatus])>
    /// The manager's pauses and resumes, in the order decided, off the main loop's thread.
    private let managerCalls: SerialCalls

    /// Loads libpulse. Throws its loader's message when it cannot.
    init(duration: Duration, outputs: [String], manager: KeepAliveManager, logger: Logger) throws(ServerWatchers.LibraryMissing) {
        listing = try ServerWatchers.shared(logger: logger)
        self.duration = duration
        self.manager = manager
        self.logger = logger
        managerCalls = SerialCalls(threadName: "keepalive-lngr") { error in
            logger.error("--linger: \(error); pausing and resuming outputs waits for the next decision")
        }
        for output in outputs { machines[output] = LingerStateMachine(duration: duration) }
        published = Locked((outputs, Dictionary(uniqueKeysWithValues: outputs.map { ($0, LingerStatus(seconds: duration.seconds)) })))
    }

    /// Starts the window (the outputs play for DURATION from now) and joins the listing of the
    /// server.
    func start() {
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        let running = listing.join(self) {
            joined = true
            lingerTimer = cpulse_timer_new(loop, { LingerWatcher.from($0).lingerTimerFired() }, userdata)
            started = true
            let now = ContinuousClock.now
            for output in machines.keys.sorted() { apply(machines[output]!.start(at: now), to: output, because: "") }
            armTimer()
        }
        if !running {
            logger.warning("--linger: cannot start libpulse's main loop: keeping \(outputs.joined(separator: ", ")) awake")
        }
    }

    /// Leaves the connection to the server once every pause and resume decided was carried
    /// out; the outputs stay as they are (the manager stops them next).
    func stop() {
        listing.leave(self) {
            if let lingerTimer { cpulse_timer_free(loop, lingerTimer) }
            lingerTimer = nil
            joined = false
        }
        // Unlocked: a pause under way waits for a sink stream's close, which takes the lock.
        managerCalls.waitUntilDone()
    }

    /// The outputs it lingers now.
    var outputs: [String] { published.withLock { $0.outputs } }

    /// For `status`: what linger does on `output`; nil when it does not linger.
    func status(of output: String) -> LingerStatus? { published.withLock { $0.status[output] } }

    /// Lingers exactly `outputs` from now on: a new one starts with a whole window (as at
    /// start), one no longer named is let go of (resumed, should linger have paused it).
    func follow(_ outputs: [String]) {
        listing.withLock { follow(locked: outputs) }
    }

    private func follow(locked outputs: [String]) {
        listing.preconditionLocked("LingerWatcher.follow")
        let now = ContinuousClock.now
        for output in machines.keys where !outputs.contains(output) {
            machines.removeValue(forKey: output)
            deadlines.removeValue(forKey: output)
            managerCalls.enqueue { [manager] in manager.resume(.linger, output: output) }
        }
        published.withLock { published in
            published.outputs = outputs
            published.status = published.status.filter { outputs.contains($0.key) }
            for output in outputs where published.status[output] == nil { published.status[output] = LingerStatus(seconds: duration.seconds) }
        }
        for output in outputs where machines[output] == nil {
            machines[output] = LingerStateMachine(duration: duration)
            guard started else { continue }
            apply(machines[output]!.start(at: now), to: output, because: "")
            if let view = lastView { apply(machines[output]!.serverChanged(view(output), at: now), to: output, because: "") }
        }
        armTimer()
    }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> LingerWatcher {
        Unmanaged<LingerWatcher>.fromOpaque(userdata!).takeUnretainedValue()
    }

    // MARK: - SoundServerListener, on the listing's thread

    func connectionReady() {
        listing.preconditionLocked("LingerWatcher.connectionReady")
        if warnedUnreachable { logger.notice("--linger: the sound server answers again") }
        warnedUnreachable = false
    }

    func connectionLost(_ error: String) {
        listing.preconditionLocked("LingerWatcher.connectionLost")
        if !warnedUnreachable {
            warnedUnreachable = true
            logger.warning("--linger: cannot watch the sound server (\(error)): keeping \(outputs.joined(separator: ", ")) awake; retrying")
        }
        for output in machines.keys.sorted() {
            apply(machines[output]!.serverLost(), to: output, because: "the sound server cannot be watched")
        }
        lastView = nil
        armTimer()
    }

    func serverListed(_ view: SoundServerView) {
        listing.preconditionLocked("LingerWatcher.serverListed")
        defaultSinkName = view.defaultSink
        sinkNames = Dictionary(view.sinks.map { ($0.index, $0.name) }, uniquingKeysWith: { first, _ in first })
        // Another keepalived's stream keeps a sink awake; it is not a sound that needs it (two
        // lingering daemons would keep each other awake for ever).
        streams = view.streams.filter { !$0.isAnotherKeepalived }.map { LingerView.Stream(sink: $0.sink, isCorked: $0.isCorked, isOwn: $0.isOwn) }
        let views = makeViews()
        lastView = views
        let now = ContinuousClock.now
        for output in machines.keys.sorted() { apply(machines[output]!.serverChanged(views(output), at: now), to: output, because: "") }
        armTimer()
    }

    /// What the last listing showed, as each output's machine sees it.
    private var lastView: ((String) -> LingerView)?

    /// Each output's view of the server: its own stream is the one on its sink (a sink output)
    /// or the one on no sink output's sink (`pulse`); keepalived's streams of other outputs are
    /// not "another stream" to it.
    private func makeViews() -> (String) -> LingerView {
        let index = { (name: String) in self.sinkNames.first { $0.value == name }?.key }
        let defaultSink = defaultSinkName.flatMap(index)
        let targets = Dictionary(machines.keys.compactMap { output in ServerSink.sinkName(fromPCM: output).map { (output, index($0)) } }) { first, _ in first }
        let sinkOutputsSinks = Set(targets.values.compactMap { $0 })
        let (streams, sinks) = (self.streams, Set(sinkNames.keys))
        return { output in
            let named = targets.keys.contains(output)
            let target = targets[output] ?? nil
            let own = streams.filter { stream in
                guard stream.isOwn else { return true }
                return named ? stream.sink == target : !sinkOutputsSinks.contains(stream.sink)
            }
            return LingerView(streams: own, sinks: sinks, defaultSink: named ? target : defaultSink)
        }
    }

    private func lingerTimerFired() {
        listing.preconditionLocked("LingerWatcher.lingerTimerFired")
        let now = ContinuousClock.now
        for (output, deadline) in deadlines.sorted(by: { $0.key < $1.key }) where deadline <= now {
            deadlines.removeValue(forKey: output)
            apply(machines[output]!.timerFired(at: now), to: output, because: "")
        }
        armTimer()
    }

    /// The one timer, at the earliest deadline any output asked for.
    private func armTimer() {
        guard let lingerTimer else { return }
        guard let earliest = deadlines.values.min() else {
            cpulse_timer_disarm(loop, lingerTimer)
            return
        }
        let delay = max(ContinuousClock.now.duration(to: earliest), .milliseconds(1))
        cpulse_timer_arm(loop, lingerTimer, delay.microseconds)
    }

    // MARK: - Actions

    /// Carries out what `output`'s machine decided; the caller arms the timer afterwards.
    private func apply(_ action: LingerStateMachine.Action, to output: String, because reason: String) {
        guard let machine = machines[output] else { return }
        let sink = machine.sink.flatMap { sinkNames[$0] } ?? "?"
        switch action {
        case .none:
            break
        case .pause:
            logger.notice("nothing else played on sink \(sink) for \(duration.spoken): letting it sleep (--linger)", metadata: ["device": "\(output)"])
            managerCalls.enqueue { [manager] in manager.pause(.linger, output: output) }
        case .resume:
            if reason.isEmpty {
                logger.notice("another stream plays on sink \(sink): keeping it awake (--linger)", metadata: ["device": "\(output)"])
            } else {
                logger.notice("\(reason): keeping \(output) awake (--linger)")
            }
            managerCalls.enqueue { [manager] in manager.resume(.linger, output: output) }
        case .armTimer(let deadline):
            deadlines[output] = deadline
        case .cancelTimer:
            deadlines.removeValue(forKey: output)
        }
        let connected = joined && machine.isConnected
        let status = LingerStatus(seconds: duration.seconds, sink: machine.sink.flatMap { sinkNames[$0] }, othersPlaying: machine.othersPlaying,
                                  connected: connected, paused: machine.isPaused, deadline: machine.deadline)
        published.withLock { if $0.outputs.contains(output) { $0.status[output] = status } }
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
