/// When a streaming output writes, and how much: decided from the device's own position, so that
/// no drift between the device's clock and the system's, of either sign, can starve it.
///
/// The device is written to when about half its buffer is free, in whole periods (``threshold``), and the thread
/// sleeps on the clock until the device's position, as last read, will have freed that much:
/// on a dmix device with 1024-frame periods it wakes about 6 times a second, not 47. A device
/// that is slower than the clock is simply found short and slept on a little longer; one that is
/// faster is found with more room, all of which is filled.
///
/// The system clock decides only for a device that swallows audio far faster than real time
/// (ALSA's `null` and `file`, which do not pace at all): one that frees most of a write at once,
/// within the microseconds between the write and the next look, is held to real time plus
/// ``tolerance`` and one buffer from then on. A real device, or a sound server, frees nothing in
/// that time.
///
/// ```swift
/// var pacer = StreamPacer(format: format, at: now)
/// let frames = pacer.writable(available: pcm.available(), at: now)   // 0: sleep until pacer.nextCheck
/// ```
struct StreamPacer {
    let rate: Double
    let bufferFrames: Int
    /// Free frames that make a write worth a wakeup: half the buffer rounded up to whole
    /// periods, at least one. A sound server grants room a period at a time, and ALSA's pulse
    /// plug-in wants at least three: with half of three periods the first look found one period
    /// free and the thread slept again until the second came, two wakeups per write. Never more
    /// than leaves two periods queued by the device's own count (``threshold(for:)``). Lowered
    /// for a device that holds back (``heldBack(available:)``).
    private(set) var threshold: Int
    private let periodFrames: Int
    /// A device that does not pace is held to real time plus this margin and one buffer.
    static let tolerance = 1.002

    /// Whether the device was found not to pace itself, so the clock paces it.
    private(set) var pacedByClock = false
    private var epoch: ContinuousClock.Instant
    /// Frames written since `epoch`.
    private var written = 0
    /// Writes since the stream (re)started; only the first few are checked for a device that
    /// does not pace.
    private var writesSinceStart = 0
    private static let writesChecked = 4

    init(format: OutputFormat, at now: ContinuousClock.Instant) {
        rate = Double(format.sampleRate)
        bufferFrames = format.bufferFrames
        periodFrames = max(format.periodFrames, 1)
        threshold = Self.threshold(for: format)
        epoch = now
    }

    /// The ``threshold`` of a pacer for `format`: what one write to it is.
    ///
    /// At most the buffer less two periods (at least one period): a device's room lags what it
    /// played by up to a period. A sound server grants room a period at a time (pipewire-pulse:
    /// once a whole `minreq`, the period, is missing, at the end of a graph cycle), so up to a
    /// period it has played may not show as room yet; a write that waits for two of three
    /// periods can find the server holding nothing. On a 6 s sink (three periods of 2 s) a look
    /// just before the second period's grant slept another period, and the server was all but dry
    /// at the write (pipewire-pulse 0.3.65 on a null sink: 0-22 ms left at the fourth write of
    /// every start, a median of 70 ms at all writes; in a loaded VM, an underrun). So three
    /// periods are written one at a time; four or more, half the buffer as before. A sink's
    /// stream now takes four (``ServerSinkPCM``): 8 s, two 2 s periods a write.
    static func threshold(for format: OutputFormat) -> Int {
        let period = max(format.periodFrames, 1)
        let half = (format.bufferFrames / 2 + period - 1) / period
        let periods = max(1, min(half, format.bufferFrames / period - 2))
        return min(format.bufferFrames, periods * period)
    }

    /// The device stopped freeing room with `available` frames free, short of the threshold: it
    /// takes nothing more until it holds more than that leaves queued. pipewire-pulse does so: it
    /// keeps about a period and a graph cycle queued, which a 0.3 s buffer's threshold (two of
    /// its three periods) never leaves it, and the stream stalled. Returns what to write now (the
    /// room there is); from now on a write is due at what such a device frees, in whole periods,
    /// at least one.
    mutating func heldBack(available: Int) -> Int {
        threshold = min(threshold, max(periodFrames, available / periodFrames * periodFrames))
        return available
    }

    /// The stream starts again on an empty (prepared) or resumed buffer.
    mutating func restart(at now: ContinuousClock.Instant) {
        epoch = now
        written = 0
        writesSinceStart = 0
    }

    /// Whether the caller should look at the device's room again right after the next write,
    /// for ``wrote(_:availableBefore:availableAfter:)``.
    var checksNextWrite: Bool { !pacedByClock && writesSinceStart < Self.writesChecked }

    /// Frames to write now, given `available` free frames; 0 to sleep until ``nextCheck(available:at:)``.
    /// A device found a little short of the threshold (a slightly slow clock) is written to
    /// anyway rather than woken for again a few milliseconds later.
    func writable(available: Int, at now: ContinuousClock.Instant) -> Int {
        let room = pacedByClock ? min(available, budget(at: now)) : available
        return room >= threshold - threshold / 16 ? room : 0
    }

    /// `frames` were written with `availableBefore` frames free; right after, the device had
    /// `availableAfter` free (nil when not looked at: see ``checksNextWrite``). Returns true
    /// when this showed, for the first time, that the device does not pace.
    mutating func wrote(_ frames: Int, availableBefore: Int, availableAfter: Int?) -> Bool {
        written += frames
        writesSinceStart += 1
        guard !pacedByClock, let availableAfter else { return false }
        guard availableAfter > availableBefore - frames + frames / 2 else { return false }
        pacedByClock = true
        return true
    }

    /// When to look at the device again, having found `available` frames free.
    func nextCheck(available: Int, at now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        // A little after the room is due, so that a device on time has it when looked at.
        let margin = Duration.milliseconds(2)
        if pacedByClock {
            let due = Double(written + threshold - bufferFrames) / rate
            return epoch + .seconds(max(due, 0)) + margin
        }
        // When the whole threshold is due, not the 15/16 that ``writable(available:at:)`` accepts:
        // a sound server grants room in whole periods, and a look a little early would find
        // none and cost a second wakeup. The slack is for a device found slightly slow then.
        let missing = max(threshold - available, 0)
        return now + .seconds(Double(missing) / rate) + margin
    }

    private func budget(at now: ContinuousClock.Instant) -> Int {
        Int(epoch.duration(to: now).seconds * rate * Self.tolerance) + bufferFrames - written
    }
}
