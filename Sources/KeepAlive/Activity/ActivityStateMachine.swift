/// Whether real audio plays on one output, as the things that follow power see it, without I/O:
/// **active** from the first real audio (a player through the front door, another stream on the
/// sink), **idle** once none has played for ``idleAfter``. Between tracks and across track skips
/// the audio stops for milliseconds to seconds; that is a **quieting** output, still active, and
/// never reaches idle unless the silence lasts. ``OutputActivityTracker`` keeps one per output,
/// feeds it and carries out the one ``Action`` each event returns: a change to report, a
/// deadline to wake at.
///
/// ```swift
/// var machine = ActivityStateMachine(idleAfter: .seconds(300))
/// machine.audioStarted(by: "mpd", at: now)          // .becameActive("mpd")
/// machine.audioStopped(at: now + .seconds(200))     // .armTimer(now + .seconds(500))
/// machine.audioStarted(by: "mpd", at: now + .seconds(201))   // .cancelTimer: the next track
/// ```
struct ActivityStateMachine: Sendable {
    /// How long no real audio must play before the output is idle.
    let idleAfter: Duration

    /// What the tracker must do.
    enum Action: Equatable, Sendable {
        case none
        /// Real audio started on an idle output, played by this program: run `on-active`, say so.
        case becameActive(program: String)
        /// The audio stopped: look again at this instant.
        case armTimer(ContinuousClock.Instant)
        /// Audio plays again before idle: the timer is not needed.
        case cancelTimer
        /// Nothing played for ``idleAfter``: run `on-idle`, say so; `program` played last.
        case becameIdle(program: String)
    }

    enum State: Equatable, Sendable {
        case idle(since: ContinuousClock.Instant?)
        /// Real audio plays; `since`: when the output became active; `program`: who plays now.
        case active(since: ContinuousClock.Instant, program: String)
        /// Active, but nothing plays since `silentSince`: idle at `idleAt` unless audio comes back.
        case quieting(since: ContinuousClock.Instant, program: String, idleAt: ContinuousClock.Instant)
    }

    private(set) var state = State.idle(since: nil)

    init(idleAfter: Duration) {
        self.idleAfter = idleAfter
    }

    /// Real audio plays now, by `program` (a player's name, a stream's application).
    mutating func audioStarted(by program: String, at now: ContinuousClock.Instant) -> Action {
        switch state {
        case .idle:
            state = .active(since: now, program: program)
            return .becameActive(program: program)
        case .active(let since, _):
            state = .active(since: since, program: program)
            return .none
        case .quieting(let since, _, _):
            state = .active(since: since, program: program)
            return .cancelTimer
        }
    }

    /// No real audio plays now.
    mutating func audioStopped(at now: ContinuousClock.Instant) -> Action {
        switch state {
        case .idle, .quieting:
            return .none
        case .active(let since, let program):
            let idleAt = now + idleAfter
            state = .quieting(since: since, program: program, idleAt: idleAt)
            return .armTimer(idleAt)
        }
    }

    /// The timer asked for fired (or any look at the clock): idle once the silence lasted.
    mutating func timerFired(at now: ContinuousClock.Instant) -> Action {
        guard case .quieting(_, let program, let idleAt) = state else { return .none }
        guard now >= idleAt else { return .armTimer(idleAt) }
        state = .idle(since: now)
        return .becameIdle(program: program)
    }

    /// The silence is cut short (a user's "standby now"): a quieting output is idle at once; one
    /// with audio playing stays active, as real audio always wins.
    mutating func silenceEnded(at now: ContinuousClock.Instant) -> Action {
        guard case .quieting(_, let program, _) = state else { return .none }
        state = .idle(since: now)
        return .becameIdle(program: program)
    }

    /// What status shows: active or idle, since when, and who plays (or played last).
    var report: (active: Bool, since: ContinuousClock.Instant?, program: String?) {
        switch state {
        case .idle(let since): (false, since, nil)
        case .active(let since, let program): (true, since, program)
        case .quieting(let since, let program, _): (true, since, program)
        }
    }

    /// When the output goes idle if nothing plays meanwhile; nil unless quieting.
    var idleAt: ContinuousClock.Instant? {
        if case .quieting(_, _, let idleAt) = state { idleAt } else { nil }
    }
}
