/// What to keep awake and how: the outputs, what each plays by default, and what single
/// outputs play instead.
///
/// ```swift
/// var configuration = KeepAliveConfiguration()
/// configuration.devices = ["hdmi:CARD=PCH,DEV=0"]
/// configuration.defaults.volume = try Level(parsing: "-40dB")
/// try configuration.validate()
/// ```
public struct KeepAliveConfiguration: Sendable, Equatable {
    /// The ALSA PCM names to play to, one playback loop each. A manager may start with none and
    /// get its outputs from ``KeepAliveManager/reconfigure(_:)`` as they appear (keepalived's
    /// selections do); ``KeepAliveService`` needs at least one.
    public var devices: [String]
    /// What every output plays unless ``outputSettings`` says otherwise.
    ///
    /// ```swift
    /// configuration.defaults.signal = .fluctuate(perSecond: 50)
    /// ```
    public var defaults: OutputConfiguration
    /// Settings of single outputs that differ from ``defaults``, by PCM name. An entry applies
    /// whenever that output is among ``devices``, now or after a ``KeepAliveManager/reconfigure(_:)``.
    ///
    /// ```swift
    /// configuration.outputSettings["hdmi:CARD=PCH,DEV=0"] = OutputSettings(signal: .fluctuate(perSecond: 50))
    /// ```
    public var outputSettings: [String: OutputSettings]

    /// What `device` plays: ``defaults`` with that output's ``OutputSettings`` laid over them.
    /// Two outputs' configurations compare equal when they play the same.
    ///
    /// ```swift
    /// let dac = configuration.configuration(for: "plughw:CARD=DAC")
    /// print(dac.signal, dac.volume)
    /// ```
    public func configuration(for device: String) -> OutputConfiguration {
        outputSettings[device].map(defaults.applying) ?? defaults
    }

    /// A configuration.
    ///
    /// ```swift
    /// let configuration = KeepAliveConfiguration(devices: ["default", "hdmi:CARD=PCH,DEV=0"],
    ///                                            defaults: OutputConfiguration(volume: try Level(parsing: "-40dB")))
    /// ```
    ///
    /// Nothing is checked here; ``validate()`` (called by ``KeepAliveManager`` and
    /// ``KeepAliveService``) checks the rules.
    public init(devices: [String] = ["default"], defaults: OutputConfiguration = OutputConfiguration(), outputSettings: [String: OutputSettings] = [:]) {
        self.devices = devices
        self.defaults = defaults
        self.outputSettings = outputSettings
    }

    /// Checks the rules a keep-alive must not break: every device named once, the defaults
    /// valid, and each output's own configuration valid under the defaults' ceiling.
    /// - Throws: ``KeepAliveConfigurationError`` naming the first broken rule.
    public func validate() throws(KeepAliveConfigurationError) {
        for device in devices where device.isEmpty { throw .emptyDeviceName }
        var seen = Set<String>()
        for device in devices where !seen.insert(device).inserted { throw .duplicateDevice(device) }
        try defaults.validate()
        for (device, settings) in outputSettings.sorted(by: { $0.key < $1.key }) {
            guard !device.isEmpty else { throw .emptyDeviceName }
            if let own = settings.ceiling, own > defaults.ceiling {
                throw .outputCeilingAboveCeiling(device: device, ceiling: own, limit: defaults.ceiling)
            }
            let effective = configuration(for: device)
            guard effective.volume <= effective.ceiling else {
                throw .outputVolumeAboveCeiling(device: device, volume: effective.volume, ceiling: effective.ceiling)
            }
            try effective.validate()
        }
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
