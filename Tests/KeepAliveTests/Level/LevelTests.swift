import Testing
@testable import KeepAlive

@Suite("Levels and the ceiling")
struct LevelTests {
    @Test("parses linear and dB forms", arguments: [
        ("0.01", 0.01), ("1", 1.0), ("1e-3", 0.001), ("-40dB", 0.01), ("-40 dB", 0.01), ("-20dBFS", 0.1), ("0dB", 1.0), (" 0.05 ", 0.05),
    ])
    func parses(_ text: String, _ expected: Double) throws {
        #expect(abs(try Level(parsing: text).linear - expected) < 1e-12)
    }

    @Test("refuses what is not a level", arguments: [
        ("loud", LevelError.notANumber(text: "loud")), ("", .notANumber(text: "")), ("xdB", .notANumber(text: "xdB")),
        ("0", .outOfRange(text: "0")), ("-0.1", .outOfRange(text: "-0.1")), ("1.5", .outOfRange(text: "1.5")),
        ("3dB", .outOfRange(text: "3dB")), ("nan", .outOfRange(text: "nan")), ("inf", .outOfRange(text: "inf")),
    ])
    func refuses(_ text: String, _ error: LevelError) {
        #expect(throws: error) { try Level(parsing: text) }
    }

    @Test("a volume above the ceiling is refused, not clipped")
    func volumeAboveCeiling() throws {
        var configuration = KeepAliveConfiguration()
        configuration.defaults.volume = try Level(linear: 0.5)
        #expect(throws: KeepAliveConfigurationError.volumeAboveCeiling(volume: try Level(linear: 0.5), ceiling: .defaultCeiling)) {
            try configuration.validate()
        }
        #expect(KeepAliveConfigurationError.volumeAboveCeiling(volume: try Level(linear: 0.5), ceiling: .defaultCeiling).description.contains("ceiling"))
    }

    @Test("the configuration refuses empty, duplicate and out-of-range settings")
    func configurationRules() {
        #expect(throws: Never.self) { try KeepAliveConfiguration(devices: []).validate() }
        #expect(throws: KeepAliveConfigurationError.duplicateDevice("a")) { try KeepAliveConfiguration(devices: ["a", "a"]).validate() }
        #expect(throws: KeepAliveConfigurationError.emptyDeviceName) { try KeepAliveConfiguration(devices: [""]).validate() }
        #expect(throws: KeepAliveConfigurationError.periodsOutOfRange(1)) { try KeepAliveConfiguration(defaults: OutputConfiguration(periodsPerBuffer: 1)).validate() }
        #expect(throws: KeepAliveConfigurationError.bufferOutOfRange(.seconds(60))) { try KeepAliveConfiguration(defaults: OutputConfiguration(bufferDuration: .seconds(60))).validate() }
    }
}

@Suite("Quantizing to device samples")
struct QuantizerTests {
    @Test("the seed clip at 0.01 on a 16-bit device is exactly -1 in every sample")
    func seedClipIsMinusOne() {
        let format = OutputFormat(sampleFormat: .s16, sampleRate: 44100, channels: 2, bufferFrames: 88200, periodFrames: 22050)
        let loop = RenderedLoop(clip: .embedded, format: format, gain: .defaultVolume, ceiling: .defaultCeiling, minimumFrames: 22050)
        #expect(loop.frameCount >= 22050)
        for index in 0..<(loop.frameCount * 2) {
            let value = loop.frames(from: 0).load(fromByteOffset: index * 2, as: Int16.self)
            guard value == -1 else {
                Issue.record("sample \(index) is \(value)")
                return
            }
        }
    }

    @Test("a non-zero sample never rounds to zero: at least one LSB of its sign", arguments: SampleFormat.allCases)
    func neverSilent(_ format: SampleFormat) throws {
        let quantizer = SampleQuantizer(format: format, gain: try Level(linear: 0.001), ceiling: .defaultCeiling)
        let lsb = format == .float32 ? format.leastSignificantBit : 1
        #expect(quantizer.quantize(-1e-9) == -lsb)
        #expect(quantizer.quantize(1e-9) == lsb)
        #expect(quantizer.quantize(0) == 0)
    }

    @Test("no sample exceeds the ceiling, whatever the source", arguments: SampleFormat.allCases)
    func ceilingHolds(_ format: SampleFormat) throws {
        let ceiling = try Level(linear: 0.05)
        let quantizer = SampleQuantizer(format: format, gain: ceiling, ceiling: ceiling)
        var buffer = [UInt8](repeating: 0, count: 8)
        for x in stride(from: -1.0, through: 1.0, by: 0.001) + [Double.infinity, -Double.infinity, .nan, 1, -1] {
            buffer.withUnsafeMutableBytes { quantizer.store(x, at: $0.baseAddress!) }
            let back = buffer.withUnsafeBytes { SampleQuantizer.load(format, at: $0.baseAddress!) }
            #expect(abs(back) <= 0.05, "\(format) x=\(x) -> \(back)")
        }
    }

    @Test("U8 stores around the 128 midpoint")
    func unsignedMidpoint() {
        let quantizer = SampleQuantizer(format: .u8, gain: .defaultVolume, ceiling: .defaultCeiling)
        var byte: UInt8 = 0
        quantizer.store(-0.5, at: &byte)
        #expect(byte == 127)
    }

    @Test("a stereo 48 kHz device gets the mono clip on both channels at its own rate")
    func channelAndRateMapping() throws {
        var wav = WAVBuilder()
        wav.sampleRate = 24000
        wav.data = WAVBuilder.le16(UInt16(bitPattern: -16384)) + WAVBuilder.le16(UInt16(bitPattern: 16384))
        let clip = try Clip(wavBytes: wav.bytes)
        let format = OutputFormat(sampleFormat: .s16, sampleRate: 48000, channels: 2, bufferFrames: 4800, periodFrames: 1200)
        let loop = RenderedLoop(clip: clip, format: format, gain: try Level(linear: 0.05), ceiling: .defaultCeiling, minimumFrames: 1)
        #expect(loop.frameCount == 4)
        let samples = (0..<8).map { loop.frames(from: 0).load(fromByteOffset: $0 * 2, as: Int16.self) }
        #expect(samples[0] == samples[1])
        #expect(samples[0] == -819)
        #expect(samples[4] == 819)
        #expect(samples[2] == 0 || abs(Int(samples[2])) <= 1)
    }
}

@Suite("S24_3LE: 24-bit samples packed in three bytes")
struct PackedSampleTests {
    /// The three bytes `x` is stored as, at full gain under a full-scale ceiling.
    static func packed(_ x: Double, gain: Double = 1, ceiling: Double = 1) throws -> [UInt8] {
        let quantizer = SampleQuantizer(format: .s24Packed, gain: try Level(linear: gain), ceiling: try Level(linear: ceiling))
        var bytes = [UInt8](repeating: 0xAA, count: 4)
        bytes.withUnsafeMutableBytes { quantizer.store(x, at: $0.baseAddress!) }
        #expect(bytes[3] == 0xAA, "a sample is three bytes: the fourth is the next sample's")
        return Array(bytes[0..<3])
    }

    @Test("three bytes a sample, a 24-bit LSB, ALSA's S24_3LE")
    func layout() {
        #expect(SampleFormat.s24Packed.bytesPerSample == 3)
        #expect(SampleFormat.s24Packed.leastSignificantBit == SampleFormat.s24.leastSignificantBit)
        #expect(SampleFormat.s24Packed.description == "S24_3LE")
        #expect(SampleFormat(rawValue: "S24_3LE") == .s24Packed)
        #expect(SampleFormat(alsaFormat: SampleFormat.s24Packed.alsaFormat) == .s24Packed)
        #expect(OutputFormat(sampleFormat: .s24Packed, sampleRate: 96_000, channels: 6, bufferFrames: 4096, periodFrames: 1024).bytesPerFrame == 18)
    }

    @Test("bytes exact, least significant first, the sign in bit 23", arguments: [
        (1.0 / 8_388_608, [0x01, 0x00, 0x00]), (-1.0 / 8_388_608, [0xFF, 0xFF, 0xFF]),
        (Double(0x12_3456) / 8_388_608, [0x56, 0x34, 0x12]), (-Double(0x12_3456) / 8_388_608, [0xAA, 0xCB, 0xED]),
        (1e-12, [0x01, 0x00, 0x00]), (-1e-12, [0xFF, 0xFF, 0xFF]), (0, [0x00, 0x00, 0x00]),
        (1, [0xFF, 0xFF, 0x7F]), (-1, [0x00, 0x00, 0x80]), (256.0 / 8_388_608, [0x00, 0x01, 0x00]), (-256.0 / 8_388_608, [0x00, 0xFF, 0xFF]),
    ] as [(Double, [UInt8])])
    func bytes(_ x: Double, _ expected: [UInt8]) throws {
        #expect(try Self.packed(x) == expected, "\(x)")
    }

    @Test("reads back what it stored, sign included")
    func roundTrip() throws {
        for steps in [1, -1, 2, -2, 255, -255, 256, -256, 65_535, -65_536, 0x7F_FFFF, -0x80_0000, 0x12_3456, -0x12_3456] {
            let x = Double(steps) / 8_388_608
            let bytes = try Self.packed(x)
            let back = bytes.withUnsafeBytes { SampleQuantizer.load(.s24Packed, at: $0.baseAddress!) }
            #expect(back == x, "\(steps) steps stored as \(bytes), read as \(back * 8_388_608)")
        }
    }

    @Test("the ceiling holds in whole 24-bit steps")
    func ceiling() throws {
        // 0.05 of full scale is 419 430.4 steps: 419 430 at most, either sign.
        #expect(try Self.packed(1, gain: 0.05, ceiling: 0.05) == [0x66, 0x66, 0x06])
        #expect(try Self.packed(-1, gain: 0.05, ceiling: 0.05) == [0x9A, 0x99, 0xF9])
        for x in stride(from: -1.0, through: 1.0, by: 0.0001) + [.infinity, -.infinity, .nan] {
            let back = try Self.packed(x, gain: 0.05, ceiling: 0.05).withUnsafeBytes { SampleQuantizer.load(.s24Packed, at: $0.baseAddress!) }
            #expect(abs(back) <= 0.05, "\(x) -> \(back)")
        }
    }

    @Test("a frame's channels are three bytes apart, and nothing past them is written")
    func channels() throws {
        let quantizer = SampleQuantizer(format: .s24Packed, gain: try Level(linear: 1), ceiling: try Level(linear: 1))
        for channels in [1, 2, 6, 8] {
            var bytes = [UInt8](repeating: 0xAA, count: channels * 3 + 5)
            bytes.withUnsafeMutableBytes { quantizer.store(-2.0 / 8_388_608, channels: channels, at: $0.baseAddress!) }
            #expect(Array(bytes[0..<(channels * 3)]) == Array(repeating: [0xFE, 0xFF, 0xFF] as [UInt8], count: channels).flatMap { $0 })
            #expect(bytes[(channels * 3)...].allSatisfy { $0 == 0xAA }, "\(channels) channels")
        }
    }

    @Test("a rendered clip holds S24_LE's samples, each in its low three bytes", arguments: [2, 6, 8])
    func sameSamplesAsS24(_ channels: Int) throws {
        func loop(_ sampleFormat: SampleFormat) throws -> RenderedLoop {
            let format = OutputFormat(sampleFormat: sampleFormat, sampleRate: 96_000, channels: channels, bufferFrames: 8192, periodFrames: 2048)
            return RenderedLoop(clip: .embedded, format: format, gain: .defaultVolume, ceiling: .defaultCeiling, minimumFrames: 2048)
        }
        let wide = try loop(.s24), packed = try loop(.s24Packed)
        #expect(wide.frameCount == packed.frameCount)
        #expect(packed.bytesPerFrame == channels * 3)
        #expect(packed.peak(format: .s24Packed) <= Level.defaultCeiling.linear)
        #expect(packed.peak(format: .s24Packed) == wide.peak(format: .s24))
        for sample in 0..<(wide.frameCount * channels) {
            let word = wide.frames(from: 0).loadUnaligned(fromByteOffset: sample * 4, as: UInt32.self)
            let three = (0..<3).map { packed.frames(from: 0).load(fromByteOffset: sample * 3 + $0, as: UInt8.self) }
            guard three == [UInt8(word & 0xFF), UInt8(word >> 8 & 0xFF), UInt8(word >> 16 & 0xFF)] else {
                Issue.record("sample \(sample): S24_LE \(String(word, radix: 16)), S24_3LE \(three)")
                return
            }
        }
    }
}
