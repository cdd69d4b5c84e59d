import Glibc

/// Makes the source of frames for `signal` on a device that opened with `format`; nil for
/// ``KeepAliveSignal/openOnly`` (hold the device open, write nothing). Everything is rendered or
/// allocated here; the returned source never allocates.
///
/// - `clip`: the clip at `volume`, looped (``RenderedLoop``), exactly as before signals existed.
/// - `zero`: a loop of digital zeros.
/// - `fluctuate`: a loop of zeros with ±1 LSB pulses, over the shortest whole number of frames
///   holding an even number of pulses (at most 8 MiB; else generated in place).
/// - `sine`: a loop holding a whole number of cycles in a whole number of frames (at most 8 MiB;
///   else generated in place by phase accumulation), peak `volume`.
/// - `white`, `pink`, `brown`: generated in place, one scratch buffer at a time, from `seed`;
///   peak at most `volume` (rounded down to a whole LSB, never below one).
/// - With a `schedule`, the source plays in bursts with fades (``PeriodicFrameSource``).
///
/// A loop holds at least `minimumLoopFrames` frames (by default one period of `format`): a loop
/// is offered up to its end, so a write call takes at most that many frames.
///
/// Every sample of every source is at most `ceiling` (the quantizer's rule). `volume` above
/// `ceiling` is refused by ``KeepAliveConfiguration/validate()`` before this point.
///
/// ```swift
/// let source = try makeFrameSource(signal: .pink, clip: output.clip, format: format,
///                                  volume: output.volume, ceiling: output.ceiling,
///                                  schedule: nil, seed: 1)
/// ```
/// - Throws: ``KeepAliveSignalError`` when the signal cannot be played at the device's rate (a
///   sine at or above half the rate, more pulses per second than frames).
func makeFrameSource(
    signal: KeepAliveSignal, clip: Clip, format: OutputFormat, volume: Level, ceiling: Level,
    schedule: PlaySchedule?, seed: UInt64, minimumLoopFrames: Int? = nil
) throws(KeepAliveSignalError) -> (any FrameSource)? {
    try signal.validate(sampleRate: format.sampleRate)
    // On an IEC958-only device a loop is framed as it is rendered, when it holds whole
    // channel-status blocks in a bounded size; everything else is rendered as plain 24-bit
    // samples and framed as it is written (``IEC958FramedSource``).
    let framed = format.framing == .iec958
    let linear = format.linear
    func loopFormat(passFrames: Int) -> OutputFormat {
        guard framed, schedule == nil else { return linear }
        let cycle = RenderedLoop.cycleFrames(passFrames: passFrames, format: format)
        return cycle * format.bytesPerFrame <= maximumSignalLoopBytes ? format : linear
    }
    let source: any FrameSource
    let loopFrames = max(minimumLoopFrames ?? format.periodFrames, 1)
    let sampleFormat = format.sampleFormat
    switch signal.storage {
    case .openOnly:
        return nil
    case .clip:
        let rendered = loopFormat(passFrames: RenderedLoop.passFrames(clip: clip, rate: format.sampleRate))
        source = LoopFrameSource(
            loop: RenderedLoop(clip: clip, format: rendered, gain: volume, ceiling: ceiling, minimumFrames: loopFrames),
            format: rendered)
    case .zero:
        let quantizer = SampleQuantizer(format: sampleFormat, gain: volume, ceiling: ceiling)
        let rendered = loopFormat(passFrames: 1)
        source = LoopFrameSource(
            loop: RenderedLoop(format: rendered, passFrames: 1, minimumFrames: loopFrames, quantizer: quantizer) { _ in 0 },
            format: rendered)
    case .fluctuate(let perSecond):
        // Gain 1: the source value is one LSB itself, so it quantizes to exactly ±1 step (in
        // float, 2⁻²³), or to what the ceiling leaves of it.
        let quantizer = SampleQuantizer(format: sampleFormat, gain: Level(uncheckedLinear: 1), ceiling: ceiling)
        let lsb = sampleFormat.leastSignificantBit
        if let (frames, pulses) = exactLoop(perSecond: perSecond, eventMultiple: 2, format: format) {
            let rendered = loopFormat(passFrames: frames)
            let loop = RenderedLoop(format: rendered, passFrames: frames, minimumFrames: loopFrames, quantizer: quantizer) { frame in
                // Pulse k sits at frame ⌊k·frames/pulses⌋; the candidate for `frame` is ⌈frame·pulses/frames⌉.
                let k = (frame * pulses + frames - 1) / frames
                guard k < pulses, k * frames / pulses == frame else { return 0 }
                return k % 2 == 0 ? lsb : -lsb
            }
            source = LoopFrameSource(loop: loop, format: rendered)
        } else {
            source = GeneratedFrameSource(
                format: linear, quantizer: quantizer,
                generator: PulseGenerator(perSecond: perSecond, sampleRate: format.sampleRate, pulse: lsb))
        }
    case .sine(let frequency):
        let quantizer = SampleQuantizer(format: sampleFormat, gain: volume, ceiling: ceiling)
        if let (frames, cycles) = exactLoop(perSecond: frequency, eventMultiple: 1, format: format) {
            let rendered = loopFormat(passFrames: frames)
            let loop = RenderedLoop(format: rendered, passFrames: frames, minimumFrames: loopFrames, quantizer: quantizer) { frame in
                // Exact phase from integers: no accumulated error over the loop.
                sin(2 * Double.pi * Double(frame * cycles % frames) / Double(frames))
            }
            source = LoopFrameSource(loop: loop, format: rendered)
        } else {
            source = GeneratedFrameSource(
                format: linear, quantizer: quantizer,
                generator: SineGenerator(frequency: frequency, sampleRate: format.sampleRate))
        }
    case .white:
        source = GeneratedFrameSource(format: linear, quantizer: noiseQuantizer(format, volume, ceiling), generator: WhiteNoise(seed: seed))
    case .pink:
        source = GeneratedFrameSource(format: linear, quantizer: noiseQuantizer(format, volume, ceiling), generator: PinkNoise(seed: seed))
    case .brown:
        source = GeneratedFrameSource(
            format: linear, quantizer: noiseQuantizer(format, volume, ceiling),
            generator: BrownNoise(seed: seed, sampleRate: format.sampleRate))
    }
    let played = schedule.map { PeriodicFrameSource(inner: source, schedule: $0, ceiling: ceiling) } ?? source
    guard framed, played.format.framing == .linear else { return played }
    return IEC958FramedSource(inner: played, format: format)
}

/// The most memory a rendered signal loop may take; longer exact loops are generated in place.
let maximumSignalLoopBytes = 8 << 20

/// The shortest loop holding a whole number of events (cycles, pulses; a multiple of
/// `eventMultiple`) at `perSecond` events a second in a whole number of frames at the format's
/// rate: (frames, events), or nil when none fits in ``maximumSignalLoopBytes`` within 100 000
/// events. "Whole" allows 10⁻⁶ frame of rounding, so a rate given as a decimal like 1/3 Hz still
/// loops (as 3 s), while a rate that only nearly fits is generated in place rather than played
/// slightly off.
func exactLoop(perSecond: Double, eventMultiple: Int, format: OutputFormat) -> (frames: Int, events: Int)? {
    guard perSecond > 0, perSecond.isFinite else { return nil }
    let maximumFrames = Double(maximumSignalLoopBytes / format.bytesPerFrame)
    let framesPerEvent = Double(format.sampleRate) / perSecond
    var events = eventMultiple
    while events <= 100_000 * eventMultiple {
        let exact = Double(events) * framesPerEvent
        if exact > maximumFrames + 0.5 { return nil }
        let frames = exact.rounded()
        if frames >= 1, abs(exact - frames) <= 1e-6 { return (Int(frames), events) }
        events += eventMultiple
    }
    return nil
}

private func noiseQuantizer(_ format: OutputFormat, _ volume: Level, _ ceiling: Level) -> SampleQuantizer {
    SampleQuantizer(format: format.sampleFormat, gain: volume, ceiling: ceiling, peak: volume)
}
