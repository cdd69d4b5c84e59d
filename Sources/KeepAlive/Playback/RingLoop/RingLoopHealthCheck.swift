import Glibc

/// Every decision of the ring loop's sleep, without I/O: how long it sleeps, what it looks at
/// when it wakes (the ring's replay, two rings and a second after a fill: ``RingReplayCheck``; or
/// the stream's health: running, and its position moving), and what a look means (a device that
/// does not replay its ring, a stall and the downtime to report, the frames played for the
/// heartbeat). ``RingLoopPlayback`` only sleeps, reads the device and acts on the answers, so
/// the judgement is tested without a device or a clock that waits.
///
/// The interval between health checks is the machine's own, chosen once for the open: where the
/// loop sleeps on the PCM's descriptors a suspend, an unplug or a stop wakes it at once and a
/// minute is enough; where it does not (USB audio, a Raspberry Pi's HDMI) it looks every
/// ``RingLoopPlayback/quietHealthCheckInterval``, and a stall it reports has lasted that long,
/// not a minute.
///
/// ```swift
/// var check = RingLoopHealthCheck(quiet: true, ringFrames: 96000, ringDuration: .seconds(2), boundary: 0, rate: 48000)
/// check.filled(at: .now, position: 0)
/// // poll for check.sleep(from: .now), then on a timeout:
/// if check.timedOut(at: .now) == .lookAtHealth {
///     _ = check.healthLooked(at: .now, .running(position: 0))
/// }
/// ```
struct RingLoopHealthCheck {
    /// What a wakeup without an event asks the loop to read.
    enum Action: Equatable {
        /// Nothing to do: sleep again.
        case none
        /// Read the position, then the state (reading the position is what updates the state of a
        /// PCM that learns of an underrun only when asked: alsa-lib's ioplug), and tell
        /// ``replayLooked(at:_:)``.
        case lookAtReplay
        /// Read the state, and the position while it runs, and tell ``healthLooked(at:_:)``.
        case lookAtHealth
        /// The stream failed with this code (a negative errno): the loop's recovery.
        case recover(Int32)
        /// The device does not replay its ring: stream instead.
        case notReplayed(RingReplayCheck.Reason)
        /// The position did not move for `for`: lose the device, down since `since`.
        case stalled(for: Duration, since: ContinuousClock.Instant)
        /// Frames played since the last look: the heartbeat, and the count in `status`.
        case played(Int)
    }

    /// What the stream was at a health check.
    enum Health: Equatable {
        /// Running, at `position` (nil when the device cannot say).
        case running(position: Int?)
        /// In a state other than running, which stands for this stream error.
        case failed(Int32)
    }

    private enum State {
        /// Not filled yet: nothing is playing, so nothing is looked at.
        case unfilled
        /// The ring plays; `position` is the last one read (nil: unknown), `replay` whether the
        /// last fill is seen to go round.
        case playing(position: Int?, replay: RingReplayCheck)
    }

    /// What the machine holds, for its tests' tables: nothing before the first position is read;
    /// then the last position, and when the replay is to be looked at next (nil: it went round,
    /// or could not be told).
    enum Phase: Equatable, Sendable {
        case unfilled
        case playing(position: Int?, replayDue: ContinuousClock.Instant?)
    }

    var phase: Phase {
        switch state {
        case .unfilled: .unfilled
        case .playing(let position, let replay): .playing(position: position, replayDue: replay.deadline)
        }
    }

    /// How long the loop sleeps between health checks, and so how long a stall it finds lasted.
    let interval: Duration
    let rate: Int
    private let replayCheck: RingReplayCheck
    private var state = State.unfilled

    /// `quiet`: the loop does not sleep on the PCM's descriptors (only a health check finds a
    /// stopped stream). `boundary`: where the device's positions wrap (0: they do not).
    init(quiet: Bool, ringFrames: Int, ringDuration: Duration, boundary: Int, rate: Int) {
        interval = quiet ? RingLoopPlayback.quietHealthCheckInterval : RingLoopPlayback.healthCheckInterval
        self.rate = rate
        replayCheck = RingReplayCheck(ringFrames: ringFrames, ringDuration: ringDuration, boundary: boundary)
    }

    /// How long to sleep from `now`: to the replay's next look, else a health check's interval.
    func sleep(from now: ContinuousClock.Instant) -> Duration {
        guard case .playing(_, let replay) = state, let deadline = replay.deadline else { return interval }
        return now.duration(to: deadline)
    }

    /// The ring was filled and started at `now`, the device at `position`.
    mutating func filled(at now: ContinuousClock.Instant, position: Int?) {
        var replay = replayCheck
        if case .playing(_, let current) = state { replay = current }
        replay.filled(at: now, position: position)
        state = .playing(position: position, replay: replay)
    }

    /// A stream error (a negative errno) woke the loop or a look found one.
    mutating func streamFailed(_ code: Int32) -> Action {
        // The first fill's own write or start may fail: nothing played yet to judge.
        guard case .playing(let position, var replay) = state else { return .recover(code) }
        let answer = replay.streamFailed(code)
        state = .playing(position: position, replay: replay)
        if case .notReplayed(let reason) = answer { return .notReplayed(reason) }
        return .recover(code)
    }

    /// The stream plays on from `position` (read after the first fill, or after a repair in
    /// place, which may have left the ring unfilled: the health check still looks at it).
    mutating func playing(position: Int?) {
        switch state {
        case .unfilled: state = .playing(position: position, replay: replayCheck)
        case .playing(_, let replay): state = .playing(position: position, replay: replay)
        }
    }

    /// The card's PCM node changed (the quiet path's wakeup): the stream was then in a state that
    /// stands for `stateError` (nil: running), and the node was still there or not. A udev chmod
    /// changes it too: a running stream whose node is there plays on.
    mutating func nodeChanged(stateError: Int32?, nodeExists: Bool) -> Action {
        guard case .playing = state else {
            preconditionFailure("RingLoopHealthCheck.nodeChanged before the ring was filled")
        }
        if let stateError { return .recover(stateError) }
        return nodeExists ? .none : .recover(-ENODEV)
    }

    /// The sleep ended without an event at `now`: what to read, if anything yet.
    mutating func timedOut(at now: ContinuousClock.Instant) -> Action {
        guard case .playing(_, let replay) = state else {
            preconditionFailure("RingLoopHealthCheck.timedOut before the ring was filled")
        }
        guard let deadline = replay.deadline else { return .lookAtHealth }
        return now >= deadline ? .lookAtReplay : .none
    }

    /// What the replay's look saw at `now`.
    mutating func replayLooked(at now: ContinuousClock.Instant, _ stream: RingReplayCheck.Stream) -> Action {
        guard case .playing(let position, var replay) = state, replay.deadline != nil else {
            preconditionFailure("RingLoopHealthCheck.replayLooked with no replay to look at")
        }
        let answer = replay.looked(at: now, stream)
        state = .playing(position: position, replay: replay)
        if case .notReplayed(let reason) = answer { return .notReplayed(reason) }
        return .none
    }

    /// What the health check saw at `now`.
    mutating func healthLooked(at now: ContinuousClock.Instant, _ health: Health) -> Action {
        guard case .playing(let before, let replay) = state, replay.deadline == nil else {
            preconditionFailure("RingLoopHealthCheck.healthLooked while the replay is still to be looked at")
        }
        let position: Int?
        switch health {
        case .failed(let code): return .recover(code)
        case .running(let at): position = at
        }
        state = .playing(position: position, replay: replay)
        guard let position, let before else { return .none }
        let moved = played(from: before, to: position)
        if moved <= 0 {
            // This open's own interval: on the quiet path the last look was 15 s ago, not a minute.
            return .stalled(for: interval, since: now - interval)
        }
        return .played(min(moved, rate * Int(interval.components.seconds) * 2))
    }

    /// Frames played between two positions, across the boundary (``PCMDevice/framesPlayed(from:to:)``).
    private func played(from before: Int, to after: Int) -> Int {
        let boundary = replayCheck.boundary
        guard boundary > 0 else { return after - before }
        return ((after - before) % boundary + boundary) % boundary
    }
}
