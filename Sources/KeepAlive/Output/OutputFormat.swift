/// What an output device agreed to play, as negotiated when it opened.
///
/// ```swift
/// if let format = manager.outputs.first?.format {
///     print(format)  // S16_LE 44100 Hz 1 ch, buffer 88200 frames, period 44100 frames
/// }
/// ```
public struct OutputFormat: Sendable, Equatable, CustomStringConvertible {
    /// The sample format written to the device.
    public var sampleFormat: SampleFormat
    /// Frames per second.
    public var sampleRate: Int
    /// Interleaved channels per frame.
    public var channels: Int
    /// The device buffer, in frames.
    public var bufferFrames: Int
    /// The period (the amount written per wakeup), in frames.
    public var periodFrames: Int
    /// How the samples are carried: ``OutputFraming/linear``, or inside IEC 60958 subframes
    /// (``OutputFraming/iec958``, with ``sampleFormat`` ``SampleFormat/s24``) on a device that
    /// takes nothing else.
    public var framing: OutputFraming

    /// A format with every field given; the engine makes these when a device opens.
    public init(sampleFormat: SampleFormat, sampleRate: Int, channels: Int, bufferFrames: Int, periodFrames: Int, framing: OutputFraming = .linear) {
        self.sampleFormat = sampleFormat
        self.sampleRate = sampleRate
        self.channels = channels
        self.bufferFrames = bufferFrames
        self.periodFrames = periodFrames
        self.framing = framing
    }

    /// Whether frames rendered for `other` play here unchanged: the same sample format, framing,
    /// rate and channels (buffer and period may differ).
    func carriesSameFrames(as other: OutputFormat) -> Bool {
        sampleFormat == other.sampleFormat && framing == other.framing && sampleRate == other.sampleRate && channels == other.channels
    }

    /// The same format with plain samples: what a signal is rendered in before it is framed.
    var linear: OutputFormat {
        var format = self
        format.framing = .linear
        return format
    }

    /// Bytes in one interleaved frame (a subframe is 32 bits, as an `S24_LE` sample is).
    public var bytesPerFrame: Int { sampleFormat.bytesPerSample * channels }

    /// ALSA's name for what the device is written: the sample format, or `IEC958_SUBFRAME_LE`.
    public var deviceFormatName: String {
        framing == .iec958 ? framing.description : sampleFormat.description
    }

    /// One line: `S16_LE 44100 Hz 1 ch, buffer 88200 frames, period 44100 frames`, or for an
    /// IEC958-only device `IEC958_SUBFRAME_LE (S24_LE samples) 48000 Hz 2 ch, …`.
    public var description: String {
        let samples = framing == .iec958 ? "\(framing) (\(sampleFormat) samples)" : "\(sampleFormat)"
        return "\(samples) \(sampleRate) Hz \(channels) ch, buffer \(bufferFrames) frames, period \(periodFrames) frames"
    }
}
