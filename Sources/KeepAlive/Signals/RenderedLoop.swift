/// The clip converted once into the device's format, level applied, tiled to loop seamlessly.
///
/// The playback loop only hands slices of this buffer to `snd_pcm_writei`: no conversion and no
/// allocation happen while playing. Owned by one playback thread.
final class RenderedLoop {
    /// Frames in the loop; a whole number of clip passes at the device rate.
    let frameCount: Int
    /// Frames of one pass of the signal; the loop holds a whole number of them.
    let passFrames: Int
    let bytesPerFrame: Int
    private let storage: UnsafeMutableRawBufferPointer

    /// Renders `clip` for `format`, at least `minimumFrames` long so one write of a period or a
    /// first full buffer needs few calls.
    init(clip: Clip, format: OutputFormat, gain: Level, ceiling: Level, minimumFrames: Int) {
        let quantizer = SampleQuantizer(format: format.sampleFormat, gain: gain, ceiling: ceiling)
        let sourceFrames = clip.frameCount
        // Rate conversion happens here, once, so the device needs no resampler in its chain.
        let passFrames = max(1, Int((Double(sourceFrames) * Double(format.sampleRate) / Double(clip.sampleRate)).rounded()))
        let passes = max(1, (minimumFrames + passFrames - 1) / passFrames)
        self.passFrames = passFrames
        frameCount = passFrames * passes
        bytesPerFrame = format.bytesPerFrame
        storage = .allocate(byteCount: frameCount * bytesPerFrame, alignment: 16)
        let sampleBytes = format.sampleFormat.bytesPerSample
        let step = Double(sourceFrames) / Double(passFrames)
        for frame in 0..<passFrames {
            let position = Double(frame) * step
            let before = Int(position) % sourceFrames
            let after = (before + 1) % sourceFrames
            let weight = position - Double(Int(position))
            for channel in 0..<format.channels {
                let source = channel % clip.channels
                let a = clip.sample(frame: before, channel: source)
                let value = weight == 0 ? a : a + (clip.sample(frame: after, channel: source) - a) * weight
                quantizer.store(value, at: storage.baseAddress! + frame * bytesPerFrame + channel * sampleBytes)
            }
        }
        let passBytes = passFrames * bytesPerFrame
        for pass in 1..<passes {
            (storage.baseAddress! + pass * passBytes).copyMemory(from: storage.baseAddress!, byteCount: passBytes)
        }
    }

    /// Renders a generated signal: `passFrames` frames whose value for frame `n` is `sample(n)`
    /// (a fraction of full scale before `quantizer`'s gain, the same on every channel), tiled to
    /// at least `minimumFrames`. The signal must loop seamlessly after `passFrames` frames.
    ///
    /// ```swift
    /// // One cycle of a 1 kHz sine at 48 kHz, 48 frames, tiled to a period.
    /// let loop = RenderedLoop(format: format, passFrames: 48, minimumFrames: format.periodFrames, quantizer: quantizer) {
    ///     sin(2 * .pi * Double($0) / 48)
    /// }
    /// ```
    init(format: OutputFormat, passFrames: Int, minimumFrames: Int, quantizer: SampleQuantizer, sample: (Int) -> Double) {
        precondition(passFrames >= 1, "a loop holds at least one frame")
        let passes = max(1, (minimumFrames + passFrames - 1) / passFrames)
        self.passFrames = passFrames
        frameCount = passFrames * passes
        bytesPerFrame = format.bytesPerFrame
        storage = .allocate(byteCount: frameCount * bytesPerFrame, alignment: 16)
        for frame in 0..<passFrames {
            quantizer.store(sample(frame), channels: format.channels, at: storage.baseAddress! + frame * bytesPerFrame)
        }
        let passBytes = passFrames * bytesPerFrame
        for pass in 1..<passes {
            (storage.baseAddress! + pass * passBytes).copyMemory(from: storage.baseAddress!, byteCount: passBytes)
        }
    }

    deinit { storage.deallocate() }

    /// The address of frame `frame` (0 ≤ frame < frameCount).
    func frames(from frame: Int) -> UnsafeRawPointer {
        UnsafeRawPointer(storage.baseAddress! + frame * bytesPerFrame)
    }

    /// The largest sample magnitude, as a fraction of full scale.
    func peak(format: SampleFormat) -> Double {
        var peak = 0.0
        let count = storage.count / format.bytesPerSample
        for index in 0..<count {
            peak = max(peak, abs(SampleQuantizer.load(format, at: storage.baseAddress! + index * format.bytesPerSample)))
        }
        return peak
    }
}
