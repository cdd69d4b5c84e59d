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
        var descriptors: [pollfd]
        let node = pollsDevice ? nil : hardware.flatMap(PCMNodeWatch.init)
        if let node {
            descriptors = [pollfd(fd: node.descriptor, events: Int16(POLLIN), revents: 0)]
        } else {
            do { descriptors = try pcm.pollDescriptors() } catch { return context.lose(.unknown, error.description) }
            // Errors only: with period interrupts off nothing else could wake the thread.
            for index in descriptors.indices { descriptors[index].events = 0 }
        }
        descriptors.append(pollfd(fd: context.doorbell.descriptor, events: Int16(POLLIN), revents: 0))
        let pcmCount = descriptors.count - 1
        let ringDuration = Duration.nanoseconds(Int64(format.bufferFrames) * 1_000_000_000 / Int64(max(format.sampleRate, 1)))
        // Every judgement is the check's; the loop sleeps, reads the device and acts.
        var check = RingLoopHealthCheck(quiet: node != nil, ringFrames: format.bufferFrames, ringDuration: ringDuration,
                                        boundary: pcm.boundary, rate: format.sampleRate)
        let ringFrames = format.bufferFrames

        func notReplayed(_ reason: RingReplayCheck.Reason) -> PlaybackOutcome {
            switch reason {
            case .positionStopped:
                context.ringNotReplayed(
                    "the device did not replay its ring (its position stopped within the \(ringFrames) frames written): it copies audio out of its own accord; streaming instead")
            case .underrun:
                context.ringNotReplayed(
                    "the device stopped with an underrun after the \(ringFrames) frames written once, which a ring it replays never has: it copies audio out of its own accord; streaming instead")
            }
        }

        /// Fills the ring from the signal's first frame and starts it; nil when it plays.
        func fillAndStart() -> PlaybackOutcome? {
            source.restart()
            var remaining = format.bufferFrames
            while remaining > 0 {
                let (frames, chunk) = source.peek(maximum: remaining)
                let written = pcm.write(frames, frames: chunk)
                if written == -Int(EAGAIN) { return context.lose(.unknown, "the device took less than its ring (\(format.bufferFrames - remaining) of \(format.bufferFrames) frames)") }
                if written < 0 { return fail(Int32(truncatingIfNeeded: written), "write") }
                source.consume(written)
                remaining -= written
            }
            let result = pcm.start()
            if result < 0 { return fail(result, "start") }
            context.report(.wrote(format.bufferFrames))
            context.flowing()
            check.filled(at: context.clock.now, position: pcm.playedPosition)
            return nil
        }

        /// Handles a stream error; nil to go on playing (the ring is filled again when the
        /// buffer was emptied).
        func fail(_ code: Int32, _ operation: String) -> PlaybackOutcome? {
            if case .notReplayed(let reason) = check.streamFailed(code) { return notReplayed(reason) }
            var restarted = false
            if let outcome = context.recover(pcm, code: code, operation: operation, dryAt: nil, restarted: &restarted) { return outcome }
            return restarted ? fillAndStart() : nil
        }

        /// Handles a stream error found while playing; nil to go on from the position now.
        func failWhilePlaying(_ code: Int32, _ operation: String) -> PlaybackOutcome? {
            if let outcome = fail(code, operation) { return outcome }
            check.playing(position: pcm.playedPosition)
            return nil
        }

        if let outcome = fillAndStart() { return outcome }
        check.playing(position: pcm.playedPosition)
        while true {
            switch context.pendingRequest(pcm, format) {
            case .stop:
                return .stopped
            case .end(let outcome):
                return outcome
            case .writesNothing:
                return .reconfigure
            case .carry(let player, let request):
                switch context.carry(player, request, pcm: pcm, format: format, source: &source, ringLoop: true) {
                case .playerGone, .switchFormat: check.playing(position: pcm.playedPosition)
                case .failed(let code, let operation):
                    // Repaired as any fault, but never taken for a ring that does not go round:
                    // while carrying, the stream stops when what was written has played.
                    var restarted = false
                    if let outcome = context.recover(pcm, code: code, operation: operation, dryAt: nil, restarted: &restarted) { return outcome }
                    if restarted, let outcome = fillAndStart() { return outcome }
                    check.playing(position: pcm.playedPosition)
                case .outcome(let outcome): return outcome
                }
                continue
            case .reloaded(let next):
                // Refill the ring if the new signal still loops in it (a drop and a refill: a gap
                // of about a millisecond); else open again for it.
                guard next.ringFit.fits(ringFrames: format.bufferFrames) else { return .reconfigure }
                source = next
                pcm.drop()
                let result = pcm.prepare()
                if result < 0 { return context.prepareFailed(result) }
                if let outcome = fillAndStart() { return outcome }
                check.playing(position: pcm.playedPosition)
                continue
            case nil:
                break
            }
            let timeout = check.sleep(from: context.clock.now)
            let ready = descriptors.withUnsafeMutableBufferPointer { fds -> Int32 in
                for index in fds.indices { fds[index].revents = 0 }
                return poll(fds.baseAddress, nfds_t(fds.count), timeout.pollTimeout)
            }
            if ready < 0 {
                if errno == EINTR { continue }
                return context.lose(.unknown, "poll: \(String(cString: strerror(errno)))")
            }
            if descriptors[pcmCount].revents != 0 {
                context.doorbell.drain()
                continue
            }
            if ready > 0, let node {
                // The card's PCM node changed: gone at an unplug. The stream's state says.
                node.drain()
                if let code = Self.stateError(pcm.state) ?? (node.exists ? nil : -ENODEV),
                   let outcome = failWhilePlaying(code, "state") { return outcome }
                continue
            }
            if ready > 0 {
                let events = descriptors.withUnsafeMutableBufferPointer { pcm.revents($0.baseAddress!, count: pcmCount) }
                if let code = pcm.streamError(fromEvents: events), let outcome = failWhilePlaying(code, "poll") { return outcome }
                continue
            }
            let now = context.clock.now
            let action: RingLoopHealthCheck.Action
            switch check.timedOut(at: now) {
            case .lookAtReplay:
                // The position first: reading it updates the state of an ioplug PCM.
                let position = pcm.playedPosition
                let stream: RingReplayCheck.Stream = switch pcm.state {
                case SND_PCM_STATE_RUNNING: .running(position: position)
                case SND_PCM_STATE_XRUN: .underrun
                default: .other
                }
                action = check.replayLooked(at: now, stream)
            case .lookAtHealth:
                action = check.healthLooked(at: now, Self.stateError(pcm.state).map { .failed($0) } ?? .running(position: pcm.playedPosition))
            case let other:
                action = other
            }
            switch action {
            case .none, .lookAtReplay, .lookAtHealth:
                continue
            case .recover(let code):
                if let outcome = failWhilePlaying(code, "state") { return outcome }
            case .notReplayed(let reason):
                return notReplayed(reason)
            case .stalled(let stalledFor, let since):
                return context.lose(.stalled, "the device's position did not move for \(PlaybackLoop.format(stalledFor)) (ring loop)", since: since)
            case .played(let frames):
                // The heartbeat, and the count in `status`.
                context.report(.wrote(frames))
            }
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

/// An inotify watch on a card device's playback node (`/dev/snd/pcmC0D3p`), which the kernel
/// unlinks when the card goes away: how a ring loop that does not sleep on the PCM itself learns
/// of an unplug at once. Made and dropped with one open, on its playback thread.
final class PCMNodeWatch {
    let descriptor: Int32
    let path: String

    /// nil when the node cannot be watched (no such node: the PCM is not a card's own).
    init?(_ hardware: HardwareDevice) {
        path = "/dev/snd/pcmC\(hardware.card)D\(hardware.device)p"
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        // IN_ATTRIB as well: while keepalived holds the node open its inode outlives the unlink,
        // so IN_DELETE_SELF comes only after the close; the unlink itself changes the link count,
        // which inotify reports as IN_ATTRIB at once (the VM's USB unplug went unseen for the 15 s
        // health check without it).
        guard inotify_add_watch(fd, path, UInt32(IN_DELETE_SELF | IN_ATTRIB)) >= 0 else {
            close(fd)
            return nil
        }
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// Whether the node is still there (a udev chmod also says IN_ATTRIB).
    var exists: Bool { access(path, F_OK) == 0 }

    /// Reads the events there are (the state, not the events, says what happened).
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 512)
        while buffer.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
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
