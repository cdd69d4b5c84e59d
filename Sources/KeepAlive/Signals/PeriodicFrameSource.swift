import Glibc

/// Plays another source in bursts: `playFrames` of it, fading in over the first `fadeFrames` and
/// out over the last `fadeFrames`, then `pauseFrames` of digital zeros, and again.
///
/// The steady part of a burst is the inner source's own frames (no copy); fades are the inner
/// frames re-quantized times a raised-cosine gain g(i) = ½ − ½·cos(π·(i+1)/(fadeFrames+1)),
/// strictly between 0 and 1 and monotonic. A faded sample never exceeds the inner sample it comes
/// from, so the ceiling holds, and by the quantizer's rule a non-zero sample fades down to one LSB,
/// never to zero inside a burst: every burst is exactly `playFrames` of sound.
///
/// While paused the inner source does not advance; the next burst goes on where the last ended.
///
/// ```swift
/// let bursts = PeriodicFrameSource(inner: noise, schedule: PlaySchedule(playFor: .seconds(1), pauseFor: .seconds(9)), ceiling: ceiling)
/// ```
final class PeriodicFrameSource: FrameSource {
    let format: OutputFormat
    let inner: any FrameSource
    /// Frames of sound in each burst, fades included.
    let playFrames: Int
    /// Frames of digital silence after each burst.
    let pauseFrames: Int
    /// Frames of each fade (in and out), at most half of ``playFrames``.
    let fadeFrames: Int
    private let quantizer: SampleQuantizer
    private let capacity: Int
    /// Zeros of the format (128 for U8), `capacity` frames.
    private let silence: UnsafeMutableRawBufferPointer
    /// Faded copies of inner frames, `capacity` frames.
    private let faded: UnsafeMutableRawBufferPointer
    /// Position in the cycle of playFrames + pauseFrames.
    private(set) var phase = 0
    /// Whether the last peek offered frames of the inner source (which then must be consumed too).
    private var offeredInner = false
    private var offered = 0

    init(inner: any FrameSource, schedule: PlaySchedule, ceiling: Level) {
        let format = inner.format
        self.format = format
        self.inner = inner
        let rate = format.sampleRate
        playFrames = max(1, PlaySchedule.frames(schedule.playFor, rate: rate))
        pauseFrames = max(1, PlaySchedule.frames(schedule.pauseFor, rate: rate))
        fadeFrames = min(max(0, PlaySchedule.frames(schedule.fade, rate: rate)), playFrames / 2)
        quantizer = SampleQuantizer(format: format.sampleFormat, gain: Level(uncheckedLinear: 1), ceiling: ceiling)
        capacity = scratchFrames(for: format)
        let bytes = capacity * format.bytesPerFrame
        silence = .allocate(byteCount: bytes, alignment: 16)
        silence.initializeMemory(as: UInt8.self, repeating: format.sampleFormat == .u8 ? 0x80 : 0)
        faded = .allocate(byteCount: bytes, alignment: 16)
        faded.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        silence.deallocate()
        faded.deallocate()
    }

    /// The fade gain of the `index`-th frame (from 0) of a fade-in; a fade-out uses it backwards.
    func fadeGain(_ index: Int) -> Double {
        0.5 - 0.5 * cos(Double.pi * Double(index + 1) / Double(fadeFrames + 1))
    }

    func peek(maximum: Int) -> (pointer: UnsafeRawPointer, frames: Int) {
        offered = 0
        offeredInner = false
        guard maximum > 0 else { return (UnsafeRawPointer(silence.baseAddress!), 0) }
        if phase >= playFrames {
            offered = min(maximum, playFrames + pauseFrames - phase, capacity)
            return (UnsafeRawPointer(silence.baseAddress!), offered)
        }
        offeredInner = true
        let fadeOutStart = playFrames - fadeFrames
        if phase >= fadeFrames, phase < fadeOutStart {
            let (pointer, frames) = inner.peek(maximum: min(maximum, fadeOutStart - phase))
            offered = frames
            return (pointer, frames)
        }
        // In a fade: copy what the inner source offers, up to the fade's end, times the gain.
        let fadeEnd = phase < fadeFrames ? fadeFrames : playFrames
        let (pointer, frames) = inner.peek(maximum: min(maximum, fadeEnd - phase, capacity))
        let sampleFormat = format.sampleFormat
        let bytesPerSample = sampleFormat.bytesPerSample
        let samplesPerFrame = format.channels
        let target = faded.baseAddress!
        for frame in 0..<frames {
            let at = phase + frame
            let gain = at < fadeFrames ? fadeGain(at) : fadeGain(playFrames - 1 - at)
            for sample in 0..<samplesPerFrame {
                let offset = (frame * samplesPerFrame + sample) * bytesPerSample
                quantizer.store(SampleQuantizer.load(sampleFormat, at: pointer + offset) * gain, at: target + offset)
            }
        }
        offered = frames
        return (UnsafeRawPointer(target), frames)
    }

    func consume(_ frames: Int) {
        precondition(frames >= 0 && frames <= offered, "consumed more than was offered")
        if offeredInner { inner.consume(frames) }
        offered -= frames
        phase += frames
        if phase == playFrames + pauseFrames { phase = 0 }
    }

    func holds(_ pointer: UnsafeRawPointer, frames: Int) -> Bool {
        let bytes = frames * format.bytesPerFrame
        return silence.contains(pointer, byteCount: bytes) || faded.contains(pointer, byteCount: bytes)
            || inner.holds(pointer, frames: frames)
    }

    /// Starts a new burst with its fade-in, and restarts the inner source.
    /// Bursts follow a schedule in time; the thread writes them as they fall due.
    var ringFit: RingFit { .none }

    func restart() {
        phase = 0
        offered = 0
        offeredInner = false
        inner.restart()
    }
}
