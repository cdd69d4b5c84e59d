/// Every decision of the streaming loop's turn, without I/O: at each look at the device's room,
/// whether to write and how much (the ``StreamPacer``'s answer, or the room a device that holds
/// back is given, ``StallDetector/holdsBack(at:)``), or to sleep and until when, or that the
/// device stalled; after a write, what the pacer and the ``StallDetector`` learn of it and when
/// the queued audio runs out. ``StreamPlayback`` reads, writes and sleeps; this decides, so the
/// judgement is tested without a device or a clock that waits.
///
/// ```swift
/// var schedule = StreamSchedule(format: format, at: .now)
/// if case .write(let frames) = schedule.looked(available: 24000, at: .now) {
///     // write up to `frames`, a burst at most `schedule.threshold` long, then:
///     _ = schedule.wrote(frames, availableAfter: nil, at: .now)
/// }
/// ```
struct StreamSchedule {
    enum Action: Equatable {
        /// Write up to this many frames, a burst of at most ``threshold``; then tell
        /// ``wrote(_:availableAfter:at:)``, or ``tookNothing()`` when the device took nothing.
        case write(Int)
        /// Nothing to write: sleep until then, look at the descriptors, and at the room again.
        case sleep(until: ContinuousClock.Instant)
        /// The device made no progress for `for`, since `since`: lose it.
        case stalled(for: Duration, since: ContinuousClock.Instant)
        /// Audio was written: start a prepared stream; audio flows. `pacedByClock`: this write
        /// showed, for the first time, that the device does not pace itself (worth a notice).
        case wrote(pacedByClock: Bool)
    }

    private enum State {
        /// Between looks: the next event is a look at the device's room.
        case idle
        /// A write is due, decided at a look at `at` that found `available` frames free;
        /// `toppingUp`: the room a device that holds back is given.
        case writing(available: Int, at: ContinuousClock.Instant, toppingUp: Bool)
    }

    /// What the machine holds, for its tests' tables.
    enum Phase: Equatable, Sendable {
        case idle
        case writing(available: Int, toppingUp: Bool)
    }

    var phase: Phase {
        switch state {
        case .idle: .idle
        case .writing(let available, _, let toppingUp): .writing(available: available, toppingUp: toppingUp)
        }
    }

    private(set) var pacer: StreamPacer
    private(set) var stalls: StallDetector
    /// When the queued audio runs out if nothing more is written: the start of the silence an
    /// underrun reports (the process may have been stopped long after the buffer ran dry).
    private(set) var drainsAt: ContinuousClock.Instant
    private var state = State.idle

    init(format: OutputFormat, at now: ContinuousClock.Instant) {
        pacer = StreamPacer(format: format, at: now)
        stalls = StallDetector(window: StallDetector.window(threshold: pacer.threshold, rate: format.sampleRate), at: now)
        drainsAt = now
    }

    /// The longest burst: a write worth a wakeup ends there (``StreamPacer/threshold``).
    var threshold: Int { pacer.threshold }

    /// Whether the loop reads the device's room right after the next write, for
    /// ``wrote(_:availableAfter:at:)`` (``StreamPacer/checksNextWrite``).
    var checksAfterWrite: Bool { pacer.checksNextWrite }

    /// When the buffer ran dry, if that was before `now`: the start of an underrun's silence.
    func dryAt(before now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        drainsAt < now ? drainsAt : nil
    }

    /// The stream starts again on an empty (prepared), resumed or carried buffer at `now`; a
    /// write that failed is forgotten.
    mutating func restart(at now: ContinuousClock.Instant) {
        state = .idle
        pacer.restart(at: now)
        stalls.restart(at: now)
    }

    /// The device had `available` frames free (a read that did not fail) at `now`.
    mutating func looked(available: Int, at now: ContinuousClock.Instant) -> Action {
        guard case .idle = state else { preconditionFailure("StreamSchedule.looked while a write is due") }
        stalls.observe(available: available, bufferFrames: pacer.bufferFrames, at: now)
        var writable = pacer.writable(available: available, at: now)
        let toppingUp = writable == 0 && available > 0 && stalls.holdsBack(at: now)
        if toppingUp { writable = pacer.heldBack(available: available) }
        guard writable > 0 else { return wait(available: available, at: now) }
        state = .writing(available: available, at: now, toppingUp: toppingUp)
        return .write(writable)
    }

    /// The device took none of the write (EAGAIN): sleep, and look again.
    mutating func tookNothing() -> Action {
        guard case .writing(let available, let now, _) = state else { preconditionFailure("StreamSchedule.tookNothing with no write due") }
        state = .idle
        // Room reported but nothing taken (EAGAIN): look again after a sleep.
        return wait(available: available, at: now)
    }

    /// `frames` (at least one) were written, at `after`; the device had `availableAfter` free
    /// right after when read (``checksAfterWrite``; nil when not, negative when the read failed).
    mutating func wrote(_ frames: Int, availableAfter: Int?, at after: ContinuousClock.Instant) -> Action {
        guard case .writing(let available, let now, let toppingUp) = state, frames > 0 else {
            preconditionFailure("StreamSchedule.wrote with no write due, or nothing written")
        }
        state = .idle
        let reread = availableAfter.flatMap { $0 >= 0 ? $0 : nil }
        let left = reread ?? available - frames
        let pacedByClock = pacer.wrote(frames, availableBefore: available, availableAfter: reread)
        if toppingUp { stalls.toppedUp(availableAfter: left) } else { stalls.wrote(availableAfter: left, at: after) }
        // Timed from the look before the write, not from `after`: a process stopped
        // between its write and a later clock read (SIGSTOP, a frozen cgroup) would
        // date the audio it queued from its resume, and the underrun that followed
        // would report no silence at all.
        drainsAt = now + .seconds(Double(pacer.bufferFrames - left) / pacer.rate)
        return .wrote(pacedByClock: pacedByClock)
    }

    /// Nothing written at a look at `now` that found `available` free: a stall, or a sleep until
    /// the pacer's next look or the stall window's end, whichever comes first.
    private func wait(available: Int, at now: ContinuousClock.Instant) -> Action {
        if let since = stalls.stalled(at: now) { return .stalled(for: since.duration(to: now), since: since) }
        return .sleep(until: min(pacer.nextCheck(available: available, at: now), now + stalls.remaining(at: now)))
    }
}
