import ArgumentParser
import KeepAlive

/// The options that say what to play and where; shared by `run` and `start`.
struct PlaybackOptions: ParsableArguments {
    @Option(name: [.short, .customLong("device")], help: ArgumentHelp("ALSA PCM to keep awake (repeat for several).", valueName: "name"))
    var devices: [String] = []

    @Flag(help: ArgumentHelp("Keep every output awake: the sound server's sinks when one answers (never a card it owns), else the cards (see 'keepalived devices'); outputs that appear or vanish are picked up or dropped within 2 s."))
    var all = false

    @Flag(help: ArgumentHelp("Keep the digital outputs awake (HDMI, DisplayPort, S/PDIF, IEC958), picked up and dropped as they come and go."))
    var digital = false

    @Flag(help: ArgumentHelp("Keep the analog outputs awake, picked up and dropped as they come and go."))
    var analog = false

    @Flag(help: ArgumentHelp("Also keep the sound server's Bluetooth sinks awake (no selection picks them on its own: a headset must sleep to save its battery); alone, only those. They play a low 30 Hz sine in bursts that survives the Bluetooth codec."))
    var bluetooth = false

    @Flag(help: ArgumentHelp("With --all/--digital/--analog, take a card device without a shared (dmix) form through plughw, locking other programs out of it."))
    var exclusive = false

    @Option(name: .customLong("exclude"), help: ArgumentHelp(
        "With --all/--digital/--analog/--bluetooth, leave out the outputs (cards' PCMs, the sound server's sinks) whose name or description matches this shell-style pattern ('*bluez*', 'USB*'; repeat for several). See 'keepalived devices --exclude'.",
        valueName: "pattern"), transform: { try OutputExclusion($0) })
    var exclusions: [OutputExclusion] = []

    @OptionGroup var sound: SoundOptions

    // Unconditional: the value is a whole option line of its own, and a forgotten NAME (a value
    // starting with "--") is answered by the check below, not as a missing value.
    @Option(name: .customLong("output"), parsing: .unconditionalSingleValue, help: ArgumentHelp(
        "Play to NAME with settings of its own: 'NAME OPTIONS…' in one word, OPTIONS spelled like the options above (--signal, --frequency, --volume, --max-level, --clip, --clip-base64, --play-for, --pause-for, --fade, and --on-active, --on-idle, --on-idle-after for this output instead of the global ones), e.g. --output 'plughw:CARD=DAC --signal sine --frequency 30 --volume -50dB' or --output 'hw:CARD=DAC --on-active \"gpioset gpiochip0 17=1\"'. Repeat for several; NAME is played like a --device. No output may exceed the global --max-level.",
        valueName: "name options"))
    var outputSpecs: [String] = []

    @OptionGroup var session: SessionOptions

    @OptionGroup var power: PowerOptions

    @OptionGroup var cec: CECOptions

    @OptionGroup var mqtt: MQTTOptions

    @Option(help: .hidden)
    var seed: UInt64?

    @Option(name: .customLong("retry-max"), help: ArgumentHelp("Longest wait between two attempts to reopen a lost device, in seconds.", valueName: "seconds"))
    var retryMax: Double = 2

    @Option(name: .customLong("buffer"), help: ArgumentHelp("Device buffer to ask for, in seconds (default 2; 8 for a sound server's sink).", valueName: "seconds"))
    var bufferSeconds: Double?

    @Flag(name: .customLong("no-ring-loop"), help: ArgumentHelp(
        "Stream to every output, even where the hardware could loop its ring buffer on its own (hw:, plughw:, hdmi: over a card): the device is then not held by the ring loop's settings, at the cost of a wakeup about once a second."))
    var noRingLoop = false

    @Option(name: .customLong("linger"), help: ArgumentHelp(
        "On sound-server outputs (pulse, pipewire, a default that goes to PulseAudio or PipeWire): keep the output awake only until this long after any other stream last played on its sink, then let it sleep; keep it awake again as soon as another stream plays. Seconds, or 90s, 10min, 1h. Not supported on hardware outputs.",
        valueName: "duration"), transform: { try DurationArgument.parse($0) })
    var lingerDuration: Duration?

    @Flag(name: .shortAndLong, help: "Log debug detail.")
    var verbose = false

    /// The selection asked for, if any.
    var selection: OutputSelection? {
        all ? .all : digital ? .digital : analog ? .analog : nil
    }

    /// The outputs picked besides the named ones; the patterns are checked by ``validate()``.
    var choice: OutputChoice {
        OutputChoice(selection: selection, bluetooth: bluetooth, exclusions: exclusions, allowExclusive: exclusive,
                     sinkBuffer: bufferSeconds == nil ? SinkDefaults.buffer : nil, carriesPlayers: power.carry)
    }

    mutating func validate() throws {
        guard [all, digital, analog].filter({ $0 }).count <= 1 else {
            throw ValidationError("--all, --digital and --analog are mutually exclusive")
        }
        if !exclusions.isEmpty, choice.isEmpty {
            throw ValidationError("--exclude applies to --all, --digital, --analog and --bluetooth; a device named with --device is always played")
        }
        guard retryMax.isFinite, retryMax >= 0.05, retryMax <= 3600 else {
            throw ValidationError("--retry-max must be between 0.05 and 3600 seconds, not \(retryMax)")
        }
        if let bufferSeconds, !(bufferSeconds.isFinite && bufferSeconds >= 0.02 && bufferSeconds <= 10) {
            throw ValidationError("--buffer must be between 0.02 and 10 seconds, not \(bufferSeconds)")
        }
        if power.powerOnWait != nil, power.onActive == nil, cec.device == nil,
           !outputSpecs.contains(where: { (try? Self.outputOptions($0))?.options.onActive != nil }) {
            throw ValidationError("--power-on-wait holds a player's open while the power comes on: give --on-active (the command that switches it on) or --cec (the receiver woken over HDMI-CEC)")
        }
        // Each --output's own hooks, as the global ones are checked (PowerOptions.validate).
        do { _ = try activitySettings } catch let exit as CleanExit { throw ValidationError(exit.description) }
        // Like --idle-after: at least a second.
        if let lingerDuration, lingerDuration < .seconds(1) {
            throw ValidationError("--linger must be at least 1s, not \(lingerDuration)")
        }
    }

    /// What follows the outputs' activity: the hooks, and whether `--cec` wakes a receiver a
    /// player's open may wait for (`--power-on-wait`).
    var activitySettings: BoxActivity.Settings {
        get throws {
            var settings = try power.settings
            settings.cecWakes = cec.device != nil
            let timeout = try power.timeout
            for spec in outputSpecs {
                let (name, options) = try Self.outputOptions(spec)
                do {
                    let hooks = try options.activity(hookTimeout: timeout)
                    if hooks != BoxActivity.OutputHooks() { settings.outputs[name] = hooks }
                } catch let exit as CleanExit {
                    throw CleanExit.failure("--output '\(name)': \(exit.description)", code: SysExit.usage)
                } catch {
                    throw CleanExit.failure("--output '\(name)': \(OutputOptions.message(for: error))", code: SysExit.usage)
                }
            }
            return settings
        }
    }

    /// The outputs named one by one: `--device`s, then `--output`s' names (played like a device).
    var namedDevices: [String] {
        let outputNames = outputSpecs.compactMap { ShellWords.split($0)?.first }
        return devices + outputNames.filter { !devices.contains($0) }
    }

    /// One `--output 'NAME OPTIONS…'`, parsed: its name and its options.
    /// - Throws: `CleanExit` (64) naming the output and what was wrong.
    static func outputOptions(_ spec: String) throws -> (name: String, options: OutputOptions) {
        guard let words = ShellWords.split(spec), let name = words.first, !name.hasPrefix("-") else {
            throw CleanExit.failure("--output '\(spec)': give the output's PCM name first, then its options (--output 'hw:CARD=DAC --volume -50dB')", code: SysExit.usage)
        }
        do {
            return (name, try OutputOptions.parse(Array(words.dropFirst())))
        } catch {
            throw CleanExit.failure("--output '\(name)': \(OutputOptions.message(for: error))", code: SysExit.usage)
        }
    }

    /// One `--output 'NAME OPTIONS…'`: the name, and the settings its options give over `base`.
    static func output(_ spec: String, over base: OutputConfiguration) throws -> (String, OutputSettings) {
        let (name, options) = try outputOptions(spec)
        do {
            return (name, try options.sound.settings(over: base))
        } catch let exit as CleanExit {
            throw CleanExit.failure("--output '\(name)': \(exit.description)", code: exit.code)
        }
    }

    /// Builds the engine configuration: the named outputs with every setting; what a selection
    /// picks is added by ``OutputScanner``. Exits with the sysexits code that fits a bad clip or
    /// bad level: 64 for options, 65 for an undecodable WAV, 66 for an unreadable file.
    func makeConfiguration() throws -> KeepAliveConfiguration {
        var defaults = OutputConfiguration(allowsRingLoop: !noRingLoop)
        defaults.retry.maximumDelay = .milliseconds(Int64(retryMax * 1000))
        if let bufferSeconds { defaults.bufferDuration = .milliseconds(Int64(bufferSeconds * 1000)) }
        if let seed { defaults.seed = seed }
        defaults = defaults.applying(try sound.settings(over: defaults))
        let named = namedDevices
        var configuration = KeepAliveConfiguration(devices: named.isEmpty && choice.isEmpty ? ["default"] : named, defaults: defaults)
        for spec in outputSpecs {
            let (name, settings) = try Self.output(spec, over: defaults)
            guard configuration.outputSettings[name] == nil else {
                throw CleanExit.failure("--output '\(name)' is given twice", code: SysExit.usage)
            }
            configuration.outputSettings[name] = settings
        }
        do {
            try configuration.validate()
        } catch {
            throw CleanExit.failure(Self.describe(error), code: SysExit.usage)
        }
        return configuration
    }
}

extension PlaybackOptions {
    /// The library's rule, with the options that set the values it names: the library knows
    /// levels, not flags.
    static func describe(_ error: KeepAliveConfigurationError) -> String {
        switch (error.code, error.level, error.limit) {
        case (.volumeAboveCeiling, let volume?, let ceiling?):
            "--volume \(volume.linear) is above the ceiling (--max-level) \(ceiling.linear); raise --max-level if you mean it"
        case (.outputCeilingAboveCeiling, let ceiling?, let limit?):
            "--output '\(error.device ?? "")': its max level \(ceiling.linear) is above the global max level \(limit.linear); an output may only lower it"
        case (.outputVolumeAboveCeiling, let volume?, let ceiling?):
            "--output '\(error.device ?? "")': volume \(volume.linear) is above its ceiling (max level) \(ceiling.linear)"
        case (.bufferOutOfRange, _, _), (.periodsOutOfRange, _, _):
            "--buffer: \(error)"
        case (.invalidRetryPolicy, _, _):
            "--retry-max: \(error)"
        default:
            "\(error)"
        }
    }
}
