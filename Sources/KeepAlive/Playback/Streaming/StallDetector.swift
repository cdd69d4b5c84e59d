/// Notices a device that stopped consuming audio without saying so (a sound server that died
/// without a word, a wedged driver): its free space has not grown for longer than it takes to
/// free the write threshold three times over.
///
/// A stream that has not yet freed anything since it (re)started is given at least
/// ``startWindow``: a sound server may hold a new stream's first audio for as long as its sink
/// had already mixed ahead of it (PulseAudio's null sink up to 2 s).
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
    /// Whether the device has freed room it was written, since the stream (re)started.
    private(set) var started = false

    /// The least a stream has to free its first room after it (re)starts. PulseAudio's null sink
    /// mixes up to 2 s ahead while idle and, when a stream arrives, takes back only that
    /// stream's latency: its first audio is pulled up to 2 s late, whatever the stream's buffer
    /// (measured: 0.09-1.54 s at 0.5-1 s buffers). Above the default buffer's own window (12 s
    /// for a sink's 8 s), so only small buffers see it.
    static let startWindow = Duration.seconds(3)

    init(window: Duration, at now: ContinuousClock.Instant) {
        self.window = window
        lastProgress = now
    }

    /// The window for a stream that writes every `threshold` frames at `rate`.
    static func window(threshold: Int, rate: Int) -> Duration {
        .seconds(Double(threshold) / Double(rate) * 3)
    }

    /// The window now: ``window``, or at least ``startWindow`` until the device first frees room.
    var currentWindow: Duration { started ? window : max(window, Self.startWindow) }

    /// The device reported `available` free frames: more than before (or a full buffer) is progress.
    mutating func observe(available: Int, bufferFrames: Int, at now: ContinuousClock.Instant) {
        if available > lastAvailable || available >= bufferFrames { lastProgress = now }
        // More room than last seen (not the first look, nor an idle full buffer): it played.
        if lastAvailable >= 0, available > lastAvailable { started = true }
        lastAvailable = available
    }

    /// Frames were written: the device had `availableAfter` free afterwards.
    mutating func wrote(availableAfter: Int, at now: ContinuousClock.Instant) {
        lastProgress = now
        lastAvailable = availableAfter
    }

    /// The room a device that held back was given (``holdsBack(at:)``) was written: it had
    /// `availableAfter` free afterwards. No progress of the device's: one that is stalled, not
    /// holding back, is still noticed when the window runs out.
    mutating func toppedUp(availableAfter: Int) {
        lastAvailable = availableAfter
    }

    /// The stream starts again (prepared or resumed).
    mutating func restart(at now: ContinuousClock.Instant) {
        lastAvailable = -1
        lastProgress = now
        started = false
    }

    /// When the device last made progress, if that is longer ago than the window.
    func stalled(at now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        lastProgress.duration(to: now) > currentWindow ? lastProgress : nil
    }

    /// Whether the device, started, has freed nothing for half the window: one that holds back
    /// until it is written more (``StreamPacer/heldBack(available:)``) is given its room then,
    /// before it would be called stalled.
    func holdsBack(at now: ContinuousClock.Instant) -> Bool {
        started && lastProgress.duration(to: now) > currentWindow / 2
    }

    /// How long until the window would run out.
    func remaining(at now: ContinuousClock.Instant) -> Duration {
        currentWindow - lastProgress.duration(to: now)
    }
}
