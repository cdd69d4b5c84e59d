import CALSA

/// The sample formats the engine writes: the linear ones nearly every ALSA device or plug-in
/// accepts, and the packed 24-bit one many USB cards take natively.
///
/// The set is not closed: a release may add a format (``s24Packed`` was added after 0.2), so a `switch`
/// over it needs a `default`.
///
/// ```swift
/// let format = SampleFormat.s16
/// print(format, format.bytesPerSample)  // S16_LE 2
/// ```
public enum SampleFormat: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Signed 16-bit little-endian.
    case s16 = "S16_LE"
    /// Signed 24-bit little-endian in the low three bytes of a 32-bit word.
    case s24 = "S24_LE"
    /// Signed 32-bit little-endian.
    case s32 = "S32_LE"
    /// 32-bit IEEE float little-endian, full scale ±1.0.
    case float32 = "FLOAT_LE"
    /// Unsigned 8-bit, silence at 128.
    case u8 = "U8"
    /// Signed 24-bit little-endian packed in three bytes (ALSA's `S24_3LE`): a USB audio card's
    /// native 24-bit layout. Its least significant bit is a 24-bit one, as ``s24``'s.
    ///
    /// keepalived opens a device in it when a player asks for it (a carried player, or the format
    /// a player left the card in), or when the device takes no 24-bit format but this one for a
    /// 24-bit clip (``s24`` comes first: the two carry the same samples).
    case s24Packed = "S24_3LE"

    /// Bytes one sample takes in an interleaved buffer.
    public var bytesPerSample: Int {
        switch self {
        case .s16: 2
        case .s24Packed: 3
        case .s24, .s32, .float32: 4
        case .u8: 1
        }
    }

    /// The value of one least significant bit as a fraction of full scale. For float, the step of
    /// a 24-bit converter: the quietest value a DAC behind a float stream reliably reproduces.
    public var leastSignificantBit: Double {
        // Float's step is a 24-bit one: the resolution a float device converts to at best.
        self == .float32 ? 1 / KeepAlive.fullScale(bits: 24) : 1 / fullScale
    }

    /// The value a sample of full scale has in this format's integer steps (1 for float).
    var fullScale: Double {
        switch self {
        case .u8: KeepAlive.fullScale(bits: 8)
        case .s16: KeepAlive.fullScale(bits: 16)
        case .s24, .s24Packed: KeepAlive.fullScale(bits: 24)
        case .s32: KeepAlive.fullScale(bits: 32)
        case .float32: 1
        }
    }

    /// ALSA's name for the format: `S16_LE`, `FLOAT_LE`, ….
    public var description: String { rawValue }

    var alsaFormat: snd_pcm_format_t {
        switch self {
        case .s16: SND_PCM_FORMAT_S16_LE
        case .s24: SND_PCM_FORMAT_S24_LE
        case .s32: SND_PCM_FORMAT_S32_LE
        case .float32: SND_PCM_FORMAT_FLOAT_LE
        case .u8: SND_PCM_FORMAT_U8
        case .s24Packed: SND_PCM_FORMAT_S24_3LE
        }
    }

    init?(alsaFormat: snd_pcm_format_t) {
        guard let match = Self.allCases.first(where: { $0.alsaFormat == alsaFormat }) else { return nil }
        self = match
    }
}

/// Full scale of a signed integer sample of `bits` bits: 2^(bits - 1) steps (128 for 8-bit,
/// 32768 for 16-bit, …), the one definition every conversion divides or multiplies by.
func fullScale(bits: Int) -> Double {
    Double(1 << (bits - 1))
}
