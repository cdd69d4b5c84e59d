/// What to keep awake and how.
///
/// ```swift
/// var configuration = KeepAliveConfiguration()
/// configuration.devices = ["hdmi:CARD=PCH,DEV=0"]
/// configuration.volume = try Level(parsing: "-40dB")
/// try configuration.validate()
/// ```
public struct KeepAliveConfiguration: Sendable, Equatable {
    /// The ALSA PCM names to play to, one playback loop each. A manager may start with none and
    /// get its outputs from ``KeepAliveManager/reconfigure(_:)`` as they appear (keepalived's
    /// selections do); ``KeepAliveService`` needs at least one.
    public var devices: [String]
    /// What to play: the clip (the default), zeros, LSB pulses, a sine, noise, or nothing.
    public var signal: KeepAliveSignal
    /// The clip to loop when ``signal`` is ``KeepAliveSignal/clip``.
    public var clip: Clip
    /// The gain applied to the clip.
    public var volume: Level
    /// The level no output sample may exceed; ``volume`` must not be above it.
    public var ceiling: Level
    /// How soon a lost output is retried.
    public var retry: RetryPolicy
    /// The device buffer to ask for. Long buffers let the process sleep; 2 s rides out a stalled
    /// scheduler without an underrun.
    public var bufferDuration: Duration
    /// How many periods the buffer is split in: the process wakes about once per period.
    public var periodsPerBuffer: Int
    /// Play in bursts (sound, then digital silence) instead of continuously; nil plays always.
    public var schedule: PlaySchedule?
    /// Seeds the noise generators, so a run can be reproduced.
    public var seed: UInt64
    /// Whether an output whose device replays its own ring (a `hw:` device, or `plughw:`,
    /// `hdmi:`, `iec958:` over one) plays as a ``PlaybackMode/ringLoop``: the ring is filled
    /// once and the process sleeps. Off, every output streams. On by default.
    ///
    /// ```swift
    /// configuration.allowsRingLoop = false   // keepalived --no-ring-loop
    /// ```
    public var allowsRingLoop = true
    /// Settings of single outputs that differ from this configuration's, by PCM name. An entry
    /// applies whenever that output is among ``devices``, now or after a ``KeepAliveManager/reconfigure(_:)``.
    ///
    /// ```swift
    /// configuration.outputSettings["hdmi:CARD=PCH,DEV=0"] = OutputSettings(signal: .fluctuate(perSecond: 50))
    /// ```
    public var outputSettings: [String: OutputSettings] = [:]

    /// What `device` plays: this configuration with that output's own settings applied, and
    /// nothing about the other outputs (``devices`` is `[device]`, no settings of other
    /// outputs), so two outputs' configurations compare equal when they play the same.
    ///
    /// ```swift
    /// let dac = configuration.configuration(for: "plughw:CARD=DAC")
    /// print(dac.signal, dac.volume)
    /// ```
    public func configuration(for device: String) -> KeepAliveConfiguration {
        var own = self
        own.devices = [device]
        own.outputSettings = [:]
        guard let settings = outputSettings[device] else { return own }
        if let signal = settings.signal { own.signal = signal }
        if let clip = settings.clip { own.clip = clip }
        if let volume = settings.volume { own.volume = volume }
        if let ceiling = settings.ceiling { own.ceiling = ceiling }
        if let schedule = settings.schedule { own.schedule = schedule }
        return own
    }

    /// A configuration; every argument has the daemon's default.
    ///
    /// ```swift
    /// let configuration = KeepAliveConfiguration(devices: ["default", "hdmi:CARD=PCH,DEV=0"], volume: try Level(parsing: "-40dB"))
    /// ```
    ///
    /// Nothing is checked here; ``validate()`` (called by ``KeepAliveManager`` and
    /// ``KeepAliveService``) checks the rules.
    public init(
        devices: [String] = ["default"], signal: KeepAliveSignal = .default, clip: Clip = .embedded, volume: Level = .defaultVolume,
        ceiling: Level = .defaultCeiling, retry: RetryPolicy = RetryPolicy(),
        bufferDuration: Duration = .seconds(2), periodsPerBuffer: Int = 2,
        schedule: PlaySchedule? = nil, seed: UInt64 = 0x6B65_6570_616C_6976
    ) {
        self.devices = devices
        self.signal = signal
        self.schedule = schedule
        self.seed = seed
        self.clip = clip
        self.volume = volume
        self.ceiling = ceiling
        self.retry = retry
        self.bufferDuration = bufferDuration
        self.periodsPerBuffer = periodsPerBuffer
    }

    /// Checks the rules a keep-alive must not break.
    /// - Throws: ``KeepAliveConfigurationError`` naming the first broken rule.
    public func validate() throws(KeepAliveConfigurationError) {
        for device in devices where device.isEmpty { throw .emptyDeviceName }
        var seen = Set<String>()
        for device in devices where !seen.insert(device).inserted { throw .duplicateDevice(device) }
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
        for (device, settings) in outputSettings.sorted(by: { $0.key < $1.key }) {
            guard !device.isEmpty else { throw .emptyDeviceName }
            if let own = settings.ceiling, own > ceiling {
                throw .outputCeilingAboveCeiling(device: device, ceiling: own, limit: ceiling)
            }
            let effective = configuration(for: device)
            guard effective.volume <= effective.ceiling else {
                throw .outputVolumeAboveCeiling(device: device, volume: effective.volume, ceiling: effective.ceiling)
            }
            do { try effective.signal.validate() } catch { throw .signal(error) }
            if let schedule = effective.schedule {
                do { try schedule.validate() } catch { throw .schedule(error) }
            }
        }
    }

    var bufferMicroseconds: Int {
        let (seconds, attoseconds) = bufferDuration.components
        return Int(seconds) * 1_000_000 + Int(attoseconds / 1_000_000_000_000)
    }
}

/// A rule that a ``KeepAliveConfiguration`` breaks.
public enum KeepAliveConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A ``KeepAliveService`` was given no output device.
    case noDevices
    /// A device name is empty.
    case emptyDeviceName
    /// The same device is named twice.
    case duplicateDevice(String)
    /// The volume is above the ceiling; it is refused rather than clipped silently.
    case volumeAboveCeiling(volume: Level, ceiling: Level)
    /// The buffer is shorter than 20 ms or longer than 10 s.
    case bufferOutOfRange(Duration)
    /// The buffer is split in fewer than 2 or more than 64 periods.
    case periodsOutOfRange(Int)
    /// The retry delays are not positive and ordered, or the jitter is outside 0…1.
    case invalidRetryPolicy
    /// The signal's parameters are out of range.
    case signal(KeepAliveSignalError)
    /// The play/pause schedule is out of range.
    case schedule(PlayScheduleError)
    /// An output's own ceiling is above the configuration's: the global ceiling stays a ceiling.
    case outputCeilingAboveCeiling(device: String, ceiling: Level, limit: Level)
    /// An output's volume is above its ceiling.
    case outputVolumeAboveCeiling(device: String, volume: Level, ceiling: Level)

    /// The broken rule, in words a command-line tool can print as is.
    public var description: String {
        switch self {
        case .noDevices: "no output device given"
        case .emptyDeviceName: "an output device name is empty"
        case .duplicateDevice(let name): "output device '\(name)' is given twice"
        case .volumeAboveCeiling(let volume, let ceiling):
            "volume \(volume.linear) is above the ceiling \(ceiling.linear)"
        case .bufferOutOfRange(let duration): "buffer of \(duration) is outside 20 ms to 10 s"
        case .periodsOutOfRange(let count): "\(count) periods per buffer is outside 2 to 64"
        case .invalidRetryPolicy: "retry delays must be positive with the maximum not below the first, and jitter within 0 to 1"
        case .signal(let error): "\(error)"
        case .schedule(let error): "\(error)"
        case .outputCeilingAboveCeiling(let device, let ceiling, let limit):
            "output '\(device)': its ceiling \(ceiling.linear) is above the configuration's ceiling \(limit.linear); an output may only lower it"
        case .outputVolumeAboveCeiling(let device, let volume, let ceiling):
            "output '\(device)': volume \(volume.linear) is above its ceiling \(ceiling.linear)"
        }
    }
}
