import ArgumentParser
import KeepAlive

/// The options that say what to play and where; shared by `run` and `start`.
struct PlaybackOptions: ParsableArguments {
    @Option(name: [.short, .customLong("device")], help: ArgumentHelp("ALSA PCM to keep awake (repeat for several).", valueName: "name"))
    var devices: [String] = []

    @Flag(help: ArgumentHelp("Keep every output awake (see 'keepalived devices'); outputs that appear or vanish are picked up or dropped within about a second."))
    var all = false

    @Flag(help: ArgumentHelp("Keep the digital outputs awake (HDMI, DisplayPort, S/PDIF, IEC958), picked up and dropped as they come and go."))
    var digital = false

    @Flag(help: ArgumentHelp("Keep the analog outputs awake, picked up and dropped as they come and go."))
    var analog = false

    @Flag(help: ArgumentHelp("With --all/--digital/--analog, take a card device without a shared (dmix) form through plughw, locking other programs out of it."))
    var exclusive = false

    @Option(name: .customLong("exclude"), help: ArgumentHelp(
        "With --all/--digital/--analog, leave out the outputs whose PCM name or description matches this shell-style pattern ('*bluez*', 'USB*'; repeat for several). See 'keepalived devices --exclude'.",
        valueName: "pattern"))
    var excludePatterns: [String] = []

    @Option(help: ArgumentHelp(
        "What to play: clip, zero, fluctuate, sine, white, pink, brown or open-only (sine:440 and fluctuate:25 set the frequency).",
        valueName: "kind"))
    var signal: String = "clip"

    @Option(help: ArgumentHelp("Frequency of sine (Hz, default 1) or pulses per second of fluctuate (default 50).", valueName: "hz"))
    var frequency: Double?

    @Option(name: .customLong("play-for"), help: ArgumentHelp("Play in bursts: seconds of sound…", valueName: "seconds"))
    var playFor: Double?

    @Option(name: .customLong("pause-for"), help: ArgumentHelp("…then seconds of digital silence (the device stays open).", valueName: "seconds"))
    var pauseFor: Double?

    @Option(help: ArgumentHelp("Fade in and out of each burst, in seconds.", valueName: "seconds"))
    var fade: Double = 0.1

    @Option(help: .hidden)
    var seed: UInt64?

    // Unconditional: a level in decibels starts with a minus sign ("--volume -40dB"), which
    // would otherwise be read as an unknown option.
    @Option(parsing: .unconditional, help: ArgumentHelp("Level of the clip: a fraction of full scale (0.01) or decibels (-40dB).", valueName: "level"))
    var volume: String = "0.01"

    @Option(name: .customLong("max-level"), parsing: .unconditional, help: ArgumentHelp("Ceiling no output sample may exceed (fraction or dB).", valueName: "level"))
    var maxLevel: String = "0.05"

    @OptionGroup var clipSource: ClipOptions

    @Option(name: .customLong("retry-max"), help: ArgumentHelp("Longest wait between two attempts to reopen a lost device, in seconds.", valueName: "seconds"))
    var retryMax: Double = 2

    @Option(name: .customLong("buffer"), help: ArgumentHelp("Device buffer to ask for, in seconds.", valueName: "seconds"))
    var bufferSeconds: Double = 2

    @Flag(name: .customLong("no-ring-loop"), help: ArgumentHelp(
        "Stream to every output, even where the hardware could loop its ring buffer on its own (hw:, plughw:, hdmi: over a card): the device is then not held by the ring loop's settings, at the cost of a wakeup about once a second."))
    var noRingLoop = false

    @Flag(name: .shortAndLong, help: "Log debug detail.")
    var verbose = false

    /// The selection asked for, if any.
    var selection: OutputSelection? {
        all ? .all : digital ? .digital : analog ? .analog : nil
    }

    /// The `--exclude` patterns, checked.
    var exclusions: [OutputExclusion] {
        get throws {
            try excludePatterns.map { pattern in
                do { return try OutputExclusion(pattern) } catch { throw ValidationError("--exclude '\(pattern)': \(error)") }
            }
        }
    }

    mutating func validate() throws {
        guard [all, digital, analog].filter({ $0 }).count <= 1 else {
            throw ValidationError("--all, --digital and --analog are mutually exclusive")
        }
        if !excludePatterns.isEmpty, selection == nil {
            throw ValidationError("--exclude applies to --all, --digital and --analog; a device named with --device is always played")
        }
        _ = try exclusions
        guard retryMax.isFinite, retryMax >= 0.05, retryMax <= 3600 else {
            throw ValidationError("--retry-max must be between 0.05 and 3600 seconds, not \(retryMax)")
        }
        guard bufferSeconds.isFinite, bufferSeconds >= 0.02, bufferSeconds <= 10 else {
            throw ValidationError("--buffer must be between 0.02 and 10 seconds, not \(bufferSeconds)")
        }
        for (option, text) in [("--volume", volume), ("--max-level", maxLevel)] {
            do { _ = try Level(parsing: text) } catch { throw ValidationError("\(option): \(error)") }
        }
    }

    private func level(_ option: String, _ text: String) throws -> Level {
        do { return try Level(parsing: text) } catch { throw CleanExit.failure("\(option): \(error)", code: SysExit.usage) }
    }

    /// Builds the engine configuration. Exits with the sysexits code that fits a bad clip or bad
    /// level: 64 for options, 65 for an undecodable WAV, 66 for an unreadable file.
    func makeConfiguration() throws -> KeepAliveConfiguration {
        var configuration = KeepAliveConfiguration()
        configuration.selection = selection
        configuration.exclusions = (try? exclusions) ?? []
        configuration.allowsRingLoop = !noRingLoop
        if let selection {
            // Named devices stay; the selection adds what the device hints offer now, and the
            // daemon rescans for outputs that come and go.
            let picked = selection.pick(from: ALSADevice.playbackDevices(), allowExclusive: exclusive, excluding: configuration.exclusions)
            configuration.devices = devices + picked.filter { !devices.contains($0) }
        } else {
            configuration.devices = devices.isEmpty ? ["default"] : devices
        }
        configuration.volume = try level("--volume", volume)
        configuration.ceiling = try level("--max-level", maxLevel)
        configuration.retry.maximumDelay = .milliseconds(Int64(retryMax * 1000))
        configuration.bufferDuration = .milliseconds(Int64(bufferSeconds * 1000))
        do {
            var parsed = try KeepAliveSignal(parsing: signal)
            if let frequency {
                switch parsed {
                case .sine: parsed = .sine(frequency: frequency)
                case .fluctuate: parsed = .fluctuate(perSecond: frequency)
                default: throw CleanExit.failure("--frequency applies to sine and fluctuate, not \(parsed.name)", code: SysExit.usage)
                }
            }
            configuration.signal = parsed
        } catch let error as KeepAliveSignalError {
            throw CleanExit.failure("--signal: \(error)", code: SysExit.usage)
        }
        switch (playFor, pauseFor) {
        case (nil, nil):
            break
        case (let play?, let pause?):
            guard play.isFinite, pause.isFinite, fade.isFinite, play > 0, pause >= 0, fade >= 0, play <= 86400, pause <= 86400 else {
                throw CleanExit.failure("--play-for, --pause-for and --fade must be finite, positive seconds (at most a day)", code: SysExit.usage)
            }
            configuration.schedule = PlaySchedule(
                playFor: .milliseconds(Int64(play * 1000)), pauseFor: .milliseconds(Int64(pause * 1000)),
                fade: .milliseconds(Int64(fade * 1000)))
        default:
            throw CleanExit.failure("--play-for and --pause-for go together", code: SysExit.usage)
        }
        if let seed { configuration.seed = seed }
        if let clip = try clipSource.load() { configuration.clip = clip }
        do {
            try configuration.validate()
        } catch {
            throw CleanExit.failure("\(error)", code: SysExit.usage)
        }
        return configuration
    }
}

/// An error whose message is printed as is before exiting with a chosen code.
struct CleanExit: Error, CustomStringConvertible {
    let description: String
    let code: ExitCode

    static func failure(_ message: String, code: ExitCode) -> CleanExit {
        CleanExit(description: message, code: code)
    }
}
