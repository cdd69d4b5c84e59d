import CALSA
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a playback thread tells its manager. Sent from the playback thread; the receiver must
/// not block.
enum PlaybackReport: Sendable {
    case state(KeepAliveState)
    case opened(OutputFormat)
    case fault(InterruptionReason, String)
    case recovered(InterruptionReason, Duration)
    case wrote(Int)
    case notice(String)
}

/// One output's playback thread: open, play, recover, reopen, until stopped.
///
/// Concurrency: everything but `stopSignal` and `thread` is confined to the playback thread once
/// it runs. `stopSignal` is thread-safe. `thread` is written by `start()` and read by `join()`,
/// both called by the owning manager under its lifecycle lock.
final class PlaybackLoop: @unchecked Sendable {
    let device: String
    private let configuration: KeepAliveConfiguration
    private let report: @Sendable (PlaybackReport) -> Void
    private let stopSignal = StopSignal()
    private var thread: pthread_t?
    private let clock = ContinuousClock()

    /// Real devices drift from the system clock by parts per million; a non-pacing device (null,
    /// file) is held to real time plus this margin and one buffer.
    private static let pacingTolerance = 1.002

    init(device: String, configuration: KeepAliveConfiguration, report: @escaping @Sendable (PlaybackReport) -> Void) {
        self.device = device
        self.configuration = configuration
        self.report = report
    }

    func start() {
        precondition(thread == nil, "playback loop started twice")
        let context = Unmanaged.passRetained(self).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { context in
            let loop = Unmanaged<PlaybackLoop>.fromOpaque(context!).takeRetainedValue()
            // Signals belong to the service's own handlers; this thread only ever waits in poll,
            // and a signal landing here would just turn that wait into EINTR.
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            calsa_name_current_thread("keepalive-play")
            loop.run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<PlaybackLoop>.fromOpaque(context).release()
            report(.fault(.unknown, "cannot start playback thread: errno \(result)"))
            return
        }
        thread = handle
    }

    /// Asks the thread to stop and waits for it: the stream is dropped, never drained.
    func stopAndJoin() {
        stopSignal.raise()
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    // MARK: - The playback thread

    private enum Outcome {
        case stopped
        case lost(InterruptionReason, String)
    }

    private struct Outage {
        var reason: InterruptionReason
        var since: ContinuousClock.Instant
    }

    private var state: KeepAliveState = .starting
    private var outage: Outage?
    private var playingSince: ContinuousClock.Instant?
    private var backoff = Backoff(policy: RetryPolicy(), seed: 1)

    private func transition(_ next: KeepAliveState) {
        guard next != state else { return }
        state = next
        report(.state(next))
    }

    private func begin(_ reason: InterruptionReason, _ message: String) {
        if outage == nil { outage = Outage(reason: reason, since: clock.now) }
        if let since = playingSince, since.duration(to: clock.now) >= configuration.retry.stablePeriod {
            backoff.reset()
        }
        playingSince = nil
        report(.fault(reason, message))
    }

    private func run() {
        backoff = Backoff(policy: configuration.retry, seed: UInt64(truncatingIfNeeded: Int(bitPattern: Unmanaged.passUnretained(self).toOpaque())) ^ 0x9E37_79B9_7F4A_7C15)
        report(.state(.starting))
        var loop: RenderedLoop?
        var loopFormat: OutputFormat?
        while !stopSignal.isRaised {
            let pcm: PCMDevice
            let format: OutputFormat
            do {
                pcm = try PCMDevice(name: device)
                format = try pcm.configure(
                    preferred: SampleFormat(closestTo: configuration.clip.encoding),
                    rate: configuration.clip.sampleRate, channels: configuration.clip.channels,
                    bufferMicroseconds: configuration.bufferMicroseconds, periods: configuration.periodsPerBuffer)
            } catch {
                let reason = InterruptionReason(openError: error.code)
                begin(reason, error.description)
                transition(.waitingForDevice(reason))
                if stopSignal.wait(backoff.next()) { break }
                continue
            }
            if loop == nil || loopFormat != format {
                loop = RenderedLoop(
                    clip: configuration.clip, format: format, gain: configuration.volume,
                    ceiling: configuration.ceiling, minimumFrames: format.periodFrames)
                loopFormat = format
            }
            report(.opened(format))
            switch play(pcm, format, loop!) {
            case .stopped:
                break
            case .lost(let reason, let message):
                begin(reason, message)
                transition(.recovering(reason))
                if stopSignal.wait(backoff.next()) { break }
            }
        }
        transition(.stopped)
    }

    /// Plays until stopped or until the device is lost. Recovers underruns and suspends in place.
    /// Nothing in here allocates once the descriptors are fetched.
    private func play(_ pcm: PCMDevice, _ format: OutputFormat, _ loop: RenderedLoop) -> Outcome {
        let pcmDescriptors: [pollfd]
        do { pcmDescriptors = try pcm.pollDescriptors() } catch { return .lost(.unknown, error.description) }
        var descriptors = pcmDescriptors
        descriptors.append(pollfd(fd: stopSignal.descriptor, events: Int16(POLLIN), revents: 0))
        let pcmCount = pcmDescriptors.count
        let rate = Double(format.sampleRate)
        let period = format.periodFrames
        let buffer = format.bufferFrames
        let periodSeconds = Double(period) / rate
        // Silent stall: no progress for the time a period takes to drain plus two more.
        let stallWindow = Duration.seconds(periodSeconds * 3)

        var position = 0
        var pacingEpoch = clock.now
        var pacedFrames = 0
        var lastAvailable = -1
        var lastProgress = clock.now
        var announcedPacing = false

        func restartPacing() {
            pacingEpoch = clock.now
            pacedFrames = 0
            lastAvailable = -1
            lastProgress = clock.now
        }

        while true {
            if stopSignal.isRaised {
                pcm.drop()
                return .stopped
            }
            let available = pcm.available()
            if available < 0 {
                if let lost = recoverInPlace(pcm, Int32(available), operation: "avail") { return lost }
                restartPacing()
                continue
            }
            let now = clock.now
            if available > lastAvailable || available >= buffer { lastProgress = now }
            lastAvailable = available
            let budget = Int(pacingEpoch.duration(to: now).seconds * rate * Self.pacingTolerance) + buffer - pacedFrames
            let writable = min(available, budget)

            if writable >= period {
                var remaining = writable
                var total = 0
                while remaining > 0 {
                    let chunk = min(remaining, loop.frameCount - position)
                    let written = pcm.write(loop.frames(from: position), frames: chunk)
                    if written == -Int(EAGAIN) { break }
                    if written < 0 {
                        if let lost = recoverInPlace(pcm, Int32(written), operation: "write") { return lost }
                        restartPacing()
                        break
                    }
                    position = (position + written) % loop.frameCount
                    remaining -= written
                    total += written
                }
                guard total > 0 else { continue }
                pacedFrames += total
                lastProgress = clock.now
                lastAvailable = available - total
                report(.wrote(total))
                if pcm.state == SND_PCM_STATE_PREPARED { _ = pcm.start() }
                if let outage {
                    report(.recovered(outage.reason, outage.since.duration(to: clock.now)))
                    self.outage = nil
                }
                if state != .playing {
                    playingSince = clock.now
                    transition(.playing)
                }
                continue
            }

            if available >= period {
                // The device has room but real time has not caught up: it consumes faster than
                // it plays (null, file). Sleep on the stop signal alone until the budget allows a
                // period, instead of spinning on descriptors that are always ready.
                // A sound server may swallow more than a buffer while it starts; only a device
                // that still outruns the clock after two buffers' time is a non-pacing one.
                if !announcedPacing, pacingEpoch.duration(to: now) > configuration.bufferDuration * 2 {
                    announcedPacing = true
                    report(.notice("device takes audio faster than real time; pacing writes to the clock"))
                }
                let missing = Double(period - writable) / (rate * Self.pacingTolerance)
                if stopSignal.wait(.seconds(missing)) { continue }
                continue
            }

            if lastProgress.duration(to: now) > stallWindow {
                return .lost(.stalled, "no playback progress for \(lastProgress.duration(to: now)) (device or server stalled)")
            }
            let untilStall = stallWindow - lastProgress.duration(to: now)
            let ready = descriptors.withUnsafeMutableBufferPointer { fds -> Int32 in
                for index in fds.indices { fds[index].revents = 0 }
                return poll(fds.baseAddress, nfds_t(fds.count), Int32(clamping: untilStall.milliseconds))
            }
            if ready < 0 {
                if errno == EINTR { continue }
                return .lost(.unknown, "poll: \(String(cString: strerror(errno)))")
            }
            if ready == 0 { continue }
            if descriptors[pcmCount].revents != 0 { continue }
            let events = descriptors.withUnsafeMutableBufferPointer { pcm.revents($0.baseAddress!, count: pcmCount) }
            if events < 0 {
                if let lost = recoverInPlace(pcm, events, operation: "poll") { return lost }
                restartPacing()
                continue
            }
            if events & Int32(POLLERR | POLLHUP | POLLNVAL) != 0 {
                let code: Int32
                switch pcm.state {
                case SND_PCM_STATE_XRUN: code = -EPIPE
                case SND_PCM_STATE_SUSPENDED: code = -ESTRPIPE
                case SND_PCM_STATE_DISCONNECTED: code = -ENODEV
                default: code = events & Int32(POLLHUP) != 0 ? -ENOTCONN : -EIO
                }
                if let lost = recoverInPlace(pcm, code, operation: "poll") { return lost }
                restartPacing()
            }
        }
    }

    /// Handles a stream error: underruns and suspends are recovered on the open handle; anything
    /// else means the device must be closed and opened again (returned as `.lost`).
    private func recoverInPlace(_ pcm: PCMDevice, _ code: Int32, operation: String) -> Outcome? {
        let error = ALSAError(code: code, operation: operation)
        let reason = InterruptionReason(streamError: code)
        switch reason {
        case .underrun:
            begin(.underrun, error.description)
            transition(.recovering(.underrun))
            let result = pcm.recover(code)
            if result < 0 { return .lost(InterruptionReason(streamError: result), ALSAError(code: result, operation: "recover").description) }
            return nil
        case .suspended:
            begin(.suspended, error.description)
            transition(.recovering(.suspended))
            var result = pcm.resume()
            var attempts = 0
            // A device still waking answers EAGAIN; give it a moment, never a busy loop.
            while result == -EAGAIN, attempts < 100, !stopSignal.isRaised {
                _ = stopSignal.wait(.milliseconds(10))
                attempts += 1
                result = pcm.resume()
            }
            if result < 0 { result = pcm.prepare() }
            if result < 0 { return .lost(InterruptionReason(streamError: result), ALSAError(code: result, operation: "prepare").description) }
            return nil
        default:
            return .lost(reason, error.description)
        }
    }
}
