/// Silence in a player's samples: every sample from two steps of 16-bit audio below zero to just
/// under two above (about −84 dBFS), digital zero and the dither a player may add to it; anything
/// louder is sound. Read in place from the player's memory, without converting anything.
///
/// A silent write is read whole (a player holding the device open sends nothing else, at up to
/// 384 kHz), so each format's test is made of an add, a mask and a shift whose results are or-ed
/// over a block: a loop the compiler turns into vector instructions (about 0.1 ns a sample here,
/// a tenth of a comparison per sample). A block with sound ends the read, so music costs a block.
enum SampleSilence {
    /// Samples per block: the read stops at the first block with sound in it.
    static let blockSamples = 1024

    /// Whether any of the `samples` at `start` (interleaved, in `format`) is above silence.
    static func sounds(_ start: UnsafeRawPointer, samples: Int, format: SampleFormat) -> Bool {
        switch format {
        // Offset so that silence is 0 ..< 2^k: then nothing is left above bit k.
        case .s16: return any(start, samples) { (sample: UInt16) in (sample &+ 2) >> 2 }
        // The low three bytes of each word, sign-extended: the top byte is padding.
        case .s24: return any(start, samples) { (sample: UInt32) in (UInt32(bitPattern: (Int32(bitPattern: sample) << 8) >> 8) &+ 512) >> 10 }
        case .s24Packed: return anyPacked(start, samples)
        case .s32: return any(start, samples) { (sample: UInt32) in (sample &+ 131_072) >> 18 }
        // The magnitude's bits order as the magnitudes do (NaN's above every number's): below
        // the bound's, adding its complement to 2^31 leaves bit 31 clear.
        case .float32: return any(start, samples) { (sample: UInt32) in ((sample & 0x7FFF_FFFF) &+ (0x8000_0000 - Self.floatBound)) >> 31 }
        // One step of 8 bits is above the threshold: only the midpoint is silence.
        case .u8: return any(start, samples) { (sample: UInt8) in sample ^ 0x80 }
        }
    }

    /// Whether any of the `samples` IEC 60958 subframes (`IEC958_SUBFRAME_LE`) at `start` carries
    /// a sample above silence: the 24 bits at 4–27, sign-extended, tested as S24_LE's are.
    static func subframesSound(_ start: UnsafeRawPointer, samples: Int) -> Bool {
        any(start, samples) { (word: UInt32) in (UInt32(bitPattern: Int32(bitPattern: word << 4) >> 8) &+ 512) >> 10 }
    }

    /// The bits of two 16-bit steps as a float (2^-14).
    private static let floatBound = (2 / Float(32768)).bitPattern

    /// S24_3LE's test: as S24_LE's, each sample read from its three bytes into the top of a word
    /// and shifted down, sign-extended.
    @inline(__always)
    private static func anyPacked(_ start: UnsafeRawPointer, _ samples: Int) -> Bool {
        var index = 0
        while index < samples {
            let end = min(samples, index + blockSamples)
            var found: UInt32 = 0
            for at in index..<end {
                let word = UInt32(start.load(fromByteOffset: 3 * at, as: UInt8.self)) << 8
                    | UInt32(start.load(fromByteOffset: 3 * at + 1, as: UInt8.self)) << 16
                    | UInt32(start.load(fromByteOffset: 3 * at + 2, as: UInt8.self)) << 24
                found |= (UInt32(bitPattern: Int32(bitPattern: word) >> 8) &+ 512) >> 10
            }
            if found != 0 { return true }
            index = end
        }
        return false
    }

    /// Whether `measure` is non-zero for any sample, block by block.
    @inline(__always)
    private static func any<Word: FixedWidthInteger & UnsignedInteger>(_ start: UnsafeRawPointer, _ samples: Int, _ measure: (Word) -> Word) -> Bool {
        let aligned = Int(bitPattern: start) % MemoryLayout<Word>.alignment == 0
        var index = 0
        while index < samples {
            let end = min(samples, index + blockSamples)
            var found: Word = 0
            if aligned {
                let words = start.assumingMemoryBound(to: Word.self)
                for at in index..<end { found |= measure(Word(littleEndian: words[at])) }
            } else {
                for at in index..<end { found |= measure(Word(littleEndian: start.loadUnaligned(fromByteOffset: at * MemoryLayout<Word>.size, as: Word.self))) }
            }
            if found != 0 { return true }
            index = end
        }
        return false
    }
}
