import Glibc
import Testing
@testable import KeepAlive

/// Renders and measures signals through their ``FrameSource``, the way the playback loop reads them.
enum SignalBench {
    static let integerFormats: [SampleFormat] = [.s16, .s24, .s24Packed, .s32, .float32]
    static let allFormats: [SampleFormat] = [.s16, .s24, .s24Packed, .s32, .float32, .u8]

    static func format(_ sampleFormat: SampleFormat, rate: Int = 48_000, channels: Int = 2, period: Int = 1024) -> OutputFormat {
        OutputFormat(sampleFormat: sampleFormat, sampleRate: rate, channels: channels, bufferFrames: period * 4, periodFrames: period)
    }

    static func source(
        _ signal: KeepAliveSignal, _ format: OutputFormat, volume: Double = 0.01, ceiling: Double = 0.05,
        schedule: PlaySchedule? = nil, clip: Clip = .embedded, seed: UInt64 = 7
    ) throws -> any FrameSource {
        let source = try makeFrameSource(
            signal: signal, clip: clip, format: format, volume: try Level(linear: volume),
            ceiling: try Level(linear: ceiling), schedule: schedule, seed: seed)
        return try #require(source)
    }

    /// The stream's raw bytes for `frames` frames. Each peek asks for the next size of `sizes`
    /// (cycled); with `partial`, every other offer is only half consumed, as a device that takes
    /// less than it is given.
    static func bytes(_ source: any FrameSource, frames: Int, sizes: [Int] = [4096], partial: Bool = false) -> [UInt8] {
        let bytesPerFrame = source.format.bytesPerFrame
        var out = [UInt8](repeating: 0, count: frames * bytesPerFrame)
        var done = 0
        var call = 0
        out.withUnsafeMutableBytes { target in
            while done < frames {
                let asked = min(sizes[call % sizes.count], frames - done)
                let (pointer, offered) = source.peek(maximum: asked)
                precondition(offered >= 1 && offered <= asked, "peek offered \(offered) of \(asked)")
                let taken = partial && call % 2 == 1 ? max(1, offered / 2) : offered
                (target.baseAddress! + done * bytesPerFrame).copyMemory(from: pointer, byteCount: taken * bytesPerFrame)
                source.consume(taken)
                done += taken
                call += 1
            }
        }
        return out
    }

    /// The stream as fractions of full scale, interleaved.
    static func samples(_ source: any FrameSource, frames: Int, sizes: [Int] = [4096], partial: Bool = false) -> [Double] {
        let raw = bytes(source, frames: frames, sizes: sizes, partial: partial)
        return decode(raw, source.format.sampleFormat)
    }

    static func decode(_ raw: [UInt8], _ format: SampleFormat) -> [Double] {
        let width = format.bytesPerSample
        return raw.withUnsafeBytes { bytes in
            (0..<(raw.count / width)).map { SampleQuantizer.load(format, at: bytes.baseAddress! + $0 * width) }
        }
    }

    /// Channel `channel` of interleaved samples.
    static func channel(_ samples: [Double], _ channel: Int, of channels: Int) -> [Double] {
        stride(from: channel, to: samples.count, by: channels).map { samples[$0] }
    }

    static func peak(_ samples: [Double]) -> Double { samples.reduce(0) { max($0, abs($1)) } }

    /// Frequency from the rising zero crossings (interpolated), averaged over every whole cycle.
    static func zeroCrossingFrequency(_ x: [Double], rate: Int) -> Double {
        var crossings: [Double] = []
        for i in 1..<x.count where x[i - 1] < 0 && x[i] >= 0 {
            crossings.append(Double(i - 1) + (-x[i - 1]) / (x[i] - x[i - 1]))
        }
        guard crossings.count >= 2 else { return 0 }
        return Double(rate) * Double(crossings.count - 1) / (crossings.last! - crossings.first!)
    }

    /// In-place iterative radix-2 FFT; `re.count` must be a power of two.
    static func fft(_ re: inout [Double], _ im: inout [Double]) {
        let n = re.count
        re.withUnsafeMutableBufferPointer { re in
            im.withUnsafeMutableBufferPointer { im in
                var j = 0
                for i in 1..<n {
                    var bit = n >> 1
                    while j & bit != 0 { j ^= bit; bit >>= 1 }
                    j |= bit
                    if i < j { re.swapAt(i, j); im.swapAt(i, j) }
                }
                var length = 2
                while length <= n {
                    let angle = -2 * Double.pi / Double(length)
                    let (wr, wi) = (cos(angle), sin(angle))
                    var start = 0
                    while start < n {
                        var (cr, ci) = (1.0, 0.0)
                        for k in 0..<(length / 2) {
                            let a = start + k, b = a + length / 2
                            let tr = re[b] * cr - im[b] * ci
                            let ti = re[b] * ci + im[b] * cr
                            re[b] = re[a] - tr; im[b] = im[a] - ti
                            re[a] += tr; im[a] += ti
                            (cr, ci) = (cr * wr - ci * wi, cr * wi + ci * wr)
                        }
                        start += length
                    }
                    length <<= 1
                }
            }
        }
    }

    /// Welch power spectral density (Hann window, 50 % overlap), one value per bin up to Nyquist.
    static func powerSpectrum(_ x: [Double], size: Int) -> [Double] {
        let window = (0..<size).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(size)) }
        var power = [Double](repeating: 0, count: size / 2 + 1)
        var segments = 0
        var start = 0
        while start + size <= x.count {
            var re = (0..<size).map { x[start + $0] * window[$0] }
            var im = [Double](repeating: 0, count: size)
            fft(&re, &im)
            for k in 0...(size / 2) { power[k] += re[k] * re[k] + im[k] * im[k] }
            segments += 1
            start += size / 2
        }
        return power.map { $0 / Double(max(segments, 1)) }
    }

    /// The slope of the power spectral density in dB per octave: the mean density in third-octave
    /// bands from `low` to `high` Hz, fitted by least squares against log2(frequency).
    static func slope(_ x: [Double], rate: Int, low: Double = 100, high: Double = 10_000, size: Int = 8192) -> Double {
        let power = powerSpectrum(x, size: size)
        let binWidth = Double(rate) / Double(size)
        var points: [(Double, Double)] = []
        var center = low
        while center <= high * 1.0001 {
            let lower = center / pow(2, 1.0 / 6), upper = center * pow(2, 1.0 / 6)
            let bins = Int((lower / binWidth).rounded(.up))...Int((upper / binWidth).rounded(.down))
            if !bins.isEmpty {
                let mean = bins.reduce(0.0) { $0 + power[$1] } / Double(bins.count)
                points.append((log2(center), 10 * log10(mean)))
            }
            center *= pow(2, 1.0 / 3)
        }
        let n = Double(points.count)
        let mx = points.reduce(0) { $0 + $1.0 } / n, my = points.reduce(0) { $0 + $1.1 } / n
        let sxy = points.reduce(0) { $0 + ($1.0 - mx) * ($1.1 - my) }
        let sxx = points.reduce(0) { $0 + ($1.0 - mx) * ($1.0 - mx) }
        return sxy / sxx
    }

    /// Runs of equal "is silent" frames: (silent, length) in order.
    static func runs(_ samples: [Double], channels: Int) -> [(silent: Bool, length: Int)] {
        var runs: [(silent: Bool, length: Int)] = []
        for frame in 0..<(samples.count / channels) {
            let silent = (0..<channels).allSatisfy { samples[frame * channels + $0] == 0 }
            if let last = runs.last, last.silent == silent { runs[runs.count - 1].length += 1 } else { runs.append((silent, 1)) }
        }
        return runs
    }

    /// A clip holding one constant 16-bit value, mono: its loop shows a gain envelope directly.
    static func constantClip(_ value: Int16 = 16384) throws -> Clip {
        var wav = WAVBuilder()
        wav.sampleRate = 48_000
        wav.data = WAVBuilder.le16(UInt16(bitPattern: value))
        return try Clip(wavBytes: wav.bytes)
    }
}

@Suite("Signal words and schedules")
struct SignalParsingTests {
    @Test("parses every word, with and without a frequency", arguments: [
        ("clip", KeepAliveSignal.clip), ("zero", .zero), ("zeros", .zero), ("fluctuate", .fluctuate(perSecond: 50)),
        ("fluctuate:10", .fluctuate(perSecond: 10)), ("sine", .sine(frequency: 1)), ("sine:440", .sine(frequency: 440)),
        ("Sine:440Hz", .sine(frequency: 440)), ("sine: 0.5 hz", .sine(frequency: 0.5)), ("WHITE", .white), ("pink", .pink),
        ("brown", .brown), ("open-only", .openOnly), ("open_only", .openOnly), ("openonly", .openOnly), (" pink ", .pink),
    ])
    func parses(_ text: String, _ expected: KeepAliveSignal) throws {
        #expect(try KeepAliveSignal(parsing: text) == expected)
    }

    @Test("refuses unknown words and bad frequencies with a clear message", arguments: [
        ("hum", KeepAliveSignalError.unknownSignal("hum")), ("", .unknownSignal("")),
        ("white:3", .frequencyNotAccepted(signal: "white", text: "3")), ("clip:1", .frequencyNotAccepted(signal: "clip", text: "1")),
        ("sine:abc", .notAFrequency("abc")), ("sine:", .notAFrequency("")), ("sine:0", .frequencyOutOfRange(signal: "sine", frequency: 0)),
        ("fluctuate:-1", .frequencyOutOfRange(signal: "fluctuate", frequency: -1)),
        ("sine:200000", .frequencyOutOfRange(signal: "sine", frequency: 200_000)),
    ])
    func refuses(_ text: String, _ error: KeepAliveSignalError) {
        #expect(throws: error) { try KeepAliveSignal(parsing: text) }
    }

    @Test("an unknown word's message lists every signal")
    func unknownMessage() {
        let message = KeepAliveSignalError.unknownSignal("hum").description
        for name in KeepAliveSignal.names { #expect(message.contains(name)) }
        #expect(message.contains("'hum'"))
    }

    @Test("description parses back to the same signal")
    func roundTrip() throws {
        let signals: [KeepAliveSignal] = [.clip, .zero, .fluctuate(perSecond: 50), .fluctuate(perSecond: 0.25), .sine(frequency: 440),
                                          .sine(frequency: 1234.5), .white, .pink, .brown, .openOnly]
        for signal in signals { #expect(try KeepAliveSignal(parsing: signal.description) == signal) }
        #expect(KeepAliveSignal.sine(frequency: 440).description == "sine:440")
        #expect(KeepAliveSignal.default == .clip)
    }

    @Test("a sine at or above half the rate is refused with a typed error")
    func nyquist() throws {
        #expect(throws: KeepAliveSignalError.frequencyNotBelowNyquist(frequency: 24_000, sampleRate: 48_000)) {
            try makeFrameSource(signal: .sine(frequency: 24_000), clip: .embedded, format: SignalBench.format(.s16),
                                volume: .defaultVolume, ceiling: .defaultCeiling, schedule: nil, seed: 0)
        }
        #expect(KeepAliveSignalError.frequencyNotBelowNyquist(frequency: 24_000, sampleRate: 48_000).description.contains("below half the rate"))
        #expect(throws: KeepAliveSignalError.pulsesAboveSampleRate(perSecond: 9000, sampleRate: 8000)) {
            try KeepAliveSignal.fluctuate(perSecond: 9000).validate(sampleRate: 8000)
        }
        let justUnder = try SignalBench.source(.sine(frequency: 23_999), SignalBench.format(.s16))
        #expect(SignalBench.peak(SignalBench.samples(justUnder, frames: 4800)) > 0)
    }

    @Test("open-only makes no source, with or without a schedule")
    func openOnly() throws {
        for schedule in [nil, PlaySchedule(playFor: .seconds(1), pauseFor: .seconds(1))] {
            let source = try makeFrameSource(signal: .openOnly, clip: .embedded, format: SignalBench.format(.s16),
                                             volume: .defaultVolume, ceiling: .defaultCeiling, schedule: schedule, seed: 0)
            #expect(source == nil)
        }
        #expect(!KeepAliveSignal.openOnly.playsFrames)
    }

    @Test("schedules: valid ones pass, others name the broken rule")
    func schedules() {
        #expect(throws: Never.self) { try PlaySchedule(playFor: .seconds(5), pauseFor: .seconds(55)).validate() }
        #expect(throws: PlayScheduleError.playOutOfRange(.zero)) { try PlaySchedule(playFor: .zero, pauseFor: .seconds(1)).validate() }
        #expect(throws: PlayScheduleError.pauseOutOfRange(.seconds(-1))) { try PlaySchedule(playFor: .seconds(1), pauseFor: .seconds(-1)).validate() }
        #expect(throws: PlayScheduleError.pauseOutOfRange(.seconds(90_000))) { try PlaySchedule(playFor: .seconds(1), pauseFor: .seconds(90_000)).validate() }
        #expect(throws: PlayScheduleError.fadeTooLong(fade: .milliseconds(600), playFor: .seconds(1))) {
            try PlaySchedule(playFor: .seconds(1), pauseFor: .seconds(1), fade: .milliseconds(600)).validate()
        }
        #expect(PlaySchedule(playFor: .seconds(5), pauseFor: .seconds(55)).description == "play 5 s, pause 55 s, fade 0.1 s")
        #expect(PlaySchedule.frames(.milliseconds(250), rate: 44_100) == 11_025)
        #expect(PlaySchedule.frames(.seconds(86_400), rate: 384_000) == 33_177_600_000)
    }
}

@Suite("Signals rendered through their frame sources")
struct SignalTests {
    // MARK: zero and clip

    @Test("zero is digital silence in every format (128 in U8)", arguments: SignalBench.allFormats)
    func zero(_ sampleFormat: SampleFormat) throws {
        let source = try SignalBench.source(.zero, SignalBench.format(sampleFormat))
        let raw = SignalBench.bytes(source, frames: 5000, sizes: [777])
        #expect(raw.allSatisfy { $0 == (sampleFormat == .u8 ? 0x80 : 0) })
    }

    @Test("clip is the seed's loop: -1 LSB everywhere on S16, whatever the peek sizes")
    func clip() throws {
        let format = SignalBench.format(.s16, rate: 44_100)
        let source = try SignalBench.source(.clip, format)
        let samples = SignalBench.samples(source, frames: 50_000, sizes: [1000, 22050, 3], partial: true)
        #expect(samples.allSatisfy { $0 == -1.0 / 32768 })
    }

    @Test("a float sample never rounds above the ceiling (Float(0.05) is above 0.05)")
    func floatRounding() throws {
        #expect(Double(Float(0.05)) > 0.05)
        let ceiling = try Level(linear: 0.05)
        let quantizer = SampleQuantizer(format: .float32, gain: ceiling, ceiling: ceiling)
        var stored: UInt32 = 0
        quantizer.store(1, at: &stored)
        #expect(Double(Float(bitPattern: stored)) <= 0.05)
        #expect(Double(Float(bitPattern: stored)) > 0.05 - 1e-8)
        let source = try SignalBench.source(.sine(frequency: 1000), SignalBench.format(.float32), volume: 0.05, ceiling: 0.05)
        #expect(SignalBench.peak(SignalBench.samples(source, frames: 4800)) <= 0.05)
    }

    // MARK: fluctuate

    @Test("fluctuate: ±1 LSB alternately at rate/F spacing, zero elsewhere", arguments: SignalBench.allFormats)
    func fluctuate(_ sampleFormat: SampleFormat) throws {
        // 50/s (960 frames apart, loop 1920), 3/s (odd: the loop holds 2 s so the signs keep
        // alternating across its end), 13/s (3692.3 frames: spacing 3692 or 3693), 7.123456789/s
        // (no exact loop under 8 MiB: generated by accumulation).
        for perSecond in [50.0, 3, 13, 7.123456789] {
            let format = SignalBench.format(sampleFormat, rate: 48_000, channels: 2)
            let source = try SignalBench.source(.fluctuate(perSecond: perSecond), format, volume: 0.01)
            let frames = 48_000 * 5 / 2
            let samples = SignalBench.samples(source, frames: frames, sizes: [4096, 100, 1], partial: true)
            let lsb = sampleFormat.leastSignificantBit
            var pulses: [(frame: Int, value: Double)] = []
            for frame in 0..<frames {
                let left = samples[frame * 2], right = samples[frame * 2 + 1]
                #expect(left == right)
                if left != 0 { pulses.append((frame, left)) }
            }
            let spacing = 48_000 / perSecond
            #expect(pulses.first?.frame == 0)
            #expect(abs(Double(pulses.count) - Double(frames) / spacing) <= 1, "\(perSecond)/s: \(pulses.count) pulses")
            for (index, pulse) in pulses.enumerated() {
                #expect(pulse.value == (index % 2 == 0 ? lsb : -lsb), "\(sampleFormat) \(perSecond)/s pulse \(index) is \(pulse.value)")
                guard index > 0 else { continue }
                let gap = Double(pulse.frame - pulses[index - 1].frame)
                #expect(gap == spacing.rounded(.down) || gap == spacing.rounded(.up), "\(perSecond)/s gap \(gap), expected \(spacing)")
            }
        }
    }

    @Test("fluctuate loops over the shortest exact span with an even number of pulses")
    func fluctuateLoopLength() throws {
        let format = SignalBench.format(.s16, rate: 48_000, channels: 1)
        #expect(exactLoop(perSecond: 50, eventMultiple: 2, format: format)! == (1920, 2))
        #expect(exactLoop(perSecond: 3, eventMultiple: 2, format: format)! == (32_000, 2))
        #expect(exactLoop(perSecond: 13, eventMultiple: 2, format: format)! == (96_000, 26))
        #expect(exactLoop(perSecond: 7.123456789, eventMultiple: 2, format: format) == nil)
        #expect(exactLoop(perSecond: 1.0 / 3, eventMultiple: 1, format: format)! == (144_000, 1))
    }

    @Test("exact loops where they exist, generation in place otherwise")
    func loopOrInPlace() throws {
        let format = SignalBench.format(.s16)
        #expect(try SignalBench.source(.sine(frequency: 440), format) is LoopFrameSource)
        #expect(try SignalBench.source(.sine(frequency: 1.0 / 3), format) is LoopFrameSource)
        #expect(try SignalBench.source(.sine(frequency: 1234.567), format) is GeneratedFrameSource<SineGenerator>)
        #expect(try SignalBench.source(.fluctuate(perSecond: 50), format) is LoopFrameSource)
        #expect(try SignalBench.source(.fluctuate(perSecond: 7.123456789), format) is GeneratedFrameSource<PulseGenerator>)
        #expect(try SignalBench.source(.white, format) is GeneratedFrameSource<WhiteNoise>)
        #expect(try SignalBench.source(.white, format, schedule: PlaySchedule(playFor: .seconds(1), pauseFor: .seconds(1))) is PeriodicFrameSource)
    }

    @Test("fluctuate obeys a ceiling under one LSB: zeros on integer formats, the ceiling in float")
    func fluctuateUnderCeiling() throws {
        for sampleFormat in [SampleFormat.u8, .float32] {
            let source = try SignalBench.source(.fluctuate(perSecond: 50), SignalBench.format(sampleFormat), volume: 1e-9, ceiling: 1e-9)
            let peak = SignalBench.peak(SignalBench.samples(source, frames: 4800))
            #expect(peak <= 1e-9)
        }
    }

    // MARK: sine

    @Test("sine: frequency within 1 %, peak within 1 LSB of the volume", arguments: SignalBench.allFormats)
    func sine(_ sampleFormat: SampleFormat) throws {
        // 1 Hz loops over one second; 440 Hz over 11 cycles in 1200 frames; 1000 Hz over one
        // 48-frame cycle; 1234.567 Hz has no exact loop and is generated by phase accumulation.
        for (frequency, rate, seconds) in [(1.0, 8000, 4.5), (440, 48_000, 1), (1000, 48_000, 1), (1234.567, 48_000, 1), (20, 384_000, 0.5)] {
            let volume = sampleFormat == .u8 ? 0.05 : 0.01
            let format = SignalBench.format(sampleFormat, rate: rate, channels: 1)
            let source = try SignalBench.source(.sine(frequency: frequency), format, volume: volume)
            let samples = SignalBench.samples(source, frames: Int(Double(rate) * seconds), sizes: [4096, 333], partial: true)
            let measured = SignalBench.zeroCrossingFrequency(samples, rate: rate)
            let error = abs(measured - frequency) / frequency
            #expect(error < 0.01, "\(sampleFormat) \(frequency) Hz measured \(measured)")
            let peak = SignalBench.peak(samples)
            #expect(abs(peak - volume) <= sampleFormat.leastSignificantBit, "\(sampleFormat) \(frequency) Hz peak \(peak)")
            #expect(peak <= 0.05)
        }
    }

    @Test("sine frequency error in float, measured by a DFT peak")
    func sineSpectrum() throws {
        let format = SignalBench.format(.float32, rate: 48_000, channels: 1)
        let source = try SignalBench.source(.sine(frequency: 1000), format)
        let samples = SignalBench.samples(source, frames: 65_536)
        let power = SignalBench.powerSpectrum(samples, size: 65_536 / 2)
        let bin = power.indices.max { power[$0] < power[$1] }!
        // Parabolic interpolation of the log power around the peak bin.
        let (a, b, c) = (log(power[bin - 1]), log(power[bin]), log(power[bin + 1]))
        let offset = 0.5 * (a - c) / (a - 2 * b + c)
        let measured = (Double(bin) + offset) * 48_000 / 32_768
        #expect(abs(measured - 1000) / 1000 < 0.0001, "measured \(measured) Hz")
    }

    // MARK: noise

    @Test("noise: peak never above the volume, spectrum slope 0, -3, -6 dB/octave", arguments: SignalBench.integerFormats)
    func noise(_ sampleFormat: SampleFormat) throws {
        let rate = 48_000
        let format = SignalBench.format(sampleFormat, rate: rate, channels: 1)
        for (signal, expectedSlope) in [(KeepAliveSignal.white, 0.0), (.pink, -3), (.brown, -6)] {
            let volume = 0.01
            let source = try SignalBench.source(signal, format, volume: volume, seed: 42)
            let samples = SignalBench.samples(source, frames: rate * 4)
            let peak = SignalBench.peak(samples)
            #expect(peak <= volume, "\(signal) \(sampleFormat) peak \(peak)")
            #expect(peak >= volume * (signal == .white ? 0.99 : 0.4), "\(signal) \(sampleFormat) peak \(peak) is far below the volume")
            let slope = SignalBench.slope(samples, rate: rate)
            #expect(abs(slope - expectedSlope) < 0.5, "\(signal) \(sampleFormat) slope \(slope) dB/octave")
        }
    }

    @Test("noise on U8 stays under the volume too", arguments: [KeepAliveSignal.white, .pink, .brown])
    func noiseU8(_ signal: KeepAliveSignal) throws {
        let source = try SignalBench.source(signal, SignalBench.format(.u8), volume: 0.05)
        let samples = SignalBench.samples(source, frames: 48_000)
        #expect(SignalBench.peak(samples) <= 0.05)
        #expect(SignalBench.peak(samples) >= 2.0 / 128)
    }

    @Test("noise at a volume under one LSB plays ±1 LSB, not silence")
    func noiseUnderOneStep() throws {
        let source = try SignalBench.source(.pink, SignalBench.format(.s16), volume: 1e-6)
        let samples = SignalBench.samples(source, frames: 4800)
        #expect(samples.allSatisfy { abs($0) == 1.0 / 32768 })
    }

    @Test("noise is deterministic per seed, and seeds differ")
    func noiseSeeds() throws {
        let format = SignalBench.format(.s16)
        for signal in [KeepAliveSignal.white, .pink, .brown] {
            let a = SignalBench.bytes(try SignalBench.source(signal, format, seed: 1), frames: 2000)
            let b = SignalBench.bytes(try SignalBench.source(signal, format, seed: 1), frames: 2000)
            let c = SignalBench.bytes(try SignalBench.source(signal, format, seed: 2), frames: 2000)
            #expect(a == b)
            #expect(a != c)
        }
    }

    @Test("pink filter normalization matches the measured RMS")
    func pinkDeviation() {
        var pink = PinkNoise(seed: 3)
        var sum = 0.0
        let count = 400_000
        for _ in 0..<count { let x = pink.next(); sum += x * x }
        let rms = (sum / Double(count)).squareRoot()
        #expect(abs(rms * NoiseShaping.crestFactor - 1) < 0.05, "RMS \(rms)")
    }

    // MARK: periodic playing

    @Test("periodic: bursts and silences exactly as long as asked", arguments: SignalBench.allFormats)
    func periodicLengths(_ sampleFormat: SampleFormat) throws {
        for (rate, play, pause, fade) in [(8000, 250, 500, 50), (44_100, 100, 230, 10), (48_000, 7, 3, 0)] {
            let schedule = PlaySchedule(playFor: .milliseconds(play), pauseFor: .milliseconds(pause), fade: .milliseconds(fade))
            let format = SignalBench.format(sampleFormat, rate: rate, channels: 2, period: 1000)
            let source = try SignalBench.source(.white, format, volume: 0.05, schedule: schedule)
            let playFrames = rate * play / 1000, pauseFrames = rate * pause / 1000
            let samples = SignalBench.samples(source, frames: (playFrames + pauseFrames) * 3, sizes: [4096, 999, 1, 313], partial: true)
            let runs = SignalBench.runs(samples, channels: 2)
            #expect(runs.count == 6, "\(sampleFormat) \(rate): \(runs.map(\.length))")
            for (index, run) in runs.enumerated() {
                #expect(run.silent == (index % 2 == 1))
                #expect(run.length == (run.silent ? pauseFrames : playFrames), "\(sampleFormat) \(rate) run \(index): \(run.length)")
            }
            #expect(SignalBench.peak(samples) <= 0.05)
        }
    }

    @Test("periodic: fades are monotonic raised-cosine envelopes, flat between", arguments: SignalBench.allFormats)
    func periodicFades(_ sampleFormat: SampleFormat) throws {
        let schedule = PlaySchedule(playFor: .milliseconds(500), pauseFor: .milliseconds(250), fade: .milliseconds(100))
        let format = SignalBench.format(sampleFormat, rate: 48_000, channels: 1, period: 512)
        // A constant clip at 0.05 of its 0.5: every sample is 0.025 times the envelope.
        let source = try SignalBench.source(.clip, format, volume: 0.05, schedule: schedule, clip: try SignalBench.constantClip())
        let samples = SignalBench.samples(source, frames: 36_000 * 2, sizes: [1024, 77], partial: true)
        let fade = 4800, play = 24_000
        for cycle in 0..<2 {
            let burst = Array(samples[(cycle * 36_000)..<(cycle * 36_000 + play)])
            let steady = burst[play / 2]
            #expect(abs(steady - 0.025) <= sampleFormat.leastSignificantBit)
            for i in 1..<fade {
                #expect(burst[i] >= burst[i - 1], "fade-in not monotonic at \(i)")
                #expect(burst[play - fade + i] <= burst[play - fade + i - 1], "fade-out not monotonic at \(i)")
            }
            #expect(burst[fade..<(play - fade)].allSatisfy { $0 == steady })
            #expect(burst[0] > 0 && burst[0] <= max(0.025 * 0.0001, sampleFormat.leastSignificantBit))
            #expect(burst[play - 1] > 0 && burst[play - 1] <= max(0.025 * 0.0001, sampleFormat.leastSignificantBit))
            // Halfway through the fade the raised cosine is at one half.
            #expect(abs(burst[fade / 2 - 1] - 0.0125) <= 0.025 * 0.001 + sampleFormat.leastSignificantBit)
            #expect(samples[(cycle * 36_000 + play)..<((cycle + 1) * 36_000)].allSatisfy { $0 == 0 })
        }
    }

    @Test("periodic sine fades without exceeding the volume, and restarts with a fade-in")
    func periodicSine() throws {
        let schedule = PlaySchedule(playFor: .milliseconds(200), pauseFor: .milliseconds(100), fade: .milliseconds(50))
        let format = SignalBench.format(.s16, rate: 48_000, channels: 2)
        let source = try SignalBench.source(.sine(frequency: 440), format, volume: 0.01, schedule: schedule)
        let first = SignalBench.samples(source, frames: 20_000)
        #expect(SignalBench.peak(first) <= 0.01 + 1.0 / 32768)
        source.restart()
        let again = SignalBench.samples(source, frames: 20_000)
        #expect(first == again)
    }

    // MARK: peek and consume

    @Test("loop source: zero copy, partial consume, wraparound, restart")
    func loopSemantics() throws {
        let format = SignalBench.format(.s16, rate: 48_000, channels: 2, period: 1000)
        let source = try #require(try SignalBench.source(.sine(frequency: 1000), format) as? LoopFrameSource)
        let loop = source.loop
        #expect(loop.frameCount == 1008)  // 21 cycles of 48 frames, at least a period
        var (pointer, frames) = source.peek(maximum: 100_000)
        #expect(pointer == loop.frames(from: 0) && frames == 1008)
        #expect(source.peek(maximum: 10).frames == 10)
        #expect(source.peek(maximum: 0).frames == 0)
        source.consume(1000)
        (pointer, frames) = source.peek(maximum: 100)
        #expect(pointer == loop.frames(from: 1000) && frames == 8)
        source.consume(3)
        (pointer, frames) = source.peek(maximum: 100)
        #expect(pointer == loop.frames(from: 1003) && frames == 5)
        source.consume(5)
        (pointer, frames) = source.peek(maximum: 100)
        #expect(pointer == loop.frames(from: 0) && frames == 100)
        source.consume(7)
        source.restart()
        #expect(source.peek(maximum: 1).pointer == loop.frames(from: 0))
    }

    @Test("generated source: repeated peeks offer the same frames from the scratch buffer")
    func generatedSemantics() throws {
        let format = SignalBench.format(.float32, rate: 48_000, channels: 3, period: 256)
        let source = try SignalBench.source(.pink, format)
        let (first, frames) = source.peek(maximum: 1000)
        #expect(frames == 256)
        let copy = Array(UnsafeRawBufferPointer(start: first, count: frames * format.bytesPerFrame))
        let (again, framesAgain) = source.peek(maximum: 1000)
        #expect(again == first && framesAgain == frames)
        #expect(Array(UnsafeRawBufferPointer(start: again, count: frames * format.bytesPerFrame)) == copy)
        source.consume(100)
        let (rest, restFrames) = source.peek(maximum: 1000)
        #expect(rest == first + 100 * format.bytesPerFrame && restFrames == 156)
        // Every channel carries the same value.
        let values = SignalBench.decode(copy, .float32)
        for frame in 0..<frames { #expect(values[frame * 3] == values[frame * 3 + 1] && values[frame * 3] == values[frame * 3 + 2]) }
    }

    @Test("the stream is the same whatever the peek sizes and partial consumes", arguments: [
        KeepAliveSignal.clip, .zero, .fluctuate(perSecond: 50), .fluctuate(perSecond: 7.123456789), .sine(frequency: 440),
        .sine(frequency: 1234.567), .white, .pink, .brown,
    ])
    func chunkingInvariance(_ signal: KeepAliveSignal) throws {
        for schedule in [nil, PlaySchedule(playFor: .milliseconds(30), pauseFor: .milliseconds(20), fade: .milliseconds(10))] {
            let format = SignalBench.format(.s24, rate: 48_000, channels: 2, period: 500)
            let whole = SignalBench.bytes(try SignalBench.source(signal, format, schedule: schedule), frames: 12_000, sizes: [100_000])
            let pieces = SignalBench.bytes(try SignalBench.source(signal, format, schedule: schedule), frames: 12_000,
                                           sizes: [1, 7, 499, 2, 1500, 333], partial: true)
            #expect(whole == pieces, "\(signal) \(schedule.map { "\($0)" } ?? "continuous")")
        }
    }

    @Test("steady state offers only buffers made at init", arguments: [
        KeepAliveSignal.clip, .zero, .fluctuate(perSecond: 50), .fluctuate(perSecond: 7.123456789), .sine(frequency: 440),
        .sine(frequency: 1234.567), .white, .pink, .brown,
    ])
    func noNewBuffers(_ signal: KeepAliveSignal) throws {
        let format = SignalBench.format(.s16, rate: 48_000, channels: 2, period: 1200)
        for schedule in [nil, PlaySchedule(playFor: .milliseconds(300), pauseFor: .milliseconds(200), fade: .milliseconds(50))] {
            let source = try SignalBench.source(signal, format, schedule: schedule)
            var outside = 0
            var frames = 0
            while frames < 480_000 {
                let (pointer, offered) = source.peek(maximum: 1500)
                if !source.holds(pointer, frames: offered) { outside += 1 }
                source.consume(offered)
                frames += offered
            }
            #expect(outside == 0, "\(signal): \(outside) offers outside the buffers made at init")
        }
    }
}
