/// Every decision `--linger` makes, without I/O: when to let a sound-server output sleep and when
/// to keep it awake again. The daemon's watcher feeds it what the server shows and the time, and
/// carries out the actions it returns (swift-nio's state machine style).
///
/// The rule: keep the output awake until `duration` has passed since any other stream last
/// played on its sink (at start, since start), then pause it; resume it as soon as another stream
/// plays there. Without a server to ask, keep it awake: pausing blind could let a sink sleep
/// that another program is about to use.
///
/// ```swift
/// var machine = LingerStateMachine(duration: .seconds(600))
/// machine.start(at: .now)                    // [.armTimer(now + 600 s)]
/// machine.serverChanged(view, at: .now)      // [.cancelTimer] while another stream plays
/// machine.timerFired(at: .now)               // [.pause] once nothing else played for 600 s
/// ```
package struct LingerStateMachine: Sendable {
    /// What the watcher must do.
    package enum Action: Equatable, Sendable {
        /// Close the output: nothing else played for the whole linger time.
        case pause
        /// Open it again: another stream plays on the sink, or the server cannot be watched.
        case resume
        /// Call ``timerFired(at:)`` at this instant (replacing any earlier deadline).
        case armTimer(ContinuousClock.Instant)
        /// No deadline runs now.
        case cancelTimer
    }

    /// How long the output stays awake after the last other stream stopped.
    package let duration: Duration
    /// Whether the output is paused by linger now.
    package private(set) var isPaused = false
    /// Whether another stream plays on the watched sink now.
    package private(set) var othersPlaying = false
    /// When the output will be paused unless another stream plays first.
    package private(set) var deadline: ContinuousClock.Instant?
    /// The sink watched: the one keepalived's own stream plays on, else the one it last played
    /// on, else the server's default.
    package private(set) var sink: UInt32?
    /// Whether the server answers.
    package private(set) var isConnected = false
    private var lastOwnSink: UInt32?

    package init(duration: Duration) {
        self.duration = duration
    }

    /// The daemon starts: the first window runs from now.
    package mutating func start(at now: ContinuousClock.Instant) -> [Action] {
        deadline = now + duration
        return [.armTimer(now + duration)]
    }

    /// The server's streams and sinks, as they are after a change (or at connection).
    package mutating func serverChanged(_ view: LingerView, at now: ContinuousClock.Instant) -> [Action] {
        let wasConnected = isConnected
        isConnected = true
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
        let others = view.streams.contains { !$0.isOwn && !$0.isCorked && watched.contains($0.sink) }
        var actions: [Action] = []
        if others {
            if deadline != nil { actions.append(.cancelTimer) }
            deadline = nil
            othersPlaying = true
            if isPaused {
                isPaused = false
                actions.append(.resume)
            }
        } else if othersPlaying {
            // The window starts when the last other stream stops.
            othersPlaying = false
            deadline = now + duration
            actions.append(.armTimer(now + duration))
        } else if !wasConnected, !isPaused {
            // A server that answers (again): the start's window if it still runs, else a new one,
            // since what played while it could not be asked is unknown.
            let next = deadline.flatMap { $0 > now ? $0 : nil } ?? now + duration
            deadline = next
            actions.append(.armTimer(next))
        }
        return actions
    }

    /// The armed deadline came (or a timer fired early).
    package mutating func timerFired(at now: ContinuousClock.Instant) -> [Action] {
        guard let deadline, isConnected, !othersPlaying, !isPaused else { return [] }
        guard now >= deadline else { return [.armTimer(deadline)] }
        self.deadline = nil
        isPaused = true
        return [.pause]
    }

    /// The server went away or refused: keep the output awake until it answers again.
    package mutating func serverLost() -> [Action] {
        isConnected = false
        othersPlaying = false
        var actions: [Action] = deadline == nil ? [] : [.cancelTimer]
        deadline = nil
        if isPaused {
            isPaused = false
            actions.append(.resume)
        }
        return actions
    }
}

/// What a sound server shows that ``LingerStateMachine`` decides on.
///
/// ```swift
/// let view = LingerView(streams: [.init(sink: 0, isCorked: false, isOwn: false)], sinks: [0], defaultSink: 0)
/// ```
package struct LingerView: Equatable, Sendable {
    /// One playback stream (a PulseAudio sink input).
    package struct Stream: Equatable, Sendable {
        /// The sink it plays on.
        package var sink: UInt32
        /// Paused by its client: it does not play.
        package var isCorked: Bool
        /// keepalived's own stream (the same process id).
        package var isOwn: Bool

        package init(sink: UInt32, isCorked: Bool, isOwn: Bool) {
            self.sink = sink
            self.isCorked = isCorked
            self.isOwn = isOwn
        }
    }

    package var streams: [Stream]
    /// The sinks that exist.
    package var sinks: Set<UInt32>
    /// The server's default sink, if it has one.
    package var defaultSink: UInt32?

    package init(streams: [Stream], sinks: Set<UInt32>, defaultSink: UInt32?) {
        self.streams = streams
        self.sinks = sinks
        self.defaultSink = defaultSink
    }
}
