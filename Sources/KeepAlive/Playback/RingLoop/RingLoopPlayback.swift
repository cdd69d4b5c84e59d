import CALSA
import Glibc

/// The ring loop: fills the device's whole ring once with the signal tiled to its length,
/// starts it, and lets the hardware replay it for ever (the stream's stop threshold is the
/// boundary and the kernel writes no silence). The thread then sleeps on the PCM's descriptors
/// for errors only (a suspend, an unplug or a stopped stream raise POLLERR or POLLHUP) and on
/// its doorbell, and looks at the stream's health every ``healthCheckInterval`` (every
/// ``quietHealthCheckInterval`` where it does not sleep on the PCM): running, and its position
/// moving. After any prepare the ring is filled again. When to look and what a look means is
/// ``RingLoopHealthCheck``'s; the loop sleeps, reads and acts.
///
/// Once, two rings and a second after each fill, it checks that the hardware went round the
/// ring, and where it has not yet, a second later that its position still moves; an underrun
/// before then says the same (``RingReplayCheck``): a driver that copies audio out in batches of
/// its own (an indirect driver that does not say it is one) plays a ring written once only once,
/// then stops, plays silence, or stops itself with an underrun. Then the output streams instead
/// (``PlaybackContext/ringNotReplayed(_:)``).
///
/// ```swift
/// var playback = RingLoopPlayback(pcm: pcm, format: format, source: source)
/// let outcome = playback.play(in: loop)
/// ```
struct RingLoopPlayback {
    let pcm: PCMDevice
    let format: OutputFormat
    var source: any FrameSource
    /// Whether the thread sleeps on the PCM's own descriptors, for errors: only where the card
    /// switched its period interrupts off (HDA). Elsewhere (USB audio, a Raspberry Pi's HDMI) the
    /// kernel wakes every sleeper on the PCM at each period, so the thread would wake once a
    /// period for nothing; it sleeps instead on its doorbell and on the card's PCM node (an
    /// unplug deletes it), and looks at the stream every ``quietHealthCheckInterval``.
    var pollsDevice = true
    /// The card device the ring plays to, whose node is watched when ``pollsDevice`` is false.
    var hardware: HardwareDevice?

    /// How often the ring is checked. A minute: the check is the ring loop's one wakeup of its
    /// own (the watchdog's ping, every 30 s under the units, is the other), and a DMA ring does
    /// not stall unnoticed by the kernel, which reports a suspend, an unplug or a stop on the
    /// descriptor at once.
    static let healthCheckInterval: Duration = .seconds(60)
    /// The health check where the PCM's descriptors are not polled: the stream's state (a
    /// suspend without logind to close the output first, a stop) is found this late at most.
    /// Still under 0.1 wakeups a second.
    static let quietHealthCheckInterval: Duration = .seconds(15)
    /// The longest ring asked for, in seconds of audio: long enough that a device that cannot
    /// switch its period interrupts off wakes the kernel rarely, short enough to stay a small
    /// DMA buffer.
    static let maximumRingSeconds = 4

    mutating func play(in context: some PlaybackContext) -> PlaybackOutcome {
        var sleep: RingLoopSleep
        do {
            sleep = try RingLoopSleep(pcm: pcm, node: pollsDevice ? nil : hardware.flatMap(PCMNodeWatch.init), doorbell: context.doorbell)
        } catch { return context.lose(.unknown, error.description) }
        let ringDuration = Duration.nanoseconds(Int64(format.bufferFrames) * 1_000_000_000 / Int64(max(format.sampleRate, 1)))
        // Every judgement is the check's; the loop sleeps, reads the device and acts.
        var check = RingLoopHealthCheck(quiet: sleep.node != nil, ringFrames: format.bufferFrames, ringDuration: ringDuration,
                                        boundary: pcm.boundary, rate: format.sampleRate)
        if let outcome = fillAndStart(&check, context) { return outcome }
        check.playing(position: pcm.playedPosition)
        while true {
            if let request = context.pendingRequest(pcm, format) {
                if let outcome = take(request, &check, context) { return outcome }
                continue
            }
            let action: RingLoopHealthCheck.Action
            var operation = "state"
            switch sleep.wait(check.sleep(from: context.clock.now), pcm: pcm) {
            case .interrupted, .rung:
                continue
            case .failed(let code):
                return context.lose(.unknown, "poll: \(String(cString: strerror(code)))")
            case .nodeChanged(let node):
                // The card's PCM node changed: gone at an unplug. The stream's state says.
                action = check.nodeChanged(stateError: Self.stateError(pcm.state), nodeExists: node.exists)
            case .events(let events):
                guard let code = pcm.streamError(fromEvents: events) else { continue }
                (action, operation) = (.recover(code), "poll")
            case .timedOut:
                action = look(&check, at: context.clock.now)
            }
            if let outcome = act(on: action, operation, &check, context) { return outcome }
        }
    }

    /// The stream error a state other than running stands for; nil while it runs.
    static func stateError(_ state: snd_pcm_state_t) -> Int32? {
        switch state {
        case SND_PCM_STATE_RUNNING: nil
        case SND_PCM_STATE_XRUN: -EPIPE
        case SND_PCM_STATE_SUSPENDED: -ESTRPIPE
        case SND_PCM_STATE_DISCONNECTED: -ENODEV
        default: -EBADFD
        }
    }
}

extension RingLoopPlayback {
    /// Acts on what another thread asked; nil to go on playing from a new look at the stream
    /// (the request may have filled the ring again).
    private mutating func take(_ request: PlaybackRequest, _ check: inout RingLoopHealthCheck,
                               _ context: some PlaybackContext) -> PlaybackOutcome? {
        switch request {
        case .stop:
            return .stopped
        case .end(let outcome):
            return outcome
        case .writesNothing:
            return .reconfigure
        case .carry(let player, let request):
            switch context.carry(player, request, pcm: pcm, format: format, source: &source, ringLoop: true) {
            case .goOn: break
            case .failed(let code, let operation):
                // Repaired as any fault, but never taken for a ring that does not go round:
                // while carrying, the stream stops when what was written has played.
                var restarted = false
                if let outcome = context.recover(pcm, code: code, operation: operation, dryAt: nil, restarted: &restarted) { return outcome }
                if restarted, let outcome = fillAndStart(&check, context) { return outcome }
            case .outcome(let outcome): return outcome
            }
        case .reloaded(let next):
            // Refill the ring if the new signal still loops in it (a drop and a refill: a gap
            // of about a millisecond); else open again for it.
            guard next.ringFit.fits(ringFrames: format.bufferFrames) else { return .reconfigure }
            source = next
            pcm.drop()
            let result = pcm.prepare()
            if result < 0 { return context.prepareFailed(result) }
            if let outcome = fillAndStart(&check, context) { return outcome }
        }
        check.playing(position: pcm.playedPosition)
        return nil
    }

    /// Reads what the check asks for at a wakeup without an event, and tells it what it read.
    private func look(_ check: inout RingLoopHealthCheck, at now: ContinuousClock.Instant) -> RingLoopHealthCheck.Action {
        switch check.timedOut(at: now) {
        case .lookAtReplay:
            // The position first: reading it updates the state of an ioplug PCM.
            let position = pcm.playedPosition
            let stream: RingReplayCheck.Stream = switch pcm.state {
            case SND_PCM_STATE_RUNNING: .running(position: position)
            case SND_PCM_STATE_XRUN: .underrun
            default: .other
            }
            return check.replayLooked(at: now, stream)
        case .lookAtHealth:
            return check.healthLooked(at: now, Self.stateError(pcm.state).map { .failed($0) } ?? .running(position: pcm.playedPosition))
        case let other:
            return other
        }
    }

    /// Carries out the check's answer; `operation` names what found a stream error. Nil to go on.
    private mutating func act(on action: RingLoopHealthCheck.Action, _ operation: String, _ check: inout RingLoopHealthCheck,
                              _ context: some PlaybackContext) -> PlaybackOutcome? {
        switch action {
        case .none, .lookAtReplay, .lookAtHealth:
            return nil
        case .recover(let code):
            return failWhilePlaying(code, operation, &check, context)
        case .notReplayed(let reason):
            return notReplayed(reason, context)
        case .stalled(let stalledFor, let since):
            return context.lose(.stalled, "the device's position did not move for \(PlaybackLoop.format(stalledFor)) (ring loop)", since: since)
        case .played(let frames):
            // The heartbeat, and the count in `status`.
            context.report(.wrote(frames))
            return nil
        }
    }

    /// Fills the ring from the signal's first frame and starts it; nil when it plays.
    private mutating func fillAndStart(_ check: inout RingLoopHealthCheck, _ context: some PlaybackContext) -> PlaybackOutcome? {
        source.restart()
        var remaining = format.bufferFrames
        while remaining > 0 {
            let (frames, chunk) = source.peek(maximum: remaining)
            let written = pcm.write(frames, frames: chunk)
            if written == -Int(EAGAIN) { return context.lose(.unknown, "the device took less than its ring (\(format.bufferFrames - remaining) of \(format.bufferFrames) frames)") }
            if written < 0 { return fail(Int32(truncatingIfNeeded: written), "write", &check, context) }
            source.consume(written)
            remaining -= written
        }
        let result = pcm.start()
        if result < 0 { return fail(result, "start", &check, context) }
        context.report(.wrote(format.bufferFrames))
        context.flowing()
        check.filled(at: context.clock.now, position: pcm.playedPosition)
        return nil
    }

    /// Handles a stream error; nil to go on playing (the ring is filled again when the
    /// buffer was emptied).
    private mutating func fail(_ code: Int32, _ operation: String, _ check: inout RingLoopHealthCheck,
                               _ context: some PlaybackContext) -> PlaybackOutcome? {
        if case .notReplayed(let reason) = check.streamFailed(code) { return notReplayed(reason, context) }
        var restarted = false
        if let outcome = context.recover(pcm, code: code, operation: operation, dryAt: nil, restarted: &restarted) { return outcome }
        return restarted ? fillAndStart(&check, context) : nil
    }

    /// Handles a stream error found while playing; nil to go on from the position now.
    private mutating func failWhilePlaying(_ code: Int32, _ operation: String, _ check: inout RingLoopHealthCheck,
                                           _ context: some PlaybackContext) -> PlaybackOutcome? {
        if let outcome = fail(code, operation, &check, context) { return outcome }
        check.playing(position: pcm.playedPosition)
        return nil
    }

    private func notReplayed(_ reason: RingReplayCheck.Reason, _ context: some PlaybackContext) -> PlaybackOutcome {
        let ringFrames = format.bufferFrames
        switch reason {
        case .positionStopped:
            return context.ringNotReplayed(
                "the device did not replay its ring (its position stopped within the \(ringFrames) frames written): it copies audio out of its own accord; streaming instead")
        case .underrun:
            return context.ringNotReplayed(
                "the device stopped with an underrun after the \(ringFrames) frames written once, which a ring it replays never has: it copies audio out of its own accord; streaming instead")
        }
    }
}

extension RingFit {
    /// Whether a ring of `ringFrames` holds the signal without a seam.
    func fits(ringFrames: Int) -> Bool {
        switch self {
        case .multiple(let frames): frames >= 1 && ringFrames % frames == 0
        case .anyLength: true
        case .none: false
        }
    }
}
