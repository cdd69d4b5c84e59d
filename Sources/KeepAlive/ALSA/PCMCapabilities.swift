import CALSA

/// What a PCM's device can be opened in: the sample formats, rates and channel counts its
/// configuration space allows, read from an open handle without changing its setup (a refine of
/// a fresh copy of the space). A carried player's PCM offers exactly these.
///
/// ```swift
/// if let capabilities = pcm.capabilities(), capabilities.rates.contains(44100) { print("takes 44.1 kHz") }
/// ```
package struct PCMCapabilities: Sendable, Equatable {
    /// alsa-lib's format numbers (`snd_pcm_format_t`) the device takes, of those a carried player may use.
    package var formats: [Int32]
    package var rates: [Int]
    package var channels: ClosedRange<Int>

    /// The rates a player may ask for, when the device takes them.
    static let standardRates = [8000, 11025, 16000, 22050, 32000, 44100, 48000, 64000, 88200, 96000, 176400, 192000, 352800, 384000]
    /// The linear formats a player's samples are carried in, unchanged.
    static let carriedFormats: [snd_pcm_format_t] = [
        SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_S24_LE, SND_PCM_FORMAT_S32_LE, SND_PCM_FORMAT_S24_3LE, SND_PCM_FORMAT_FLOAT_LE,
    ]

    package init(formats: [Int32], rates: [Int], channels: ClosedRange<Int>) {
        self.formats = formats
        self.rates = rates
        self.channels = channels
    }

    init?(pcm: OpaquePointer) {
        var allocated: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&allocated) == 0, let params = allocated else { return nil }
        defer { snd_pcm_hw_params_free(params) }
        guard snd_pcm_hw_params_any(pcm, params) >= 0 else { return nil }
        formats = Self.carriedFormats.filter { snd_pcm_hw_params_test_format(pcm, params, $0) == 0 }.map { Int32($0.rawValue) }
        // A device that takes IEC 60958 subframes and no linear format (a Raspberry Pi's HDMI):
        // the player's PCM frames its samples into them, in blocks that follow keepalived's.
        if formats.isEmpty, snd_pcm_hw_params_test_format(pcm, params, SND_PCM_FORMAT_IEC958_SUBFRAME_LE) == 0 {
            formats = [Int32(SND_PCM_FORMAT_IEC958_SUBFRAME_LE.rawValue)]
        }
        rates = Self.standardRates.filter { snd_pcm_hw_params_test_rate(pcm, params, UInt32($0), 0) == 0 }
        var low: UInt32 = 0
        var high: UInt32 = 0
        guard snd_pcm_hw_params_get_channels_min(params, &low) == 0, snd_pcm_hw_params_get_channels_max(params, &high) == 0,
              low >= 1, high >= low else { return nil }
        channels = Int(low)...Int(min(high, 64))
    }
}
