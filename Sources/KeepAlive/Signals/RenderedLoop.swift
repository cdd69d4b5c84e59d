/// The clip converted once into the device's format, level applied, tiled to loop seamlessly.
///
/// The playback loop only hands slices of this buffer to `snd_pcm_writei`: no conversion and no
/// allocation happen while playing. Owned by one playback thread.
///
/// For an IEC958-only device (``OutputFraming/iec958``) the samples are framed into subframes
/// here too, and the loop holds a whole number of 192-frame channel-status blocks
/// (``cycleFrames``), so that it replays as one valid IEC 60958 stream.
final class RenderedLoop {
    /// Frames in the loop; a whole number of ``cycleFrames``.
    let frameCount: Int
    /// Frames of one pass of the signal.
    let passFrames: Int
    /// Frames after which the loop's frames repeat exactly: a pass, or for IEC 60958 the fewest
    /// frames holding whole passes and whole channel-status blocks. A ring of a whole number of
    /// them loops without a seam.
    let cycleFrames: Int
    let bytesPerFrame: Int
    private let memory: LoopMemory

    /// Frames of one pass of `clip` at `rate`: rate conversion happens when rendering, once, so
    /// the device needs no resampler in its chain.
    static func passFrames(clip: Clip, rate: Int) -> Int {
        max(1, Int((Double(clip.frameCount) * Double(rate) / Double(clip.sampleRate)).rounded()))
    }

    /// The frames a loop of `passFrames`-frame passes repeats after in `format` (see
    /// ``cycleFrames``).
    static func cycleFrames(passFrames: Int, format: OutputFormat) -> Int {
        format.framing == .iec958 ? IEC958Framer.alignedCycle(passFrames) : passFrames
    }

    /// Renders `clip` for `format`, at least `minimumFrames` long so one write of a period or a
    /// first full buffer needs few calls.
    convenience init(clip: Clip, format: OutputFormat, gain: Level, ceiling: Level, minimumFrames: Int) {
        let quantizer = SampleQuantizer(format: format.sampleFormat, gain: gain, ceiling: ceiling)
        let sourceFrames = clip.frameCount
        let passFrames = Self.passFrames(clip: clip, rate: format.sampleRate)
        let bytesPerFrame = format.bytesPerFrame
        let sampleBytes = format.sampleFormat.bytesPerSample
        self.init(format: format, passFrames: passFrames, minimumFrames: minimumFrames) { storage in
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
                    quantizer.store(value, at: storage + frame * bytesPerFrame + channel * sampleBytes)
                }
            }
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
    convenience init(format: OutputFormat, passFrames: Int, minimumFrames: Int, quantizer: SampleQuantizer, sample: (Int) -> Double) {
        self.init(format: format, passFrames: passFrames, minimumFrames: minimumFrames) { storage in
            for frame in 0..<passFrames {
                quantizer.store(sample(frame), channels: format.channels, at: storage + frame * format.bytesPerFrame)
            }
        }
    }

    /// The loop's layout and memory for `passFrames`-frame passes, its first pass rendered by
    /// `renderPass` (at the memory's start), then tiled.
    private init(format: OutputFormat, passFrames: Int, minimumFrames: Int, renderPass: (UnsafeMutableRawPointer) -> Void) {
        precondition(passFrames >= 1, "a loop holds at least one frame")
        let cycleFrames = Self.cycleFrames(passFrames: passFrames, format: format)
        let passes = max(1, (minimumFrames + cycleFrames - 1) / cycleFrames) * (cycleFrames / passFrames)
        self.passFrames = passFrames
        self.cycleFrames = cycleFrames
        frameCount = passFrames * passes
        bytesPerFrame = format.bytesPerFrame
        memory = LoopMemory(byteCount: frameCount * bytesPerFrame, cycleBytes: cycleFrames * bytesPerFrame)
        renderPass(memory.base)
        tile(passes: passes, format: format)
    }

    /// Copies the first pass over the rest of the loop, then frames the whole loop where the
    /// device takes IEC 60958 subframes (each copy of a pass sits elsewhere in its blocks, so the
    /// framing comes after the copies). Only the memory's distinct bytes are written: in tiled
    /// memory (``LoopMemory``) the rest is the same tile mapped again, whole cycles of it, so
    /// framing it twice would frame subframes.
    private func tile(passes: Int, format: OutputFormat) {
        let passBytes = passFrames * bytesPerFrame
        for pass in 1..<min(passes, memory.distinctBytes / passBytes) {
            (memory.base + pass * passBytes).copyMemory(from: memory.base, byteCount: passBytes)
        }
        if format.framing == .iec958 {
            IEC958Framer(sampleRate: format.sampleRate)
                .frame(memory.base, frames: min(frameCount, memory.distinctBytes / bytesPerFrame), channels: format.channels, firstFrameInBlock: 0)
        }
    }

    deinit { memory.release() }

    /// Whether the loop is one tile mapped again and again (``LoopMemory``).
    var isTiled: Bool { memory.isTiled }

    /// The address of frame `frame` (0 ≤ frame < frameCount).
    func frames(from frame: Int) -> UnsafeRawPointer {
        UnsafeRawPointer(memory.base + frame * bytesPerFrame)
    }

    /// The largest sample magnitude, as a fraction of full scale (of the samples inside the
    /// subframes, for an IEC958-only device).
    func peak(format: SampleFormat, framing: OutputFraming = .linear) -> Double {
        var peak = 0.0
        let count = min(frameCount * bytesPerFrame, memory.distinctBytes) / format.bytesPerSample
        for index in 0..<count {
            let pointer = memory.base + index * format.bytesPerSample
            let value = framing == .iec958
                ? Double(IEC958Framer.sample(of: UInt32(littleEndian: pointer.loadUnaligned(as: UInt32.self)))) / format.fullScale
                : SampleQuantizer.load(format, at: pointer)
            peak = max(peak, abs(value))
        }
        return peak
    }
}
