import CALSA
import Glibc

/// The hardware parameters of one open PCM, settled in two steps: the sample format, rate and
/// channels first (the signal is rendered for them), then the buffer, whose shape depends on how
/// the output will play (a streaming buffer, or a ring the signal tiles exactly).
///
/// ```swift
/// let negotiation = try HardwareNegotiation(pcm: handle, format: .s16, rate: 48000, channels: 2)
/// let format = try negotiation.commitStreaming(bufferMicroseconds: 2_000_000, periods: 2)
/// ```
///
/// Made and used at open, on the playback thread; the parameter block is allocated here (the
/// ALSA `alloca` macros are only a convenience for C).
final class HardwareNegotiation {
    private let pcm: OpaquePointer
    private let params: OpaquePointer
    let sampleFormat: SampleFormat
    let framing: OutputFraming
    let rate: Int
    let channels: Int

    /// Settles access, format, channels and rate: the wanted ones when the device takes them,
    /// else the nearest it offers (see ``SampleFormat/preferenceOrder(startingWith:)``). A device
    /// that takes no sample format of keepalived's but IEC 60958 subframes (a Raspberry Pi's
    /// HDMI, and a plug over it in alsa-lib before 1.2.12, which cannot convert to subframes and
    /// offers only them) is given 24-bit samples framed as subframes by keepalived.
    init(pcm: OpaquePointer, format wanted: SampleFormat, rate wantedRate: Int, channels wantedChannels: Int) throws(ALSAError) {
        var allocated: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&allocated) == 0, let allocated else { throw ALSAError(code: -ENOMEM, operation: "hw_params") }
        self.pcm = pcm
        self.params = allocated
        var result = snd_pcm_hw_params_any(pcm, params)
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params") }
        // Resampling inside alsa-lib would cost CPU on every write; the engine renders the signal
        // at the device's own rate once instead.
        snd_pcm_hw_params_set_rate_resample(pcm, params, 0)
        result = snd_pcm_hw_params_set_access(pcm, params, SND_PCM_ACCESS_RW_INTERLEAVED)
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params (interleaved access)") }
        let params = allocated
        let format: SampleFormat
        let framing: OutputFraming
        if let linear = wanted.preferenceOrder.first(where: { snd_pcm_hw_params_test_format(pcm, params, $0.alsaFormat) == 0 }) {
            (format, framing) = (linear, .linear)
            result = snd_pcm_hw_params_set_format(pcm, params, format.alsaFormat)
        } else if snd_pcm_hw_params_test_format(pcm, params, SND_PCM_FORMAT_IEC958_SUBFRAME_LE) == 0 {
            (format, framing) = (.s24, .iec958)
            result = snd_pcm_hw_params_set_format(pcm, params, SND_PCM_FORMAT_IEC958_SUBFRAME_LE)
        } else {
            throw ALSAError(code: -EINVAL, operation: "hw_params (no supported sample format)")
        }
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params (format)") }
        // IEC 60958 carries channels in pairs: a mono signal is framed on both of them (a plug
        // asked for one channel would convert subframes as samples: alsa-lib refuses at commit).
        var channels = UInt32(framing == .iec958 ? max(wantedChannels, 2) : wantedChannels)
        result = snd_pcm_hw_params_set_channels_near(pcm, params, &channels)
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params (channels)") }
        var rate = UInt32(wantedRate)
        result = snd_pcm_hw_params_set_rate_near(pcm, params, &rate, nil)
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params (rate)") }
        sampleFormat = format
        self.framing = framing
        self.channels = Int(channels)
        self.rate = Int(rate)
    }

    deinit { snd_pcm_hw_params_free(params) }

    /// Whether the driver copies audio out itself, only the frames written since its last look
    /// (an indirect driver, such as a Raspberry Pi's headphone jack, bcm2835, which hands its
    /// firmware what the application's pointer advanced over): its ring is not replayed, so the
    /// ring loop must not be used. Batch drivers alone (`SNDRV_PCM_INFO_BATCH`, USB audio) do
    /// replay their ring: the flag says only that the position moves in steps. alsa-lib carries
    /// the driver's flags up through its plug-ins.
    var isIndirect: Bool { calsa_hw_params_is_indirect(params) != 0 }

    /// The format so far, with a provisional buffer and period: what a signal is rendered for
    /// before the buffer is known.
    var provisionalFormat: OutputFormat {
        let period = max(1, min(rate / 4, 16_384))
        return OutputFormat(sampleFormat: sampleFormat, sampleRate: rate, channels: channels, bufferFrames: period * 2, periodFrames: period, framing: framing)
    }

    /// Whether the device can run without an interrupt per period (HDA can; most USB cannot).
    var canDisablePeriodWakeup: Bool { snd_pcm_hw_params_can_disable_period_wakeup(params) != 0 }

    /// A buffer near `bufferMicroseconds` in about `periods` periods; the stream is committed.
    func commitStreaming(bufferMicroseconds: Int, periods: Int) throws(ALSAError) -> OutputFormat {
        var bufferTime = UInt32(bufferMicroseconds)
        var result = snd_pcm_hw_params_set_buffer_time_near(pcm, params, &bufferTime, nil)
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params (buffer)") }
        var periodTime = bufferTime / UInt32(max(periods, 1))
        result = snd_pcm_hw_params_set_period_time_near(pcm, params, &periodTime, nil)
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params (period)") }
        return try commit()
    }

    /// The largest ring of at most `maximumFrames` that is a whole number of `cycleFrames` (so the
    /// signal loops in it without a seam), in two periods, with period interrupts off where the
    /// device allows; nil when the device offers no such buffer (the stream is then not
    /// committed, and ``commitStreaming(bufferMicroseconds:periods:)`` may follow).
    func commitRing(cycleFrames: Int, maximumFrames: Int) throws(ALSAError) -> OutputFormat? {
        var maximum = snd_pcm_uframes_t(0)
        guard snd_pcm_hw_params_get_buffer_size_max(params, &maximum) >= 0 else { return nil }
        let limit = min(Int(maximum), maximumFrames)
        guard cycleFrames >= 1, limit >= cycleFrames else { return nil }
        var trial: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&trial) == 0, let trial else { return nil }
        defer { snd_pcm_hw_params_free(trial) }
        // Try whole multiples of the cycle from the largest down; devices constrain buffers to
        // steps (HDA: 128 bytes), so the first fit is usually within a few tries.
        var multiple = limit / cycleFrames
        var tries = 0
        while multiple >= 1, tries < 256 {
            defer { multiple -= 1; tries += 1 }
            let frames = multiple * cycleFrames
            snd_pcm_hw_params_copy(trial, params)
            if canDisablePeriodWakeup { _ = snd_pcm_hw_params_set_period_wakeup(pcm, trial, 0) }
            guard snd_pcm_hw_params_set_buffer_size(pcm, trial, snd_pcm_uframes_t(frames)) >= 0 else { continue }
            // The longest period the ring allows: where interrupts cannot be switched off, the
            // kernel then wakes as rarely as it can.
            var periods = UInt32(2)
            guard snd_pcm_hw_params_set_periods_near(pcm, trial, &periods, nil) >= 0 else { continue }
            snd_pcm_hw_params_copy(params, trial)
            return try commit()
        }
        return nil
    }

    private func commit() throws(ALSAError) -> OutputFormat {
        let result = snd_pcm_hw_params(pcm, params)
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params") }
        var buffer = snd_pcm_uframes_t(0)
        var period = snd_pcm_uframes_t(0)
        snd_pcm_hw_params_get_buffer_size(params, &buffer)
        snd_pcm_hw_params_get_period_size(params, &period, nil)
        return OutputFormat(sampleFormat: sampleFormat, sampleRate: rate, channels: channels,
                            bufferFrames: Int(buffer), periodFrames: max(1, Int(period)), framing: framing)
    }
}

extension SampleFormat {
    /// The formats to try on a device, this one first, then the others by distance in bits,
    /// more resolution before less on a tie, and integer before float for an integer source
    /// (a float source prefers float). ``SampleFormat/s24Packed`` ties with ``SampleFormat/s24``
    /// and comes after it (the last of `allCases`): the 32-bit container is what a card's own
    /// DMA takes on HDA and most PCI and SoC cards; the packed one is a USB card's natural
    /// layout, and a USB card that takes no `S24_LE` gets a 24-bit clip in it rather than in 16
    /// bits, and is opened at all where it takes nothing else.
    ///
    /// ```swift
    /// SampleFormat.s24.preferenceOrder   // [.s24, .s24Packed, .s32, .float32, .s16, .u8]
    /// ```
    var preferenceOrder: [SampleFormat] {
        let bits = resolutionBits
        let others = Self.allCases.enumerated().filter { $0.element != self }.map { index, candidate -> (SampleFormat, Int) in
            var distance = abs(candidate.resolutionBits - bits) * 4
            if candidate.resolutionBits < bits { distance += 2 }
            if (candidate == .float32) != (self == .float32) { distance += 1 }
            // Ties keep allCases' order.
            return (candidate, distance * 16 + index)
        }
        return [self] + others.sorted { $0.1 < $1.1 }.map(\.0)
    }

    /// Bits of resolution, as the preference order counts them (float as 32).
    private var resolutionBits: Int {
        switch self {
        case .u8: 8
        case .s16: 16
        case .s24, .s24Packed: 24
        case .s32, .float32: 32
        }
    }
}
