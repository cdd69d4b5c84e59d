import Glibc

/// Whether a ring written once goes round: the ring loop's look, two rings and a second after each
/// fill, at a device that may play what it was given only once. A driver that copies audio out in
/// batches of its own (an indirect driver that does not say it is one) plays a ring written once
/// once, then either stops where it ended (its position still) or stops itself with an underrun,
/// though the ring loop's stop threshold never lets a stream run dry. Either way the output must
/// stream instead: refilled, such a device would play one ring after each health check and be
/// silent in between, for ever.
///
/// No I/O: the ring loop tells it of each fill, of each stream error, and of what it saw at
/// ``deadline``.
///
/// ```swift
/// var check = RingReplayCheck(ringFrames: 96000, ringDuration: .seconds(2), boundary: pcm.boundary)
/// check.filled(at: now, position: pcm.playedPosition)
/// // poll until check.deadline, then:
/// if case .notReplayed(let reason) = check.looked(at: check.deadline!, .running(position: pcm.playedPosition)) { print(reason) }
/// ```
struct RingReplayCheck {
    /// How long after two rings' length the first look comes, and the second after the first. It
    /// asks only for more than one ring played, so a device that starts late (a USB DAC's first
    /// packets, an emulated one on a loaded host) has a ring and this margin to spare, while one
    /// that stopped after the ring it was given never gets there. A late wakeup only adds frames.
    static let margin: Duration = .seconds(1)

    /// What the stream was at a look.
    enum Stream: Equatable {
        /// Running, at `position` (``PCMDevice/playedPosition``; nil when the device cannot say).
        case running(position: Int?)
        /// Stopped with an underrun (XRUN).
        case underrun
        /// Any other state (suspended, gone, not started): the ring loop's recovery's, not this
        /// check's.
        case other
    }

    /// Why a device does not replay its ring.
    enum Reason: Equatable {
        /// Its position stopped within the ring written once.
        case positionStopped
        /// It stopped itself with an underrun before its ring was seen to go round.
        case underrun
    }

    enum Action: Equatable {
        /// Nothing for the check to do: not due, the ring went round, or it cannot be told.
        case none
        /// Not past one ring yet: look again at ``deadline`` (a slow device still moves, one that
        /// stopped does not).
        case lookAgain
        /// Stream instead.
        case notReplayed(Reason)
        /// A stream error the first ring does not explain: the ring loop's recovery.
        case recover
    }

    private enum State {
        /// Nothing to check: none filled, or the last fill checked.
        case idle
        /// The first look, at `deadline`, counting from `position` (the fill's).
        case first(deadline: ContinuousClock.Instant, position: Int?)
        /// The second look, at `deadline`: has the position moved from `position` at all?
        case confirming(deadline: ContinuousClock.Instant, position: Int)
    }

    let ringFrames: Int
    let ringDuration: Duration
    /// Where the device's positions wrap (0: they do not).
    let boundary: Int
    private var state = State.idle

    init(ringFrames: Int, ringDuration: Duration, boundary: Int) {
        self.ringFrames = ringFrames
        self.ringDuration = ringDuration
        self.boundary = boundary
    }

    /// When the ring loop must look next; nil when nothing is to be checked.
    var deadline: ContinuousClock.Instant? {
        switch state {
        case .idle: nil
        case .first(let deadline, _), .confirming(let deadline, _): deadline
        }
    }

    /// The ring was filled and started at `now`, the device at `position`.
    mutating func filled(at now: ContinuousClock.Instant, position: Int?) {
        state = .first(deadline: now + ringDuration * 2 + Self.margin, position: position)
    }

    /// The stream failed with `code` (a negative errno). An underrun before the ring was seen to
    /// go round is the device stopping itself after what it was given; anything else, and any
    /// error once the ring went round, is for the recovery.
    mutating func streamFailed(_ code: Int32) -> Action {
        guard code == -EPIPE else { return .recover }
        switch state {
        case .idle:
            return .recover
        case .first, .confirming:
            state = .idle
            return .notReplayed(.underrun)
        }
    }

    /// What the ring loop saw at `now`, at or after ``deadline``.
    mutating func looked(at now: ContinuousClock.Instant, _ stream: Stream) -> Action {
        switch state {
        case .idle:
            preconditionFailure("RingReplayCheck.looked with nothing to check")
        case .first(let deadline, _), .confirming(let deadline, _):
            if now < deadline { return .none }
        }
        let looking = state
        state = .idle
        let position: Int?
        switch stream {
        case .underrun: return .notReplayed(.underrun)
        case .other: return .none
        case .running(let at): position = at
        }
        switch looking {
        case .idle:
            preconditionFailure("unreachable: idle was handled above")
        case .first(_, let before):
            guard let before, let position else { return .none }
            guard played(from: before, to: position) <= ringFrames else { return .none }
            state = .confirming(deadline: now + Self.margin, position: position)
            return .lookAgain
        case .confirming(_, let before):
            // Not one frame since the last look, which found at most one ring played: the
            // position stopped where the ring written once ended.
            guard let position else { return .none }
            return played(from: before, to: position) == 0 ? .notReplayed(.positionStopped) : .none
        }
    }

    /// Frames played between two positions, across the boundary (``PCMDevice/framesPlayed(from:to:)``).
    private func played(from before: Int, to after: Int) -> Int {
        guard boundary > 0 else { return after - before }
        return ((after - before) % boundary + boundary) % boundary
    }
}
