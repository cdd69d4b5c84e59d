/// What one output plays instead of its configuration's defaults: another signal, clip, level,
/// ceiling, schedule or buffer (keepalived's `--output 'NAME OPTIONS…'`), and whether it plays
/// into a sound server's sink through a stream of its own (``serverSink``). A setting left nil
/// is the defaults'.
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
    /// The format this output's device is asked for (``OutputConfiguration/deviceFormat``).
    package var deviceFormat: DeviceFormat?
    /// This output's lead-in before a carried player's first frame in a new format (``OutputConfiguration/carryLeadIn``).
    package var carryLeadIn: Duration?
    /// The sound server's sink this output keeps awake through a stream of its own, by the
    /// sink's name (`pactl list short sinks`), or `@DEFAULT_SINK@` for the server's default
    /// sink, followed when the default changes (as the pulse plug-in's stream follows it); nil
    /// plays to the output's ALSA device. See <doc:SoundServerSinks>.
    ///
    /// The stream goes to the PulseAudio server, or PipeWire's pipewire-pulse, that libpulse
    /// finds for this process (`PULSE_SERVER`, else the user's runtime directory); no server is
    /// ever started. The output's device name is the fallback, opened only when libpulse
    /// (`libpulse0`) cannot be loaded: name the same sink through ALSA's pulse plug-in,
    /// `pulse:DEVICE=<sink>`. Give the output an 8 s ``bufferDuration``, as keepalived gives a
    /// sink: four periods of 2 s, and the stream wakes about every 4 s.
    ///
    /// ```swift
    /// let sink = "alsa_output.pci-0000_00_1f.3.hdmi-stereo"
    /// var configuration = KeepAliveConfiguration(devices: ["pulse:DEVICE=\(sink)"])
    /// configuration.outputSettings["pulse:DEVICE=\(sink)"] = OutputSettings(bufferDuration: .seconds(6), serverSink: sink)
    /// ```
    public var serverSink: String?

    /// Settings for one output; every argument left out is the configuration's (`serverSink`
    /// left out: the output plays to its ALSA device).
    ///
    /// ```swift
    /// let quiet = OutputSettings(volume: try Level(parsing: "-60dB"))
    /// let tv = OutputSettings(bufferDuration: .seconds(6), serverSink: "alsa_output.pci-0000_00_1f.3.hdmi-stereo")
    /// ```
    public init(signal: KeepAliveSignal? = nil, clip: Clip? = nil, volume: Level? = nil, ceiling: Level? = nil, schedule: PlaySchedule? = nil,
                bufferDuration: Duration? = nil, serverSink: String? = nil) {
        self.signal = signal
        self.clip = clip
        self.volume = volume
        self.ceiling = ceiling
        self.schedule = schedule
        self.bufferDuration = bufferDuration
        self.serverSink = serverSink
    }
}
