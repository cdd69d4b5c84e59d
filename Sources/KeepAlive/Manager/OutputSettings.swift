/// What one output plays instead of its configuration's own settings: another signal, clip,
/// level, ceiling or schedule (keepalived's `--output 'NAME OPTIONS…'`). A setting left nil is
/// the configuration's.
///
/// ```swift
/// var configuration = KeepAliveConfiguration(devices: ["hdmi:CARD=PCH,DEV=0", "plughw:CARD=DAC"])
/// configuration.outputSettings["plughw:CARD=DAC"] = OutputSettings(signal: .sine(frequency: 30), volume: try Level(parsing: "-50dB"))
/// try configuration.validate()
/// ```
///
/// The configuration's ``KeepAliveConfiguration/ceiling`` stays a ceiling for every output: an
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

    /// Settings for one output; every argument left out is the configuration's.
    ///
    /// ```swift
    /// let quiet = OutputSettings(volume: try Level(parsing: "-60dB"))
    /// ```
    public init(signal: KeepAliveSignal? = nil, clip: Clip? = nil, volume: Level? = nil, ceiling: Level? = nil, schedule: PlaySchedule? = nil) {
        self.signal = signal
        self.clip = clip
        self.volume = volume
        self.ceiling = ceiling
        self.schedule = schedule
    }
}
