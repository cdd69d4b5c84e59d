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

/// Which samples are silence: digital zero and up to two steps of 16 bits, in each format.
@Suite("Silence in a player's samples")
struct SampleSilenceTests {
    func sounds<T>(_ samples: [T], _ format: SampleFormat) -> Bool {
        samples.withUnsafeBytes { SampleSilence.sounds($0.baseAddress!, samples: samples.count, format: format) }
    }

    @Test("S16_LE: ±2 is silence, ±3 is sound")
    func s16() {
        #expect(!sounds([Int16](repeating: 0, count: 64), .s16))
        #expect(!sounds([Int16]([2, -2, 1, -1, 0, 2]), .s16))
        #expect(sounds([Int16](repeating: 0, count: 63) + [3], .s16))
        #expect(sounds([Int16]([0, -3]), .s16))
    }

    @Test("S24_LE: the low three bytes, sign-extended; the padding byte is not sound")
    func s24() {
        #expect(!sounds([Int32]([0, 512, -512, 0x7F00_0000, Int32(bitPattern: 0xFF00_0000)]), .s24))
        #expect(!sounds([Int32]([Int32(bitPattern: 0x00FF_FE00)]), .s24))  // −512 without its sign byte
        #expect(sounds([Int32]([513]), .s24))
        #expect(sounds([Int32]([0x0080_0000]), .s24))  // full scale negative in 24 bits
    }

    @Test("S32_LE: ±131072 is silence")
    func s32() {
        #expect(!sounds([Int32]([131_072, -131_072, 0]), .s32))
        #expect(sounds([Int32]([0, 131_073]), .s32))
        #expect(sounds([Int32]([Int32.min]), .s32))
    }

    @Test("FLOAT_LE: two 16-bit steps; NaN is sound")
    func float() {
        #expect(!sounds([Float]([0, -0.0, 2 / 32768, -2 / 32768]), .float32))
        #expect(sounds([Float]([0, 3 / 32768]), .float32))
        #expect(sounds([Float]([.nan]), .float32))
    }

    @Test("U8: only the midpoint is silence")
    func u8() {
        #expect(!sounds([UInt8](repeating: 128, count: 16), .u8))
        #expect(sounds([UInt8]([128, 129]), .u8))
        #expect(sounds([UInt8]([0]), .u8))
    }

    @Test("no samples: silence")
    func empty() {
        #expect(!sounds([Int16](), .s16))
    }
}
