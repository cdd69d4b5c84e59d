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

    /// A format with every field given; the engine makes these when a device opens.
    public init(sampleFormat: SampleFormat, sampleRate: Int, channels: Int, bufferFrames: Int, periodFrames: Int) {
        self.sampleFormat = sampleFormat
        self.sampleRate = sampleRate
        self.channels = channels
        self.bufferFrames = bufferFrames
        self.periodFrames = periodFrames
    }

    /// Whether frames rendered for `other` play here unchanged: the same sample format, rate and
    /// channels (buffer and period may differ).
    func carriesSameFrames(as other: OutputFormat) -> Bool {
        sampleFormat == other.sampleFormat && sampleRate == other.sampleRate && channels == other.channels
    }

    /// Bytes in one interleaved frame.
    public var bytesPerFrame: Int { sampleFormat.bytesPerSample * channels }

    /// One line: `S16_LE 44100 Hz 1 ch, buffer 88200 frames, period 44100 frames`.
    public var description: String {
        "\(sampleFormat) \(sampleRate) Hz \(channels) ch, buffer \(bufferFrames) frames, period \(periodFrames) frames"
    }
}
