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
