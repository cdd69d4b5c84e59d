/// Everything one output plays and how: the value a playback loop takes with its device.
///
/// A ``KeepAliveConfiguration`` holds one of these as the ``KeepAliveConfiguration/defaults``
/// of every output, and ``KeepAliveConfiguration/configuration(for:)`` makes an output's own by
/// laying its ``OutputSettings`` over them: the one place where per-output settings apply.
///
/// ```swift
/// var output = OutputConfiguration(signal: .sine(frequency: 30), volume: try Level(parsing: "-50dB"))
/// output.bufferDuration = .seconds(4)
/// try output.validate()
/// ```
public struct OutputConfiguration: Sendable, Equatable {
    /// What to play: the clip (the default), zeros, LSB pulses, a sine, noise, or nothing.
    public var signal: KeepAliveSignal
    /// The clip to loop when ``signal`` is ``KeepAliveSignal/clip``.
    public var clip: Clip
    /// The gain applied to the clip, or the signal's peak.
    public var volume: Level
    /// The level no output sample may exceed; ``volume`` must not be above it.
    public var ceiling: Level
    /// Play in bursts (sound, then digital silence) instead of continuously; nil plays always.
    public var schedule: PlaySchedule?
    /// The device buffer to ask for. Long buffers let the process sleep; 2 s rides out a stalled
    /// scheduler without an underrun.
    public var bufferDuration: Duration
    /// How many periods the buffer is split in: the process wakes about once per period.
    public var periodsPerBuffer: Int
    /// How soon a lost output is retried.
    public var retry: RetryPolicy
    /// Seeds the noise generators, so a run can be reproduced.
    public var seed: UInt64
    /// Whether an output whose device replays its own ring (a `hw:` device, or `plughw:`,
    /// `hdmi:`, `iec958:` over one) plays as a ``PlaybackMode/ringLoop``: the ring is filled
    /// once and the process sleeps. Off, the output streams.
    ///
    /// ```swift
    /// output.allowsRingLoop = false   // keepalived --no-ring-loop
    /// ```
    public var allowsRingLoop: Bool
    /// The rate a generated signal (every one but the clip, which plays at its own) is rendered
    /// at; nil for 48 kHz, what most digital receivers run at natively. keepalived gives a sound
    /// server's sink its own rate: the server then mixes the stream without a resampler, which
    /// costs it CPU and rounds `fluctuate`'s ±1 LSB pulses to nothing or not, by their phase.
    package var generatedSignalRate: Int?
    /// The format the device is asked for instead of the signal's own: the one a player last
    /// used on it (keepalived takes a card back from a player in the player's format, so that a
    /// receiver sees no format change when the next track starts). The signal is rendered for it.
    package var deviceFormat: DeviceFormat?
    /// How long the device plays the signal in a carried player's format, after the one reopen
    /// that format needs, before the player's first frame (`--lead-in`): a receiver that mutes
    /// while it relocks to a new rate then loses signal, not music. Zero: at once.
    package var carryLeadIn: Duration = .zero
    /// The sound server's sink this output plays into through a stream of its own, rather than
    /// through the ALSA device it names (opened instead only when libpulse cannot be loaded); nil
    /// for a device alsa-lib opens. Set per output, with ``OutputSettings/serverSink``: the
    /// defaults never name a sink.
    public internal(set) var serverSink: String?

    /// An output configuration; every argument has keepalived's default.
    ///
    /// ```swift
    /// let quiet = OutputConfiguration(volume: try Level(parsing: "-60dB"))
    /// ```
    ///
    /// Nothing is checked here; ``validate()`` checks the rules.
    public init(
        signal: KeepAliveSignal = .default, clip: Clip = .embedded, volume: Level = .defaultVolume,
        ceiling: Level = .defaultCeiling, schedule: PlaySchedule? = nil,
        bufferDuration: Duration = .seconds(2), periodsPerBuffer: Int = 2,
        retry: RetryPolicy = RetryPolicy(), seed: UInt64 = 0x6B65_6570_616C_6976, allowsRingLoop: Bool = true
    ) {
        (self.signal, self.clip, self.schedule, self.seed) = (signal, clip, schedule, seed)
        (self.volume, self.ceiling) = (volume, ceiling)
        (self.bufferDuration, self.periodsPerBuffer, self.allowsRingLoop) = (bufferDuration, periodsPerBuffer, allowsRingLoop)
        self.retry = retry
    }

    /// Checks the rules one output must not break.
    ///
    /// ```swift
    /// try OutputConfiguration(bufferDuration: .seconds(4)).validate()
    /// ```
    /// - Throws: ``KeepAliveConfigurationError`` naming the first broken rule and its value.
    public func validate() throws(KeepAliveConfigurationError) {
        guard volume <= ceiling else { throw .volumeAboveCeiling(volume: volume, ceiling: ceiling) }
        guard bufferDuration >= .milliseconds(20), bufferDuration <= .seconds(10) else {
            throw .bufferOutOfRange(bufferDuration)
        }
        guard (2...64).contains(periodsPerBuffer) else { throw .periodsOutOfRange(periodsPerBuffer) }
        guard retry.initialDelay > .zero, retry.maximumDelay >= retry.initialDelay,
              (0...1).contains(retry.jitter) else { throw .invalidRetryPolicy }
        do { try signal.validate() } catch { throw .signal(error) }
        if let schedule {
            do { try schedule.validate() } catch { throw .schedule(error) }
        }
    }

    /// This configuration with `settings` laid over it: each setting given replaces its own.
    ///
    /// ```swift
    /// let dac = defaults.applying(OutputSettings(volume: try Level(parsing: "-50dB")))
    /// ```
    public func applying(_ settings: OutputSettings) -> OutputConfiguration {
        var own = self
        if let signal = settings.signal { own.signal = signal }
        if let clip = settings.clip { own.clip = clip }
        if let volume = settings.volume { own.volume = volume }
        if let ceiling = settings.ceiling { own.ceiling = ceiling }
        if let schedule = settings.schedule { own.schedule = schedule }
        if let bufferDuration = settings.bufferDuration { own.bufferDuration = bufferDuration }
        if let rate = settings.generatedSignalRate { own.generatedSignalRate = rate }
        if let format = settings.deviceFormat { own.deviceFormat = format }
        if let leadIn = settings.carryLeadIn { own.carryLeadIn = leadIn }
        if let sink = settings.serverSink { own.serverSink = sink }
        return own
    }

    var bufferMicroseconds: Int {
        Int(bufferDuration.microseconds)
    }

    /// Whether an open device plays the same frames under `other`: they differ at most in what
    /// the device is asked for at its next open (``deviceFormat``, ``generatedSignalRate``) or
    /// at a carried player's next format (``carryLeadIn``), as
    /// when a sound server's sink moved to a user's track's rate while this output played into it.
    func playsTheSame(as other: OutputConfiguration) -> Bool {
        var mine = self
        var theirs = other
        (mine.deviceFormat, theirs.deviceFormat) = (nil, nil)
        (mine.generatedSignalRate, theirs.generatedSignalRate) = (nil, nil)
        (mine.carryLeadIn, theirs.carryLeadIn) = (.zero, .zero)
        return mine == theirs
    }
}
