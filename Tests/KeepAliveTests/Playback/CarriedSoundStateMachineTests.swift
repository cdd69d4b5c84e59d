import Testing
@testable import KeepAlive

/// When a carried player's audio counts as sound and when as silence, without a player: every
/// event in every state.
@Suite("A carried player's sound and silence")
struct CarriedSoundStateMachineTests {
    let second: Int64 = 1_000_000_000

    @Test("a player's stream begins as sound, and silence needs the whole hold")
    func silenceAfterTheHold() {
        var sound = CarriedSoundStateMachine(startingAt: 10 * second)
        #expect(sound.looked(at: 10 * second) == .none)
        #expect(sound.looked(at: 11 * second - 1) == .none)
        #expect(sound.looked(at: 11 * second) == .silent)
        // Told once: later looks change nothing.
        #expect(sound.looked(at: 20 * second) == .none)
    }

    @Test("sound restarts the hold; silence copied is no event")
    func soundRestartsTheHold() {
        var sound = CarriedSoundStateMachine(startingAt: 0)
        #expect(sound.copied(sound: true, at: second / 2) == .none)
        #expect(sound.copied(sound: false, at: second) == .none)
        #expect(sound.looked(at: second + second / 4) == .none)
        #expect(sound.looked(at: second + second / 2) == .silent)
    }

    @Test("after silence, the first sound is told at once, and silence is timed from it")
    func soundAgain() {
        var sound = CarriedSoundStateMachine(startingAt: 0, hold: second)
        #expect(sound.looked(at: 2 * second) == .silent)
        #expect(sound.copied(sound: false, at: 3 * second) == .none)
        #expect(sound.copied(sound: true, at: 4 * second) == .sounding)
        #expect(sound.copied(sound: true, at: 4 * second + 1) == .none)
        #expect(sound.looked(at: 5 * second) == .none)
        #expect(sound.looked(at: 5 * second + 1) == .silent)
    }
}

/// Which samples are silence: digital zero and two steps of 16 bits below zero to just under two
/// above, in each format, whatever the block or the alignment they come in.
@Suite("Silence in a player's samples")
struct SampleSilenceTests {
    func sounds<T>(_ samples: [T], _ format: SampleFormat) -> Bool {
        samples.withUnsafeBytes { SampleSilence.sounds($0.baseAddress!, samples: samples.count, format: format) }
    }

    @Test("S16_LE: -2 to 1 is silence, 2 and -3 are sound")
    func s16() {
        #expect(!sounds([Int16](repeating: 0, count: 64), .s16))
        #expect(!sounds([Int16]([1, -2, 1, -1, 0, -2]), .s16))
        #expect(sounds([Int16](repeating: 0, count: 63) + [2], .s16))
        #expect(sounds([Int16]([0, -3]), .s16))
        #expect(sounds([Int16]([Int16.min]), .s16) && sounds([Int16]([Int16.max]), .s16))
    }

    @Test("S24_LE: the low three bytes, sign-extended; the padding byte is not sound")
    func s24() {
        #expect(!sounds([Int32]([0, 511, -512, 0x7F00_0000, Int32(bitPattern: 0xFF00_0000)]), .s24))
        #expect(!sounds([Int32]([Int32(bitPattern: 0x00FF_FE00)]), .s24))  // −512 without its sign byte
        #expect(sounds([Int32]([512]), .s24))
        #expect(sounds([Int32]([-513]), .s24))
        #expect(sounds([Int32]([0x0080_0000]), .s24))  // full scale negative in 24 bits
    }

    @Test("IEC 60958 subframes: the sample in bits 4-27, sign-extended; preambles, status and parity are not sound")
    func subframes() {
        let framer = IEC958Framer(sampleRate: 48000)
        func framed(_ values: [Int32]) -> [UInt32] { values.enumerated().map { framer.subframe($1, channel: $0 % 2, frameInBlock: $0 / 2 % 192) } }
        func sounds(_ words: [UInt32]) -> Bool { words.withUnsafeBytes { SampleSilence.subframesSound($0.baseAddress!, samples: words.count) } }
        // Frame 0's Z, status bits 2 and 30's, and parity on digital zero and on dither.
        #expect(!sounds(framed([0, 0, 511, -512, 1, -1] + [Int32](repeating: 0, count: 400))))
        #expect(!sounds([0xC000_0008, 0x8000_0004]))  // zero with the status and parity bits set
        #expect(sounds(framed([512])))
        #expect(sounds(framed([0, -513])))
        #expect(sounds(framed([-8_388_608])))  // full scale negative
    }

    @Test("S24_3LE: three bytes a sample, sign from the third; the same bounds as S24_LE")
    func s24Packed() {
        func packed(_ values: [Int32]) -> [UInt8] { values.flatMap { v in (0..<3).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } } }
        #expect(!packed([0, 511, -512, -1, 1]).withUnsafeBytes { SampleSilence.sounds($0.baseAddress!, samples: 5, format: .s24Packed) })
        #expect(packed([0, 512]).withUnsafeBytes { SampleSilence.sounds($0.baseAddress!, samples: 2, format: .s24Packed) })
        #expect(packed([-513]).withUnsafeBytes { SampleSilence.sounds($0.baseAddress!, samples: 1, format: .s24Packed) })
        #expect(packed([-0x80_0000]).withUnsafeBytes { SampleSilence.sounds($0.baseAddress!, samples: 1, format: .s24Packed) })
    }

    @Test("S32_LE: -131072 to 131071 is silence")
    func s32() {
        #expect(!sounds([Int32]([131_071, -131_072, 0]), .s32))
        #expect(sounds([Int32]([0, 131_072]), .s32))
        #expect(sounds([Int32]([-131_073]), .s32))
        #expect(sounds([Int32]([Int32.min]), .s32) && sounds([Int32]([Int32.max]), .s32))
    }

    @Test("FLOAT_LE: below two 16-bit steps; infinities and NaN are sound")
    func float() {
        #expect(!sounds([Float]([0, -0.0, 1.99 / 32768, -1.99 / 32768, .leastNonzeroMagnitude]), .float32))
        #expect(sounds([Float]([0, 2 / 32768]), .float32))
        #expect(sounds([Float]([-1]), .float32))
        #expect(sounds([Float]([.nan]), .float32) && sounds([Float]([-.infinity]), .float32))
    }

    @Test("U8: only the midpoint is silence")
    func u8() {
        #expect(!sounds([UInt8](repeating: 128, count: 16), .u8))
        #expect(sounds([UInt8]([128, 129]), .u8))
        #expect(sounds([UInt8]([127]), .u8))
    }

    @Test("sound in a later block, or at the very last sample, is found; no samples are silence")
    func blocks() {
        var samples = [Int16](repeating: 1, count: 3 * SampleSilence.blockSamples + 5)
        #expect(!sounds(samples, .s16))
        samples[samples.count - 1] = 100
        #expect(sounds(samples, .s16))
        #expect(!sounds([Int16](), .s16))
    }

    @Test("samples at an address not aligned to their size")
    func unaligned() {
        var bytes = [UInt8](repeating: 0, count: 4 * 9)
        #expect(!bytes.withUnsafeBytes { SampleSilence.sounds($0.baseAddress! + 1, samples: 8, format: .s32) })
        bytes[1 + 4 * 7 + 3] = 0x40  // the last sample's top byte
        #expect(bytes.withUnsafeBytes { SampleSilence.sounds($0.baseAddress! + 1, samples: 8, format: .s32) })
    }
}
