/// Turns fractions of full scale into device samples under the engine's two level rules.
///
/// - Nothing non-zero becomes silence: a source sample that is not zero comes out as at least one
///   LSB of the same sign, because many receivers treat digital zero as "no signal" and sleep.
/// - Nothing exceeds the ceiling: every output sample's magnitude is at most `ceiling` of full
///   scale, whatever the gain, the source or the format.
struct SampleQuantizer {
    let format: SampleFormat
    let gain: Double
    /// The largest magnitude allowed, in the format's integer steps (or full-scale units for float).
    private var ceilingSteps: Double
    private let fullScale: Double

    init(format: SampleFormat, gain: Level, ceiling: Level) {
        self.format = format
        self.gain = gain.linear
        fullScale = format.fullScale
        ceilingSteps = format == .float32 ? ceiling.linear : (ceiling.linear * fullScale).rounded(.down)
    }

    /// A quantizer that also keeps every sample at or under `peak` (for signals whose requested
    /// level is a peak that must not be exceeded, like noise), on top of the ceiling. On integer
    /// formats the peak is rounded down to a whole step, but never below one step (while the
    /// ceiling allows one): a level under one LSB still plays as ±1 LSB rather than silence.
    ///
    /// ```swift
    /// let q = SampleQuantizer(format: .s16, gain: volume, ceiling: .defaultCeiling, peak: volume)
    /// ```
    init(format: SampleFormat, gain: Level, ceiling: Level, peak: Level) {
        self.init(format: format, gain: gain, ceiling: ceiling)
        let peakSteps = format == .float32 ? peak.linear : max((peak.linear * fullScale).rounded(.down), 1)
        ceilingSteps = min(ceilingSteps, peakSteps)
    }

    /// The device value for a source fraction `x` in [-1, 1], as a signed integer step count, or
    /// for float the float value itself.
    func quantize(_ x: Double) -> Double {
        guard x != 0, x.isFinite else { return 0 }
        let sign: Double = x < 0 ? -1 : 1
        if format == .float32 {
            let minimum = format.leastSignificantBit
            let magnitude = min(max(abs(x * gain), minimum), ceilingSteps)
            // Rounding to Float may land a hair above the limit (Float(0.05) > 0.05): take the
            // float just under it, so the stored sample, not only the Double, obeys the ceiling.
            var stored = Float(magnitude)
            if Double(stored) > ceilingSteps { stored = stored.nextDown }
            return sign * Double(stored)
        }
        // A ceiling under one step leaves no audible-or-not value to play but zero.
        guard ceilingSteps >= 1 else { return 0 }
        let magnitude = max((abs(x * gain) * fullScale).rounded(), 1)
        return sign * min(magnitude, ceilingSteps, sign < 0 ? fullScale : fullScale - 1)
    }

    /// Writes the quantized value of `x` at `pointer` in the device's byte layout.
    func store(_ x: Double, at pointer: UnsafeMutableRawPointer) {
        let value = quantize(x)
        switch format {
        case .s16:
            pointer.storeBytes(of: Int16(value).littleEndian, as: Int16.self)
        case .s24, .s32:
            pointer.storeBytes(of: Int32(value).littleEndian, as: Int32.self)
        case .float32:
            pointer.storeBytes(of: Float(value).bitPattern.littleEndian, as: UInt32.self)
        case .u8:
            pointer.storeBytes(of: UInt8(Int(value) + 128), as: UInt8.self)
        case .s24Packed:
            Self.storePacked(Int32(value), at: pointer)
        }
    }

    /// Writes the quantized value of `x` into each of `channels` consecutive samples from
    /// `pointer` (one interleaved frame carrying the same value on every channel). Quantizes once.
    func store(_ x: Double, channels: Int, at pointer: UnsafeMutableRawPointer) {
        let value = quantize(x)
        switch format {
        case .s16:
            let sample = Int16(value).littleEndian
            for channel in 0..<channels { pointer.storeBytes(of: sample, toByteOffset: channel * 2, as: Int16.self) }
        case .s24, .s32:
            let sample = Int32(value).littleEndian
            for channel in 0..<channels { pointer.storeBytes(of: sample, toByteOffset: channel * 4, as: Int32.self) }
        case .float32:
            let sample = Float(value).bitPattern.littleEndian
            for channel in 0..<channels { pointer.storeBytes(of: sample, toByteOffset: channel * 4, as: UInt32.self) }
        case .u8:
            let sample = UInt8(Int(value) + 128)
            for channel in 0..<channels { pointer.storeBytes(of: sample, toByteOffset: channel, as: UInt8.self) }
        case .s24Packed:
            let sample = Int32(value)
            for channel in 0..<channels { Self.storePacked(sample, at: pointer + channel * 3) }
        }
    }

    /// Stores the low 24 bits of `sample` (two's complement, so the sign is bit 23) in three
    /// bytes, least significant first: an `S24_3LE` sample, at any alignment.
    @inline(__always)
    private static func storePacked(_ sample: Int32, at pointer: UnsafeMutableRawPointer) {
        let bits = UInt32(bitPattern: sample)
        pointer.storeBytes(of: UInt8(truncatingIfNeeded: bits), as: UInt8.self)
        pointer.storeBytes(of: UInt8(truncatingIfNeeded: bits >> 8), toByteOffset: 1, as: UInt8.self)
        pointer.storeBytes(of: UInt8(truncatingIfNeeded: bits >> 16), toByteOffset: 2, as: UInt8.self)
    }

    /// Reads a stored sample back as a fraction of full scale (for tests and peak reporting).
    static func load(_ format: SampleFormat, at pointer: UnsafeRawPointer) -> Double {
        switch format {
        case .s16: Double(Int16(littleEndian: pointer.loadUnaligned(as: Int16.self))) / format.fullScale
        case .s24, .s32: Double(Int32(littleEndian: pointer.loadUnaligned(as: Int32.self))) / format.fullScale
        case .float32: Double(Float(bitPattern: UInt32(littleEndian: pointer.loadUnaligned(as: UInt32.self))))
        case .u8: Double(Int(pointer.load(as: UInt8.self)) - 128) / format.fullScale
        case .s24Packed:
            // The three bytes into the top of a word, then an arithmetic shift: bit 23 is the sign.
            Double(Int32(bitPattern: UInt32(pointer.load(as: UInt8.self)) << 8 | UInt32(pointer.load(fromByteOffset: 1, as: UInt8.self)) << 16
                | UInt32(pointer.load(fromByteOffset: 2, as: UInt8.self)) << 24) >> 8) / format.fullScale
        }
    }
}
