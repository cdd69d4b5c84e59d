/// Notices a device that stopped consuming audio without saying so (a sound server that died
/// without a word, a wedged driver): its free space has not grown for longer than it takes to
/// free the write threshold three times over.
///
/// ```swift
/// var stalls = StallDetector(window: .seconds(3), at: now)
/// stalls.observe(available: 4096, bufferFrames: 96000, at: now)
/// if let since = stalls.stalled(at: now) { /* reopen; playback stopped at `since` */ }
/// ```
struct StallDetector {
    let window: Duration
    private var lastAvailable = -1
    private(set) var lastProgress: ContinuousClock.Instant

    init(window: Duration, at now: ContinuousClock.Instant) {
        self.window = window
        lastProgress = now
    }

    /// The window for a stream that writes every `threshold` frames at `rate`.
    static func window(threshold: Int, rate: Int) -> Duration {
        .seconds(Double(threshold) / Double(rate) * 3)
    }

    /// The device reported `available` free frames: more than before (or a full buffer) is progress.
    mutating func observe(available: Int, bufferFrames: Int, at now: ContinuousClock.Instant) {
        if available > lastAvailable || available >= bufferFrames { lastProgress = now }
        lastAvailable = available
    }

    /// Frames were written: the device had `availableAfter` free afterwards.
    mutating func wrote(availableAfter: Int, at now: ContinuousClock.Instant) {
        lastProgress = now
        lastAvailable = availableAfter
    }

    /// The stream starts again (prepared or resumed).
    mutating func restart(at now: ContinuousClock.Instant) {
        lastAvailable = -1
        lastProgress = now
    }

    /// When the device last made progress, if that is longer ago than the window.
    func stalled(at now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        lastProgress.duration(to: now) > window ? lastProgress : nil
    }

    /// How long until the window would run out.
    func remaining(at now: ContinuousClock.Instant) -> Duration {
        window - lastProgress.duration(to: now)
    }
}
