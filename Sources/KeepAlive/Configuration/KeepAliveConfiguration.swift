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
///
/// A struct with a ``code``, not an enumeration, so that a new rule breaks no program's `switch`.
/// A level rule also says which output (``device``) and which levels (``level`` and ``limit``):
///
/// ```swift
/// do {
///     try configuration.validate()
/// } catch where error.code == .volumeAboveCeiling {
///     print("turn it down to \(error.limit?.linear ?? 0) or below")
/// } catch {
///     print(error)  // the broken rule, in words
/// }
/// ```
public struct KeepAliveConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule the configuration breaks; match it with `==` or in a `switch` with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as `noDevices`.
        public let description: String
        private init(_ name: String) { description = name }

        /// A ``KeepAliveService`` was given no output device.
        public static let noDevices = Code("noDevices")
        /// A device name is empty.
        public static let emptyDeviceName = Code("emptyDeviceName")
        /// The same device is named twice.
        public static let duplicateDevice = Code("duplicateDevice")
        /// The volume is above the ceiling; it is refused rather than clipped silently.
        public static let volumeAboveCeiling = Code("volumeAboveCeiling")
        /// The buffer is shorter than 20 ms or longer than 10 s.
        public static let bufferOutOfRange = Code("bufferOutOfRange")
        /// The buffer is split in fewer than 2 or more than 64 periods.
        public static let periodsOutOfRange = Code("periodsOutOfRange")
        /// The retry delays are not positive and ordered, or the jitter is outside 0…1.
        public static let invalidRetryPolicy = Code("invalidRetryPolicy")
        /// The signal's parameters are out of range (a ``KeepAliveSignalError``).
        public static let signal = Code("signal")
        /// The play/pause schedule is out of range (a ``PlayScheduleError``).
        public static let schedule = Code("schedule")
        /// An output's own ceiling is above the configuration's: the global ceiling stays a ceiling.
        public static let outputCeilingAboveCeiling = Code("outputCeilingAboveCeiling")
        /// An output's volume is above its ceiling.
        public static let outputVolumeAboveCeiling = Code("outputVolumeAboveCeiling")
    }

    /// Which rule the configuration breaks.
    public let code: Code
    /// The output the rule concerns: nil for the configuration's defaults or its device list
    /// (``Code/duplicateDevice`` names its device here too).
    public let device: String?
    /// For a level rule, the level given (a volume, or an output's ceiling); nil otherwise.
    public let level: Level?
    /// For a level rule, the level that ``level`` may not exceed; nil otherwise.
    public let limit: Level?
    /// For ``Code/signal``, the signal's own error, whose ``KeepAliveSignalError/code`` says which
    /// of its rules it broke; nil otherwise.
    ///
    /// ```swift
    /// do {
    ///     try OutputConfiguration(signal: .sine(frequency: -1)).validate()
    /// } catch where error.signalError?.code == .frequencyOutOfRange {
    ///     print("pick a frequency above 0")
    /// } catch {
    ///     print(error)
    /// }
    /// ```
    public let signalError: KeepAliveSignalError?
    /// For ``Code/schedule``, the schedule's own error, whose ``PlayScheduleError/code`` says
    /// which of its rules it broke; nil otherwise.
    public let scheduleError: PlayScheduleError?
    /// The broken rule, in words a command-line tool can print as is.
    public let description: String

    private init(
        _ code: Code, _ description: String, device: String? = nil, level: Level? = nil, limit: Level? = nil,
        signalError: KeepAliveSignalError? = nil, scheduleError: PlayScheduleError? = nil
    ) {
        self.code = code
        self.description = description
        self.device = device
        self.level = level
        self.limit = limit
        self.signalError = signalError
        self.scheduleError = scheduleError
    }

    /// A ``KeepAliveService`` was given no output device.
    public static let noDevices = KeepAliveConfigurationError(.noDevices, "no output device given")
    /// A device name is empty.
    public static let emptyDeviceName = KeepAliveConfigurationError(.emptyDeviceName, "an output device name is empty")
    /// The same device is named twice.
    public static func duplicateDevice(_ name: String) -> KeepAliveConfigurationError {
        KeepAliveConfigurationError(.duplicateDevice, "output device '\(name)' is given twice", device: name)
    }
    /// The volume is above the ceiling; it is refused rather than clipped silently.
    public static func volumeAboveCeiling(volume: Level, ceiling: Level) -> KeepAliveConfigurationError {
        KeepAliveConfigurationError(.volumeAboveCeiling, "volume \(volume.linear) is above the ceiling \(ceiling.linear)", level: volume, limit: ceiling)
    }
    /// The buffer is shorter than 20 ms or longer than 10 s.
    public static func bufferOutOfRange(_ duration: Duration) -> KeepAliveConfigurationError {
        KeepAliveConfigurationError(.bufferOutOfRange, "buffer of \(duration) is outside 20 ms to 10 s")
    }
    /// The buffer is split in fewer than 2 or more than 64 periods.
    public static func periodsOutOfRange(_ count: Int) -> KeepAliveConfigurationError {
        KeepAliveConfigurationError(.periodsOutOfRange, "\(count) periods per buffer is outside 2 to 64")
    }
    /// The retry delays are not positive and ordered, or the jitter is outside 0…1.
    public static let invalidRetryPolicy = KeepAliveConfigurationError(
        .invalidRetryPolicy, "retry delays must be positive with the maximum not below the first, and jitter within 0 to 1")
    /// The signal's parameters are out of range; ``signalError`` keeps the signal's own error.
    public static func signal(_ error: KeepAliveSignalError) -> KeepAliveConfigurationError {
        KeepAliveConfigurationError(.signal, error.description, signalError: error)
    }
    /// The play/pause schedule is out of range; ``scheduleError`` keeps the schedule's own error.
    public static func schedule(_ error: PlayScheduleError) -> KeepAliveConfigurationError {
        KeepAliveConfigurationError(.schedule, error.description, scheduleError: error)
    }
    /// An output's own ceiling is above the configuration's: the global ceiling stays a ceiling.
    public static func outputCeilingAboveCeiling(device: String, ceiling: Level, limit: Level) -> KeepAliveConfigurationError {
        KeepAliveConfigurationError(
            .outputCeilingAboveCeiling,
            "output '\(device)': its ceiling \(ceiling.linear) is above the configuration's ceiling \(limit.linear); an output may only lower it",
            device: device, level: ceiling, limit: limit)
    }
    /// An output's volume is above its ceiling.
    public static func outputVolumeAboveCeiling(device: String, volume: Level, ceiling: Level) -> KeepAliveConfigurationError {
        KeepAliveConfigurationError(
            .outputVolumeAboveCeiling, "output '\(device)': volume \(volume.linear) is above its ceiling \(ceiling.linear)",
            device: device, level: volume, limit: ceiling)
    }
}
