import Glibc
import PropertyBased
import Testing
@testable import KeepAlive

/// One random output: a signal for a device format, at a volume under a ceiling, maybe in bursts.
struct SignalScenario: Sendable, CustomStringConvertible {
    var signal: KeepAliveSignal
    var format: OutputFormat
    var volume: Level
    var ceiling: Level
    var schedule: PlaySchedule?
    var clip: Clip
    var clipText: String
    var seed: UInt64

    var description: String {
        "\(signal) on \(format), volume \(volume.linear), ceiling \(ceiling.linear), \(schedule.map { "\($0)" } ?? "continuous"), clip \(clipText), seed \(seed)"
    }

    func source() throws -> (any FrameSource)? {
        try makeFrameSource(signal: signal, clip: clip, format: format, volume: volume, ceiling: ceiling, schedule: schedule, seed: seed)
    }
}

enum SignalGen {
    /// Any signal; a frequency from 1 Hz to 20 kHz (log-uniform), kept playable at the rate.
    static func signal(_ kind: Int, _ logFrequency: Double, rate: Int) -> KeepAliveSignal {
        let frequency = pow(10, logFrequency)
        switch kind {
        case 0: return .clip
        case 1: return .zero
        case 2: return .fluctuate(perSecond: min(frequency, Double(rate)))
        case 3: return .sine(frequency: min(frequency, Double(rate) * 0.49))
        case 4: return .white
        case 5: return .pink
        case 6: return .brown
        default: return .openOnly
        }
    }

    /// A clip of 1 to 32 frames in any encoding, channel count and rate the decoder takes, with
    /// samples anywhere in full scale, the extremes included; float clips also hold values past
    /// full scale, infinities and NaN.
    static func clip(encoding: Int, channels: Int, rate: Int, frames: Int, seed: UInt64) -> (Clip, String) {
        let (tag, bits): (UInt16, Int) = [(1, 8), (1, 16), (1, 24), (1, 32), (3, 32), (3, 64)][encoding]
        var random = NoiseRandom(seed: seed)
        var data: [UInt8] = []
        for index in 0..<(frames * channels) {
            let draw = random.next()
            let extreme = draw % 7 == 0
            let unit = extreme ? (draw & 8 == 0 ? 1.0 : -1.0) : Double(Int64(bitPattern: draw) >> 11) * 0x1p-52
            switch (tag, bits) {
            case (1, 8):
                data.append(UInt8(clamping: Int((unit * 128).rounded(.down)) + 128))
            case (1, 16):
                data += WAVBuilder.le16(UInt16(bitPattern: Int16(clamping: Int((unit * 32768).rounded(.down)))))
            case (1, 24):
                let value = UInt32(bitPattern: Int32(clamping: Int((unit * 8_388_608).rounded(.down))).clamped24)
                data += [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF)]
            case (1, _):
                data += WAVBuilder.le32(UInt32(bitPattern: Int32(clamping: Int((unit * 2_147_483_648).rounded(.down)))))
            case (_, 32):
                let special: [Float] = [.nan, .infinity, -.infinity, 3, -3]
                let value = index % 11 == 5 ? special[Int(draw % 5)] : Float(unit)
                data += WAVBuilder.le32(value.bitPattern)
            default:
                let special: [Double] = [.nan, .infinity, -.infinity, 3, -3]
                let value = index % 11 == 5 ? special[Int(draw % 5)] : unit
                data += WAVBuilder.le32(UInt32(truncatingIfNeeded: value.bitPattern)) + WAVBuilder.le32(UInt32(truncatingIfNeeded: value.bitPattern >> 32))
            }
        }
        var wav = WAVBuilder()
        wav.formatTag = tag
        wav.bitsPerSample = UInt16(bits)
        wav.channels = UInt16(channels)
        wav.sampleRate = UInt32(rate)
        wav.data = data
        do {
            return (try Clip(wavBytes: wav.bytes), "\(tag == 1 ? "PCM" : "float") \(bits)-bit \(channels) ch \(rate) Hz \(frames) frames")
        } catch {
            fatalError("test clip did not decode: \(error)")
        }
    }

    static let scenario = zip(
        zip(Gen.int(in: 0...7), Gen.double(in: 0...4.3)),
        zip(Gen<SampleFormat>.case, Gen.int(in: 8000...384_000), Gen.int(in: 1...8), Gen.int(in: 1...3000)),
        zip(Gen.int(in: 0...2), Gen.element(of: [0.05, 0.01, 0.1, 1, 0.3, 0.001, 0.0078125]), Gen.double(in: -7...0), Gen.double(in: -3...0)),
        zip(Gen.int(in: 1...40), Gen.int(in: 1...40), Gen.double(in: 0...0.5)).optional,
        zip(Gen.int(in: 0...5), Gen.int(in: 1...8), Gen.int(in: 8000...384_000), Gen.int(in: 1...32)),
        Gen.uint64()
    ).map { signal, device, levels, schedule, clip, seed in
        let (sampleFormat, rate, channels, period) = device
        let format = OutputFormat(sampleFormat: sampleFormat, sampleRate: rate, channels: channels,
                                  bufferFrames: period * 4, periodFrames: period)
        // A ceiling a person would pick (one case in three) or anything from 1e-7 (under one LSB of
        // every integer format) to full scale; the volume up to it, exactly at it one case in
        // three (where a float sample could round above it).
        let (mode, common, ceilingExponent, volumeExponent) = levels
        let ceiling = Level(uncheckedLinear: mode == 0 ? common! : pow(10, ceilingExponent))
        let volume = mode == 1 ? ceiling : Level(uncheckedLinear: ceiling.linear * pow(10, volumeExponent))
        let playSchedule = schedule.map { play, pause, fade in
            PlaySchedule(playFor: .milliseconds(play), pauseFor: .milliseconds(pause), fade: .milliseconds(Double(play) * fade))
        }
        let (decoded, text) = Self.clip(encoding: clip.0, channels: clip.1, rate: clip.2, frames: clip.3, seed: seed)
        return SignalScenario(
            signal: Self.signal(signal.0, signal.1, rate: rate), format: format, volume: volume, ceiling: ceiling,
            schedule: playSchedule, clip: decoded, clipText: text, seed: seed)
    }
}

extension Int32 {
    /// The value clamped into 24-bit range, in the low three bytes' two's complement.
    fileprivate var clamped24: Int32 { Swift.min(Swift.max(self, -8_388_608), 8_388_607) & 0xFF_FFFF }
}

@Suite("Signal properties")
struct SignalPropertyTests {
    /// Reads `frames` frames with peeks of varying size; calls `check` with each sample.
    static func read(_ source: any FrameSource, frames: Int, seed: UInt64, _ check: (Double) -> Void) {
        let sampleFormat = source.format.sampleFormat
        let width = sampleFormat.bytesPerSample
        let samplesPerFrame = source.format.channels
        var random = NoiseRandom(seed: seed ^ 0x5EED)
        var done = 0
        while done < frames {
            let asked = Int(random.next() % 5000) + 1
            let (pointer, offered) = source.peek(maximum: min(asked, frames - done))
            for index in 0..<(offered * samplesPerFrame) { check(SampleQuantizer.load(sampleFormat, at: pointer + index * width)) }
            source.consume(offered)
            done += offered
        }
    }

    @Test("no sample above the ceiling, ever: any signal, level, format, rate, channels, clip and schedule")
    func ceilingHolds() async {
        await propertyCheck(count: 300, input: SignalGen.scenario) { scenario in
            let source: (any FrameSource)?
            do { source = try scenario.source() } catch {
                Issue.record("\(scenario) refused: \(error)")
                return
            }
            guard let source else {
                #expect(scenario.signal == .openOnly)
                return
            }
            // Long enough for several bursts and fades of the schedule, bounded for 384 kHz 8 ch.
            let frames = min(max(scenario.format.sampleRate / 10, 4000), 24_000)
            var peak = 0.0
            Self.read(source, frames: frames, seed: scenario.seed) { peak = max(peak, abs($0)) }
            #expect(peak <= scenario.ceiling.linear, "\(scenario): peak \(peak)")
            // Each signal's own level rule, on top of the ceiling.
            let lsb = scenario.format.sampleFormat.leastSignificantBit
            switch scenario.signal.kind {
            case .zero:
                #expect(peak == 0, "\(scenario): zero played \(peak)")
            case .fluctuate:
                #expect(peak <= lsb, "\(scenario): fluctuate reached \(peak)")
            case .white, .pink, .brown:
                #expect(peak <= max(scenario.volume.linear, lsb), "\(scenario): noise reached \(peak)")
            case .sine:
                #expect(peak <= scenario.volume.linear + lsb, "\(scenario): sine reached \(peak)")
            default:
                break
            }
        }
    }

    @Test("the stream does not depend on how the device takes it")
    func chunkingInvariance() async {
        await propertyCheck(count: 60, input: SignalGen.scenario) { scenario in
            guard let whole = try? scenario.source(), let pieces = try? scenario.source() else { return }
            let frames = 3000
            var a: [Double] = [], b: [Double] = []
            a.reserveCapacity(frames * scenario.format.channels)
            b.reserveCapacity(frames * scenario.format.channels)
            var done = 0
            while done < frames {
                let (pointer, offered) = whole.peek(maximum: frames - done)
                for index in 0..<(offered * scenario.format.channels) {
                    a.append(SampleQuantizer.load(scenario.format.sampleFormat, at: pointer + index * scenario.format.sampleFormat.bytesPerSample))
                }
                whole.consume(offered)
                done += offered
            }
            var random = NoiseRandom(seed: scenario.seed)
            done = 0
            while done < frames {
                let (pointer, offered) = pieces.peek(maximum: min(Int(random.next() % 700) + 1, frames - done))
                // A device that takes only part of what it is offered, now and then.
                let taken = random.next() % 3 == 0 ? Int(random.next() % UInt64(offered)) : offered
                for index in 0..<(taken * scenario.format.channels) {
                    b.append(SampleQuantizer.load(scenario.format.sampleFormat, at: pointer + index * scenario.format.sampleFormat.bytesPerSample))
                }
                pieces.consume(taken)
                done += taken
            }
            #expect(a == b, "\(scenario)")
        }
    }
}
