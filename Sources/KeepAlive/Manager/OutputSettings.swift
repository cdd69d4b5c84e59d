/// What one output plays instead of its configuration's defaults: another signal, clip, level,
/// ceiling, schedule or buffer (keepalived's `--output 'NAME OPTIONS…'`). A setting left nil is
/// the defaults'.
///
/// ```swift
/// var configuration = KeepAliveConfiguration(devices: ["hdmi:CARD=PCH,DEV=0", "plughw:CARD=DAC"])
/// configuration.outputSettings["plughw:CARD=DAC"] = OutputSettings(signal: .sine(frequency: 30), volume: try Level(parsing: "-50dB"))
/// try configuration.validate()
/// ```
///
/// The defaults' ``OutputConfiguration/ceiling`` stays a ceiling for every output: an
/// output's own ``ceiling`` may only lower it, and its ``volume`` may not exceed either.
public struct OutputSettings: Sendable, Equatable {
    /// The signal this output plays.
    public var signal: KeepAliveSignal?
    /// The clip this output loops when its signal is ``KeepAliveSignal/clip``.
    public var clip: Clip?
    /// This output's gain.
    public var volume: Level?
    /// This output's own ceiling, at most the configuration's.
    public var ceiling: Level?
    /// This output's play/pause schedule.
    public var schedule: PlaySchedule?
    /// This output's device buffer (a sound server's stream is cheaper with a longer one).
    public var bufferDuration: Duration?
    /// The rate this output's generated signals are rendered at (``OutputConfiguration/generatedSignalRate``).
    package var generatedSignalRate: Int?
    /// The sound server's sink this output plays into (``OutputConfiguration/serverSink``).
    package var serverSink: String?

    /// Settings for one output; every argument left out is the configuration's.
    ///
    /// ```swift
    /// let quiet = OutputSettings(volume: try Level(parsing: "-60dB"))
    /// ```
    public init(signal: KeepAliveSignal? = nil, clip: Clip? = nil, volume: Level? = nil, ceiling: Level? = nil, schedule: PlaySchedule? = nil,
                bufferDuration: Duration? = nil) {
        self.signal = signal
        self.clip = clip
        self.volume = volume
        self.ceiling = ceiling
        self.schedule = schedule
        self.bufferDuration = bufferDuration
    }
}
