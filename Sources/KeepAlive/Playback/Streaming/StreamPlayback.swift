import CALSA
import Glibc

/// Streams the signal: writes when the ``StreamPacer`` says the device has room, sleeps on the
/// clock in between (never on the device's descriptors, which fire every period on dmix and
/// whenever a sound server pulls audio), and looks at the descriptors without waiting after each
/// sleep for what they report (plug-ins signal a failed stream, hardware an xrun or an unplug,
/// through them). Recovers underruns and suspends in place. Nothing in here allocates once the
/// descriptors are fetched.
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
        var descriptors: [pollfd]
        do { descriptors = try pcm.pollDescriptors() } catch { return context.lose(.unknown, error.description) }
        let clock = context.clock
        let rate = Double(format.sampleRate)
        let buffer = format.bufferFrames
        var pacer = StreamPacer(format: format, at: clock.now)
        var stalls = StallDetector(window: StallDetector.window(threshold: pacer.threshold, rate: format.sampleRate), at: clock.now)
        /// When the queued audio runs out if nothing more is written: the start of the silence an
        /// underrun reports (the process may have been stopped long after the buffer ran dry).
        var drainsAt = clock.now

        /// Handles a stream error; nil to go on playing.
        func fail(_ code: Int32, _ operation: String) -> PlaybackOutcome? {
            let now = clock.now
            var restarted = false
            if let outcome = context.recover(pcm, code: code, operation: operation, dryAt: drainsAt < now ? drainsAt : nil, restarted: &restarted) {
                return outcome
            }
            // A prepared buffer is empty: the signal starts again at its first frame.
            if restarted { source.restart() }
            pacer.restart(at: clock.now)
            stalls.restart(at: clock.now)
            return nil
        }

        while true {
            switch context.pendingRequest(pcm, format) {
            case .stop: return .stopped
            case .end(let outcome): return outcome
            // Open-only now: the device is opened again for it.
            case .writesNothing: return .reconfigure
            // A reload: the new signal continues where the queued audio ends, on the same open
            // stream, without a gap.
            case .reloaded(let next): source = next
            case .carry(let player, let request):
                switch context.carry(player, request, pcm: pcm, format: format, source: &source, ringLoop: false) {
                case .playerGone, .switchFormat: break
                case .failed(let code, let operation): if let outcome = fail(code, operation) { return outcome }
                case .outcome(let outcome): return outcome
                }
                pacer.restart(at: clock.now)
                stalls.restart(at: clock.now)
            case nil: break
            }
            let available = pcm.available()
            if available < 0 {
                if let outcome = fail(Int32(truncatingIfNeeded: available), "avail") { return outcome }
                continue
            }
            let now = clock.now
            stalls.observe(available: available, bufferFrames: buffer, at: now)
            var writable = pacer.writable(available: available, at: now)
            let toppingUp = writable == 0 && available > 0 && stalls.holdsBack(at: now)
            if toppingUp { writable = pacer.heldBack(available: available) }
            if writable > 0 {
                var remaining = writable
                var total = 0
                var failure: Int32?
                // A write worth a wakeup ends there: the rest of the room is written after a
                // look at the device, without a sleep. So a stream whose loop is one write long
                // (a sound server's) starts each write at the loop's first frame, one call.
                while remaining > 0, total < pacer.threshold {
                    let (frames, chunk) = source.peek(maximum: remaining)
                    let written = pcm.write(frames, frames: chunk)
                    if written == -Int(EAGAIN) { break }
                    if written < 0 {
                        failure = Int32(truncatingIfNeeded: written)
                        break
                    }
                    source.consume(written)
                    remaining -= written
                    total += written
                }
                if total > 0 { context.report(.wrote(total)) }
                if let failure {
                    if let outcome = fail(failure, "write") { return outcome }
                    continue
                }
                if total > 0 {
                    let after = clock.now
                    var left = available - total
                    var reread: Int?
                    if pacer.checksNextWrite {
                        let now = pcm.available()
                        if now >= 0 { reread = now; left = now }
                    }
                    if pacer.wrote(total, availableBefore: available, availableAfter: reread) {
                        context.report(.notice("device takes audio faster than real time; pacing writes to the clock"))
                    }
                    if toppingUp { stalls.toppedUp(availableAfter: left) } else { stalls.wrote(availableAfter: left, at: after) }
                    // Timed from the look before the write, not from `after`: a process stopped
                    // between its write and a later clock read (SIGSTOP, a frozen cgroup) would
                    // date the audio it queued from its resume, and the underrun that followed
                    // would report no silence at all.
                    drainsAt = now + .seconds(Double(buffer - left) / rate)
                    if pcm.state == SND_PCM_STATE_PREPARED { _ = pcm.start() }
                    context.flowing()
                    continue
                }
                // Room reported but nothing taken (EAGAIN): look again after a sleep.
            }
            if let since = stalls.stalled(at: now) {
                return context.lose(.stalled, "no playback progress for \(PlaybackLoop.format(since.duration(to: now))) (device or server stalled)", since: since)
            }
            let due = min(pacer.nextCheck(available: available, at: now), now + stalls.remaining(at: now))
            switch context.doorbell.wait(until: due, orReadable: context.watcherDescriptor) {
            case .stopped, .timedOut, .rung:
                break
            case .readable:
                // A sound server's socket created again while this stream plays: the server
                // restarted under it.
                if let outcome = context.sawWhilePlaying() { return outcome }
            }
            // What a poll would have reported, without waiting.
            let events = descriptors.withUnsafeMutableBufferPointer { fds -> Int32 in
                pcm.refreshPollDescriptors(fds.baseAddress!, count: fds.count)
                for index in fds.indices { fds[index].revents = 0 }
                _ = poll(fds.baseAddress, nfds_t(fds.count), 0)
                return pcm.revents(fds.baseAddress!, count: fds.count)
            }
            if let code = pcm.streamError(fromEvents: events), let outcome = fail(code, "poll") { return outcome }
        }
    }
}
