import CALSA
import Logging
import Synchronization
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
    /// The configuration in force, confined to the playback thread once it runs; ``apply(_:)``
    /// hands it a new one through `pending`.
    private var configuration: KeepAliveConfiguration
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

    /// A configuration handed over by ``apply(_:)``, taken by the playback thread between two
    /// writes: the stream stays open and the new loop follows the old one without a gap.
    private let pending = Locked<KeepAliveConfiguration?>(nil)
    /// Bumped by ``apply(_:)``: the playback thread checks this counter, not the lock, each time
    /// round its loop.
    private let pendingGeneration = Atomic<Int>(0)

    /// Hands a new clip, level or ceiling to the running thread (see `KeepAliveManager.reconfigure`).
    /// Buffer settings take effect at the next open.
    func apply(_ configuration: KeepAliveConfiguration) {
        pending.withLock { $0 = configuration }
        pendingGeneration.add(1, ordering: .releasing)
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
        /// The device must be closed and opened again. `since` is when playback really stopped,
        /// when that was before the fault was seen (a stall); nil means now.
        case lost(InterruptionReason, String, since: ContinuousClock.Instant? = nil)
    }

    /// What an in-place recovery achieved.
    private enum InPlace {
        /// The stream continues with what its buffer held (resumed after a suspend).
        case resumed
        /// The buffer was emptied (prepared): the loop restarts from its first frame.
        case prepared
        /// In-place recovery is not possible or did not work: reopen.
        case lost(Outcome)
    }

    private struct Outage {
        var reason: InterruptionReason
        var since: ContinuousClock.Instant
    }

    private var state: KeepAliveState = .starting
    private var outage: Outage?
    private var playingSince: ContinuousClock.Instant?
    private var backoff = Backoff(policy: RetryPolicy(), seed: 1)
    /// Notices cards and sound servers appearing; made when the thread starts.
    private var watcher: DeviceWatcher?
    /// A sound server's socket appeared since the last attempt to open: try again at once.
    private var serverAppeared = false
    /// A sound server's socket appeared while the device played, before the current outage;
    /// it explains the outage only if the stream cannot be recovered in place.
    private var serverReplacedWhilePlaying = false
    /// Whether the next successful open is worth an `opened` report: the first one, and the first
    /// after the output played. A device that opens but fails at once is announced once, not on
    /// every retry.
    private var announceNextOpen = true

    private func transition(_ next: KeepAliveState) {
        guard next != state else { return }
        state = next
        report(.state(next))
    }

    /// Records a fault. The first fault of an outage starts its clock (at `since`, or now) and,
    /// after a stable period of playback, resets the backoff; later faults of the same outage only
    /// sharpen its reason (see ``InterruptionReason/specificity``).
    private func begin(_ reason: InterruptionReason, _ message: String, since: ContinuousClock.Instant? = nil) {
        let now = clock.now
        if var current = outage {
            if reason.specificity > current.reason.specificity {
                current.reason = reason
                outage = current
            }
        } else {
            outage = Outage(reason: reason, since: since ?? now)
            if let playingSince, playingSince.duration(to: now) >= configuration.retry.stablePeriod {
                backoff.reset()
            }
            // A server socket created since the device was opened: the server behind it may have
            // been replaced while this stream played (a plug-in may only notice at its next period).
            serverReplacedWhilePlaying = watcher?.take().contains(.server) ?? false
        }
        playingSince = nil
        report(.fault(reason, message))
    }

    private func run() {
        backoff = Backoff(policy: configuration.retry, seed: UInt64(truncatingIfNeeded: Int(bitPattern: Unmanaged.passUnretained(self).toOpaque())) ^ 0x9E37_79B9_7F4A_7C15)
        let watcher = DeviceWatcher()
        self.watcher = watcher
        defer { self.watcher = nil }
        report(.state(.starting))
        attempts: while !stopSignal.isRaised {
            takePendingConfiguration()
            // Only what happens from now on may cut the next wait short.
            notice(watcher.take())
            serverAppeared = false
            let pcm: PCMDevice
            do {
                pcm = try PCMDevice(name: device)
            } catch {
                if waitAfterFailedOpen(error, watcher) { break attempts }
                continue attempts
            }
            let format: OutputFormat
            do {
                // The clip is asked for in its own format; generated signals in the format most
                // digital receivers run at natively (48 kHz stereo), to spare them a conversion.
                let clipSignal = configuration.signal == .clip
                format = try pcm.configure(
                    preferred: clipSignal ? SampleFormat(closestTo: configuration.clip.encoding) : .s16,
                    rate: clipSignal ? configuration.clip.sampleRate : 48000,
                    channels: clipSignal ? configuration.clip.channels : 2,
                    bufferMicroseconds: configuration.bufferMicroseconds, periods: configuration.periodsPerBuffer)
            } catch {
                pcm.close()
                if waitAfterFailedOpen(error, watcher) { break attempts }
                continue attempts
            }
            if !rendered || renderedFormat != format {
                announceNextOpen = announceNextOpen || renderedFormat != nil
                do {
                    try render(for: format)
                } catch {
                    // The device's rate cannot carry the signal (a sine at or above half of it):
                    // a setting to change, not a fault to retry quickly.
                    pcm.close()
                    begin(.unknown, "\(error)")
                    transition(.waitingForDevice(.unknown))
                    if stopSignal.wait(configuration.retry.maximumDelay) { break attempts }
                    continue attempts
                }
            }
            if announceNextOpen {
                announceNextOpen = false
                report(.opened(format))
            }
            let outcome = play(pcm, format)
            // Closed before any wait: the retry opens a fresh handle, and a hardware device is
            // free for others meanwhile.
            pcm.close()
            switch outcome {
            case .stopped:
                break attempts
            case .lost(let reason, let message, let since):
                begin(reason, message, since: since)
                if serverReplacedWhilePlaying {
                    serverReplacedWhilePlaying = false
                    notice(.server)
                }
                transition(.recovering(outage?.reason ?? reason))
                if waitForRetry(watcher) { break attempts }
            }
        }
        transition(.stopped)
    }

    /// The frames for the current configuration and the device's format; nil with `rendered`
    /// set means open-only (hold the device, write nothing).
    private var source: (any FrameSource)?
    private var rendered = false
    private var renderedFormat: OutputFormat?
    private var seenGeneration = 0

    /// Renders the current configuration's loop for `format`: once per open with a new format or
    /// per reload, never while playing steadily.
    private func render(for format: OutputFormat) throws(KeepAliveSignalError) {
        source = try makeFrameSource(
            signal: configuration.signal, clip: configuration.clip, format: format, volume: configuration.volume,
            ceiling: configuration.ceiling, schedule: configuration.schedule, seed: configuration.seed)
        rendered = true
        renderedFormat = format
    }

    /// Takes a configuration handed over by ``apply(_:)``; true if there was one.
    @discardableResult
    private func takePendingConfiguration() -> Bool {
        let generation = pendingGeneration.load(ordering: .acquiring)
        guard generation != seenGeneration else { return false }
        seenGeneration = generation
        guard let next = pending.withLock({ $0.take() }) else { return false }
        configuration = next
        backoff = Backoff(policy: next.retry, seed: UInt64(truncatingIfNeeded: generation) &+ 0x9E37_79B9_7F4A_7C15)
        rendered = false
        return true
    }

    /// Reports a failed open (or configure) once per state and waits for the next attempt.
    /// Returns true when stopped.
    private func waitAfterFailedOpen(_ error: ALSAError, _ watcher: DeviceWatcher) -> Bool {
        let reason = InterruptionReason(openError: error.code)
        begin(reason, error.description)
        // An unplugged device or a vanished server's socket is missing until it comes back; say
        // what happened rather than the symptom.
        var shown = reason
        if reason == .noDevice, let current = outage?.reason, current == .unplugged || current == .serverGone { shown = current }
        transition(.waitingForDevice(shown))
        return waitForRetry(watcher)
    }

    /// Sleeps the next backoff delay. A card or a sound server appearing (see ``DeviceWatcher``)
    /// ends the wait early. Returns true when stopped.
    private func waitForRetry(_ watcher: DeviceWatcher) -> Bool {
        if serverAppeared {
            // The server is back already: no backoff step, just let it settle.
            serverAppeared = false
            return stopSignal.wait(.milliseconds(10))
        }
        let deadline = clock.now + backoff.next()
        while true {
            let remaining = clock.now.duration(to: deadline)
            if remaining <= .zero { return stopSignal.isRaised }
            switch stopSignal.wait(remaining, orReadable: watcher.descriptor) {
            case .stopped:
                return true
            case .timedOut:
                continue
            case .readable:
                let seen = watcher.take()
                notice(seen)
                if !seen.isEmpty {
                    // Give udev a moment to finish the node's permissions, then try.
                    return stopSignal.wait(.milliseconds(10))
                }
            }
        }
    }

    /// A sound server's socket (re)created since the device was opened shows the server
    /// restarted: the outage is `server-gone` even if the stream only reported an underrun and
    /// the reopen works at once (PipeWire restarts in about 100 ms), and the next attempt comes
    /// without waiting.
    private func notice(_ seen: DeviceWatcher.Seen) {
        guard seen.contains(.server), var current = outage else { return }
        serverAppeared = true
        guard InterruptionReason.serverGone.specificity > current.reason.specificity else { return }
        current.reason = .serverGone
        outage = current
    }

    /// Plays until stopped or until the device is lost. Recovers underruns and suspends in place.
    /// Nothing in here allocates once the descriptors are fetched.
    private func play(_ pcm: PCMDevice, _ format: OutputFormat) -> Outcome {
        guard rendered else { return .lost(.unknown, "no frames rendered") }
        guard var source else { return holdOpen(pcm, format) }
        let pcmDescriptors: [pollfd]
        do { pcmDescriptors = try pcm.pollDescriptors() } catch { return .lost(.unknown, error.description) }
        var descriptors = pcmDescriptors
        descriptors.append(pollfd(fd: stopSignal.descriptor, events: Int16(POLLIN), revents: 0))
        let watcherSlot = (watcher?.descriptor ?? -1) >= 0 ? descriptors.count : -1
        if watcherSlot >= 0 { descriptors.append(pollfd(fd: watcher!.descriptor, events: Int16(POLLIN), revents: 0)) }
        let pcmCount = pcmDescriptors.count
        let rate = Double(format.sampleRate)
        let period = format.periodFrames
        let buffer = format.bufferFrames
        let periodSeconds = Double(period) / rate
        // Silent stall (a sound server that died without a word, a wedged driver): the device
        // position has not moved for the period it should take to make room, plus two more.
        let stallWindow = Duration.seconds(periodSeconds * 3)

        var pacingEpoch = clock.now
        var pacedFrames = 0
        var lastAvailable = -1
        var lastProgress = clock.now
        var announcedPacing = false
        /// In-place recoveries since audio last got through; a second one means they do not work.
        var faultsSinceWrite = 0
        /// When the queued audio runs out if nothing more is written: the start of the silence
        /// an underrun reports (the process may have been stopped long after the buffer ran dry).
        var drainsAt = clock.now

        func restartPacing() {
            pacingEpoch = clock.now
            pacedFrames = 0
            lastAvailable = -1
            lastProgress = clock.now
        }

        /// Handles a stream error; nil to go on playing.
        func handle(_ code: Int32, _ operation: String) -> Outcome? {
            let dry = drainsAt < clock.now ? drainsAt : nil
            switch recoverInPlace(pcm, code, operation: operation, faultsSinceWrite: &faultsSinceWrite, dryAt: dry) {
            case .lost(let outcome):
                return outcome
            case .prepared:
                // A clean buffer: the loop restarts at its first frame, nothing stale is queued.
                source.restart()
                restartPacing()
                return nil
            case .resumed:
                restartPacing()
                return nil
            }
        }

        /// Acts on what the descriptors' revents said; nil to go on playing.
        func check(_ events: Int32) -> Outcome? {
            if events < 0 { return handle(events, "poll") }
            guard events & Int32(POLLERR | POLLHUP | POLLNVAL) != 0 else { return nil }
            let code: Int32
            switch pcm.state {
            case SND_PCM_STATE_XRUN: code = -EPIPE
            case SND_PCM_STATE_SUSPENDED: code = -ESTRPIPE
            case SND_PCM_STATE_DISCONNECTED: code = -ENODEV
            case SND_PCM_STATE_OPEN, SND_PCM_STATE_SETUP: code = -EBADFD
            default: code = events & Int32(POLLHUP) != 0 ? -ENOTCONN : -EIO
            }
            return handle(code, "poll")
        }

        while true {
            if stopSignal.isRaised {
                pcm.drop()
                return .stopped
            }
            if pendingGeneration.load(ordering: .relaxed) != seenGeneration, takePendingConfiguration() {
                // A reload: the new loop continues where the queued audio ends, on the same open
                // stream. Rendering allocates here, once, never in the steady state.
                do {
                    try render(for: format)
                } catch {
                    return .lost(.unknown, "\(error)")
                }
                guard let next = self.source else { return holdOpen(pcm, format) }
                source = next
            }
            let available = pcm.available()
            if available < 0 {
                if let lost = handle(Int32(truncatingIfNeeded: available), "avail") { return lost }
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
                var faulted = false
                while remaining > 0 {
                    let (frames, chunk) = source.peek(maximum: remaining)
                    let written = pcm.write(frames, frames: chunk)
                    if written == -Int(EAGAIN) { break }
                    if written < 0 {
                        if let lost = handle(Int32(truncatingIfNeeded: written), "write") { return lost }
                        faulted = true
                        break
                    }
                    source.consume(written)
                    remaining -= written
                    total += written
                }
                if total > 0 { report(.wrote(total)) }
                if faulted { continue }
                if total > 0 {
                    pacedFrames += total
                    lastProgress = clock.now
                    lastAvailable = available - total
                    drainsAt = lastProgress + .seconds(Double(buffer - lastAvailable) / rate)
                    faultsSinceWrite = 0
                    if pcm.state == SND_PCM_STATE_PREPARED { _ = pcm.start() }
                    if let outage {
                        report(.recovered(outage.reason, outage.since.duration(to: clock.now)))
                        self.outage = nil
                        serverReplacedWhilePlaying = false
                    }
                    if state != .playing {
                        playingSince = clock.now
                        announceNextOpen = true
                        transition(.playing)
                    }
                    continue
                }
                // Room reported but nothing taken (EAGAIN): wait on the descriptors below.
            }

            let stalledFor = lastProgress.duration(to: now)
            if stalledFor > stallWindow {
                return .lost(.stalled, "no playback progress for \(Self.format(stalledFor)) (device or server stalled)", since: lastProgress)
            }
            if budget < period {
                // By the clock the device cannot have a period free yet. Sleep on the clock, not
                // on the device's descriptors: one wakeup per period whatever they do (a sound
                // server's fire whenever it pulls audio; null's and file's are always ready).
                if available >= period, !announcedPacing, pacingEpoch.duration(to: now) > configuration.bufferDuration * 2 {
                    // A sound server may swallow more than a buffer while it starts; only a
                    // device that still outruns the clock after two buffers' time does not pace.
                    announcedPacing = true
                    report(.notice("device takes audio faster than real time; pacing writes to the clock"))
                }
                // When real time (not the tolerant budget) makes a period free, plus a little, so
                // that a device on time has the room when we look and needs no second wakeup.
                let due = Duration.seconds(Double(pacedFrames + period - buffer) / rate - pacingEpoch.duration(to: now).seconds) + .milliseconds(2)
                switch stopSignal.wait(due, orReadable: watcher?.descriptor ?? -1) {
                case .stopped, .timedOut:
                    break
                case .readable:
                    if watcher?.take().contains(.server) == true {
                        return .lost(.serverGone, "the sound server's socket was created again (server restarted)")
                    }
                }
                // What a poll would have reported, without waiting: plug-ins signal errors and
                // hang-ups through revents (pulse: stream failed; hardware: xrun, unplugged).
                let events = descriptors.withUnsafeMutableBufferPointer { fds -> Int32 in
                    pcm.refreshPollDescriptors(fds.baseAddress!, count: pcmCount)
                    for index in fds.indices { fds[index].revents = 0 }
                    _ = poll(fds.baseAddress, nfds_t(pcmCount), 0)
                    return pcm.revents(fds.baseAddress!, count: pcmCount)
                }
                if let lost = check(events) { return lost }
                continue
            }
            let ready = descriptors.withUnsafeMutableBufferPointer { fds -> Int32 in
                // As snd_pcm_wait does: some plug-ins (pipewire) re-arm or clear their event
                // descriptor here, and without it poll returns at once with nothing to do.
                pcm.refreshPollDescriptors(fds.baseAddress!, count: pcmCount)
                for index in fds.indices { fds[index].revents = 0 }
                return poll(fds.baseAddress, nfds_t(fds.count), Int32(clamping: (stallWindow - stalledFor).milliseconds))
            }
            if ready < 0 {
                if errno == EINTR { continue }
                return .lost(.unknown, "poll: \(String(cString: strerror(errno)))")
            }
            if ready == 0 { continue }
            if descriptors[pcmCount].revents != 0 { continue }
            if watcherSlot >= 0, descriptors[watcherSlot].revents != 0, watcher?.take().contains(.server) == true {
                // A sound server's socket created again while this stream plays: the server
                // restarted under it. Reopen now rather than when its plug-in notices (up to a
                // period later for pulse).
                return .lost(.serverGone, "the sound server's socket was created again (server restarted)")
            }
            let events = descriptors.withUnsafeMutableBufferPointer { pcm.revents($0.baseAddress!, count: pcmCount) }
            if let lost = check(events) { return lost }
        }
    }

    /// Open-only: the device is prepared and held, nothing is written. Some HDMI and USB sinks
    /// stay awake while a stream is merely open. Checks the device's health once a second.
    private func holdOpen(_ pcm: PCMDevice, _ format: OutputFormat) -> Outcome {
        if let outage {
            report(.recovered(outage.reason, outage.since.duration(to: clock.now)))
            self.outage = nil
        }
        if state != .playing {
            playingSince = clock.now
            announceNextOpen = true
            transition(.playing)
        }
        while true {
            switch stopSignal.wait(.seconds(1), orReadable: watcher?.descriptor ?? -1) {
            case .stopped:
                pcm.drop()
                return .stopped
            case .readable:
                if watcher?.take().contains(.server) == true {
                    return .lost(.serverGone, "the sound server's socket was created again (server restarted)")
                }
            case .timedOut:
                break
            }
            if pendingGeneration.load(ordering: .relaxed) != seenGeneration, takePendingConfiguration() {
                do { try render(for: format) } catch { return .lost(.unknown, "\(error)") }
                if source != nil { return play(pcm, format) }
            }
            switch pcm.state {
            case SND_PCM_STATE_DISCONNECTED: return .lost(.unplugged, "device disconnected while held open")
            case SND_PCM_STATE_SUSPENDED: _ = pcm.prepare()
            default: break
            }
        }
    }

    /// Handles a stream error on the open handle. An underrun is prepared away, a suspend resumed
    /// (or prepared when the device cannot resume); anything else, a recovery that fails, or a
    /// second fault before any audio got through after the first, means the device must be
    /// closed and opened again.
    /// `dryAt`: when the buffer ran out, if that is already past (reported as the start of an
    /// underrun's downtime).
    private func recoverInPlace(_ pcm: PCMDevice, _ code: Int32, operation: String, faultsSinceWrite: inout Int,
                                dryAt: ContinuousClock.Instant?) -> InPlace {
        let error = ALSAError(code: code, operation: operation)
        let reason = InterruptionReason(streamError: code)
        guard reason == .underrun || reason == .suspended else {
            return .lost(.lost(reason, error.description))
        }
        faultsSinceWrite += 1
        if faultsSinceWrite > 1 {
            return .lost(.lost(reason, "\(error.description), again right after recovering in place"))
        }
        begin(reason, error.description, since: reason == .underrun ? dryAt : nil)
        transition(.recovering(outage?.reason ?? reason))
        if reason == .underrun {
            let result = pcm.prepare()
            if result < 0 { return .lost(.lost(InterruptionReason(streamError: result), ALSAError(code: result, operation: "prepare").description)) }
            return .prepared
        }
        var result = pcm.resume()
        var attempts = 0
        // A device still waking answers EAGAIN; give it a moment, never a busy loop.
        while result == -EAGAIN, attempts < 100, !stopSignal.isRaised {
            _ = stopSignal.wait(.milliseconds(10))
            attempts += 1
            result = pcm.resume()
        }
        // Some plug-ins report success without resuming; the state tells.
        if result == 0, pcm.state == SND_PCM_STATE_SUSPENDED { result = -ENOSYS }
        if result == 0 { return .resumed }
        result = pcm.prepare()
        if result < 0 { return .lost(.lost(InterruptionReason(streamError: result), ALSAError(code: result, operation: "prepare").description)) }
        return .prepared
    }

    /// A duration for a log message, in seconds with millisecond precision.
    static func format(_ duration: Duration) -> String {
        let milliseconds = duration.milliseconds
        let fraction = milliseconds % 1000
        return "\(milliseconds / 1000).\(fraction < 10 ? "00" : fraction < 100 ? "0" : "")\(fraction)s"
    }
}
