/// Silence in a player's samples: every sample within two steps of 16-bit audio of zero (about
/// −84 dBFS), digital zero and the dither a player may add to it; anything louder is sound.
/// Read in place from the player's memory, sample by sample, without converting anything.
enum SampleSilence {
    /// Whether any of the `samples` at `start` (interleaved, in `format`) is above silence.
    static func sounds(_ start: UnsafeRawPointer, samples: Int, format: SampleFormat) -> Bool {
        switch format {
        case .s16:
            for index in 0..<samples {
                let value = start.loadUnaligned(fromByteOffset: index * 2, as: Int16.self)
                if value > 2 || value < -2 { return true }
            }
        case .s24:
            // The low three bytes of each word, sign-extended: the top byte is padding.
            for index in 0..<samples {
                let value = (start.loadUnaligned(fromByteOffset: index * 4, as: Int32.self) << 8) >> 8
                if value > 512 || value < -512 { return true }
            }
        case .s32:
            for index in 0..<samples {
                let value = start.loadUnaligned(fromByteOffset: index * 4, as: Int32.self)
                if value > 131_072 || value < -131_072 { return true }
            }
        case .float32:
            for index in 0..<samples {
                let value = start.loadUnaligned(fromByteOffset: index * 4, as: Float.self)
                // NaN is not silence either.
                if !(abs(value) <= 2 / 32768) { return true }
            }
        case .u8:
            // One step of 8 bits is above the threshold: only the midpoint is silence.
            for index in 0..<samples where start.load(fromByteOffset: index, as: UInt8.self) != 128 { return true }
        }
        return false
    }
}
