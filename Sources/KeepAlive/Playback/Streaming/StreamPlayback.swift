import CALSA
import Glibc

/// Streams the signal: writes when the ``StreamPacer`` says the device has room, sleeps on the
/// clock in between (never on the device's descriptors, which fire every period on dmix and
/// whenever a sound server pulls audio), and looks at the descriptors without waiting after each
/// sleep for what they report (plug-ins signal a failed stream, hardware an xrun or an unplug,
/// through them). Recovers underruns and suspends in place. Nothing in here allocates once the
/// descriptors are fetched. When to write, how much, and when a device stalled is the
/// ``StreamSchedule``'s (over the pacer and the ``StallDetector``); the loop reads, writes,
/// sleeps and acts.
///
/// ```swift
/// var playback = StreamPlayback(pcm: pcm, format: format, source: source)
/// let outcome = playback.play(in: loop)
/// ```
struct StreamPlayback {
    let pcm: PCMDevice
    let format: OutputFormat
    var source: any FrameSource

    mutating func play(in context: some PlaybackContext) -> PlaybackOutcome {
        let look: PCMDescriptorLook
        do { look = try PCMDescriptorLook(pcm: pcm) } catch { return context.lose(.unknown, error.description) }
        // Every judgement is the schedule's; the loop reads the device, writes, sleeps and acts.
        var schedule = StreamSchedule(format: format, at: context.clock.now)
        while true {
            if let request = context.pendingRequest(pcm, format), let outcome = take(request, &schedule, context) { return outcome }
            let available = pcm.available()
            if available < 0 {
                if let outcome = fail(Int32(truncatingIfNeeded: available), "avail", &schedule, context) { return outcome }
                continue
            }
            if let outcome = act(on: schedule.looked(available: available, at: context.clock.now), look, &schedule, context) { return outcome }
        }
    }
}

extension StreamPlayback {
    /// Acts on what another thread asked; nil to go on playing.
    private mutating func take(_ request: PlaybackRequest, _ schedule: inout StreamSchedule,
                               _ context: some PlaybackContext) -> PlaybackOutcome? {
        switch request {
        case .stop: return .stopped
        case .end(let outcome): return outcome
        // Open-only now: the device is opened again for it.
        case .writesNothing: return .reconfigure
        // A reload: the new signal continues where the queued audio ends, on the same open
        // stream, without a gap.
        case .reloaded(let next): source = next
        case .carry(let player, let request):
            switch context.carry(player, request, pcm: pcm, format: format, source: &source, ringLoop: false) {
            case .goOn: break
            case .failed(let code, let operation): if let outcome = fail(code, operation, &schedule, context) { return outcome }
            case .outcome(let outcome): return outcome
            }
            schedule.restart(at: context.clock.now)
        }
        return nil
    }

    /// Carries out the schedule's answer; nil to go on playing.
    private mutating func act(on action: StreamSchedule.Action, _ look: PCMDescriptorLook, _ schedule: inout StreamSchedule,
                              _ context: some PlaybackContext) -> PlaybackOutcome? {
        switch action {
        case .write(let frames):
            return write(frames, look, &schedule, context)
        case .wrote(let pacedByClock):
            if pacedByClock { context.report(.notice("device takes audio faster than real time; pacing writes to the clock")) }
            if pcm.state == SND_PCM_STATE_PREPARED { _ = pcm.start() }
            context.flowing()
            return nil
        case .stalled(let stalledFor, let since):
            return context.lose(.stalled, "no playback progress for \(PlaybackLoop.format(stalledFor)) (device or server stalled)", since: since)
        case .sleep(let due):
            switch context.doorbell.wait(until: due, orReadable: context.watcherDescriptor) {
            case .stopped, .timedOut, .rung:
                break
            case .readable:
                // A sound server's socket created again while this stream plays: the server
                // restarted under it.
                if let outcome = context.sawWhilePlaying() { return outcome }
            }
            // What a poll would have reported, without waiting.
            guard let code = look.streamError() else { return nil }
            return fail(code, "poll", &schedule, context)
        }
    }

    /// Writes a burst of up to `frames` and tells the schedule; nil to go on playing.
    private mutating func write(_ frames: Int, _ look: PCMDescriptorLook, _ schedule: inout StreamSchedule,
                                _ context: some PlaybackContext) -> PlaybackOutcome? {
        let (total, failure) = writeBurst(frames, upTo: schedule.threshold)
        if total > 0 { context.report(.wrote(total)) }
        if let failure { return fail(failure, "write", &schedule, context) }
        guard total > 0 else { return act(on: schedule.tookNothing(), look, &schedule, context) }
        let after = context.clock.now
        let availableAfter = schedule.checksAfterWrite ? pcm.available() : nil
        return act(on: schedule.wrote(total, availableAfter: availableAfter, at: after), look, &schedule, context)
    }

    /// Writes up to `frames` from the signal: the frames written, and the error that ended the
    /// burst, if one did (EAGAIN ends it without one).
    private mutating func writeBurst(_ frames: Int, upTo threshold: Int) -> (written: Int, failure: Int32?) {
        var remaining = frames
        var total = 0
        // A write worth a wakeup ends there: the rest of the room is written after a
        // look at the device, without a sleep. So a stream whose loop is one write long
        // (a sound server's) starts each write at the loop's first frame, one call.
        while remaining > 0, total < threshold {
            let (pointer, chunk) = source.peek(maximum: remaining)
            let written = pcm.write(pointer, frames: chunk)
            if written == -Int(EAGAIN) { break }
            if written < 0 { return (total, Int32(truncatingIfNeeded: written)) }
            source.consume(written)
            remaining -= written
            total += written
        }
        return (total, nil)
    }

    /// Handles a stream error; nil to go on playing.
    private mutating func fail(_ code: Int32, _ operation: String, _ schedule: inout StreamSchedule,
                               _ context: some PlaybackContext) -> PlaybackOutcome? {
        var restarted = false
        let dryAt = schedule.dryAt(before: context.clock.now)
        if let outcome = context.recover(pcm, code: code, operation: operation, dryAt: dryAt, restarted: &restarted) {
            return outcome
        }
        // A prepared buffer is empty: the signal starts again at its first frame.
        if restarted { source.restart() }
        schedule.restart(at: context.clock.now)
        return nil
    }
}
