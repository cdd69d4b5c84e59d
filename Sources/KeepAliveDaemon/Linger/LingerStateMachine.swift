/// Every decision `--linger` makes, without I/O: when to let a sound-server output sleep and when
/// to keep it awake again. The daemon's watcher feeds it what the server shows and the time, and
/// carries out the one ``Action`` each event returns, in the shape of swift-nio's state
/// machines: one ``State`` whose cases carry their data, one mutating function per event, an
/// event before ``start(at:)`` (or a second start) a precondition failure.
///
/// The rule: keep the output awake until `duration` has passed since any other stream last
/// played on its sink (at start, since start), then pause it; resume it as soon as another stream
/// plays there. Without a server to ask, keep it awake: pausing blind could let a sink sleep
/// that another program is about to use.
///
/// ```swift
/// var machine = LingerStateMachine(duration: .seconds(600))
/// machine.start(at: .now)                    // .armTimer(now + 600 s)
/// let view = LingerView(streams: [.init(sink: 0, isCorked: false, isOwn: false)], sinks: [0], defaultSink: 0)
/// machine.serverChanged(view, at: .now)      // .cancelTimer while another stream plays
/// machine.timerFired(at: .now)               // .pause once nothing else played for 600 s
/// ```
struct LingerStateMachine: Sendable {
    /// What the watcher must do.
    enum Action: Equatable, Sendable {
        /// Nothing.
        case none
        /// Close the output: nothing else played for the whole linger time.
        case pause
        /// Open it again: another stream plays on the sink, or the server cannot be watched.
        case resume
        /// Call ``timerFired(at:)`` at this instant (replacing any earlier deadline).
        case armTimer(ContinuousClock.Instant)
        /// No deadline runs now.
        case cancelTimer
    }

    /// Where linger stands. The output is paused in ``paused`` only.
    enum State: Equatable, Sendable {
        /// ``start(at:)`` did not come yet.
        case notStarted
        /// The server cannot be asked (not yet, or no more): awake. `deadline`: the start's
        /// window, while the server never answered.
        case disconnected(deadline: ContinuousClock.Instant?)
        /// Another stream plays on the watched sink: awake, no window runs.
        case othersPlaying
        /// Nothing else plays on the watched sink: awake until `deadline`.
        case lingering(until: ContinuousClock.Instant)
        /// Nothing else played there for the whole duration: paused.
        case paused
    }

    /// How long the output stays awake after the last other stream stopped.
    let duration: Duration
    private(set) var state = State.notStarted
    /// The sink watched: the one keepalived's own stream plays on, else the one it last played
    /// on, else the server's default. Beside `state` rather than in it, like `lastOwnSink`:
    /// what the server's streams show, whatever linger decided.
    private(set) var sink: UInt32?
    private var lastOwnSink: UInt32?

    init(duration: Duration) {
        self.duration = duration
    }

    /// Whether the output is paused by linger now.
    var isPaused: Bool { state == .paused }
    /// Whether another stream plays on the watched sink now.
    var othersPlaying: Bool { state == .othersPlaying }
    /// Whether the server answers.
    var isConnected: Bool {
        switch state {
        case .notStarted, .disconnected: false
        case .othersPlaying, .lingering, .paused: true
        }
    }
    /// When the output will be paused unless another stream plays first.
    var deadline: ContinuousClock.Instant? {
        switch state {
        case .disconnected(let deadline): deadline
        case .lingering(let deadline): deadline
        case .notStarted, .othersPlaying, .paused: nil
        }
    }

    // MARK: - Events

    /// The daemon starts: the first window runs from now.
    mutating func start(at now: ContinuousClock.Instant) -> Action {
        guard case .notStarted = state else { preconditionFailure("linger started twice") }
        state = .disconnected(deadline: now + duration)
        return .armTimer(now + duration)
    }

    /// The server's streams and sinks, as they are after a change (or at connection).
    mutating func serverChanged(_ view: LingerView, at now: ContinuousClock.Instant) -> Action {
        let watched = watch(view)
        let others = view.streams.contains { !$0.isOwn && !$0.isCorked && watched.contains($0.sink) }
        switch (state, others) {
        case (.notStarted, _):
            preconditionFailure("the server watched before linger started")
        case (.othersPlaying, true), (.lingering, false), (.paused, false):
            return .none
        case (.disconnected(let deadline), true):
            state = .othersPlaying
            return deadline == nil ? .none : .cancelTimer
        case (.lingering, true):
            state = .othersPlaying
            return .cancelTimer
        case (.paused, true):
            state = .othersPlaying
            return .resume
        case (.othersPlaying, false):
            // The window starts when the last other stream stops.
            state = .lingering(until: now + duration)
            return .armTimer(now + duration)
        case (.disconnected(let deadline), false):
            // A server that answers (again): the start's window if it still runs, else a new one,
            // since what played while it could not be asked is unknown.
            let next = deadline.flatMap { $0 > now ? $0 : nil } ?? now + duration
            state = .lingering(until: next)
            return .armTimer(next)
        }
    }

    /// The armed deadline came (or a timer fired early, or late after the window closed).
    mutating func timerFired(at now: ContinuousClock.Instant) -> Action {
        switch state {
        case .notStarted:
            preconditionFailure("the linger timer fired before linger started")
        case .disconnected, .othersPlaying, .paused:
            return .none
        case .lingering(let deadline):
            guard now >= deadline else { return .armTimer(deadline) }
            state = .paused
            return .pause
        }
    }

    /// The server went away or refused: keep the output awake until it answers again.
    mutating func serverLost() -> Action {
        let action: Action
        switch state {
        case .notStarted:
            preconditionFailure("the server lost before linger started")
        case .disconnected(let deadline):
            action = deadline == nil ? .none : .cancelTimer
        case .lingering:
            action = .cancelTimer
        case .paused:
            action = .resume
        case .othersPlaying:
            action = .none
        }
        state = .disconnected(deadline: nil)
        return action
    }

    // MARK: - Rules

    /// Follows keepalived's own stream to its sink; returns the sinks watched.
    private mutating func watch(_ view: LingerView) -> Set<UInt32> {
        let own = view.streams.filter(\.isOwn).map(\.sink)
        if let first = own.first { lastOwnSink = first }
        let watched: Set<UInt32>
        if !own.isEmpty {
            watched = Set(own)
        } else if let lastOwnSink, view.sinks.contains(lastOwnSink) {
            watched = [lastOwnSink]
        } else {
            watched = view.defaultSink.map { [$0] } ?? []
        }
        sink = own.first ?? watched.first
        return watched
    }
}

/// What a sound server shows that ``LingerStateMachine`` decides on.
///
/// ```swift
/// let view = LingerView(streams: [.init(sink: 0, isCorked: false, isOwn: false)], sinks: [0], defaultSink: 0)
/// ```
struct LingerView: Equatable, Sendable {
    /// One playback stream (a PulseAudio sink input).
    struct Stream: Equatable, Sendable {
        /// The sink it plays on.
        var sink: UInt32
        /// Paused by its client: it does not play.
        var isCorked: Bool
        /// keepalived's own stream (the same process id).
        var isOwn: Bool

        init(sink: UInt32, isCorked: Bool, isOwn: Bool) {
            self.sink = sink
            self.isCorked = isCorked
            self.isOwn = isOwn
        }
    }

    var streams: [Stream]
    /// The sinks that exist.
    var sinks: Set<UInt32>
    /// The server's default sink, if it has one.
    var defaultSink: UInt32?

    init(streams: [Stream], sinks: Set<UInt32>, defaultSink: UInt32?) {
        self.streams = streams
        self.sinks = sinks
        self.defaultSink = defaultSink
    }
}
