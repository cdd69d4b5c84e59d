import ArgumentParser
import KeepAlive

/// What to play, from which clip, and how loud: the options that a whole run takes and that `--output` may give
/// one output of its own, with the same spelling. Each is nil when not given, so that an
/// output's options override only what they name.
///
/// ```swift
/// let dac = try SoundOptions.parse(["--signal", "sine", "--frequency", "30", "--volume", "-50dB"])
/// let settings = try dac.settings(over: configuration.defaults)   // signal sine:30, volume -50 dB
/// ```
struct SoundOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "What to play: clip (the default), zero, fluctuate, sine, white, pink, brown or open-only (sine:440 and fluctuate:25 set the frequency).",
        valueName: "kind"), transform: { try KeepAliveSignal(parsing: $0) })
    var signal: KeepAliveSignal?

    @Option(help: ArgumentHelp("Frequency of sine (Hz, default 1) or pulses per second of fluctuate (default 50).", valueName: "hz"))
    var frequency: Double?

    @Option(name: .customLong("play-for"), help: ArgumentHelp("Play in bursts: seconds of sound…", valueName: "seconds"))
    var playFor: Double?

    @Option(name: .customLong("pause-for"), help: ArgumentHelp("…then seconds of digital silence (the device stays open).", valueName: "seconds"))
    var pauseFor: Double?

    @Option(help: ArgumentHelp("Fade in and out of each burst, in seconds (default 0.1).", valueName: "seconds"))
    var fade: Double?

    // Unconditional: a level in decibels starts with a minus sign ("--volume -40dB"), which
    // would otherwise be read as an unknown option.
    @Option(parsing: .unconditional, help: ArgumentHelp("Level of the clip: a fraction of full scale or decibels (-40dB); default 0.01.", valueName: "level"), transform: { try Level(parsing: $0) })
    var volume: Level?

    @Option(name: .customLong("max-level"), parsing: .unconditional, help: ArgumentHelp("Ceiling no output sample may exceed (fraction or dB); default 0.05.", valueName: "level"), transform: { try Level(parsing: $0) })
    var maxLevel: Level?

    @Option(help: ArgumentHelp("WAV file to loop instead of the embedded clip.", valueName: "path"))
    var clip: String?

    @Option(name: .customLong("clip-base64"), help: ArgumentHelp("WAV file to loop, as base64 text.", valueName: "base64"))
    var clipBase64: String?

    @Option(name: .customLong("lead-in"), help: ArgumentHelp(
        "With --carry: after the device is switched to a carried player's format (the one break a format change needs), play keepalived's signal in it this long before the player's first frame, like 2s (0 to 10s; default 0): a receiver that mutes while it relocks loses silence, not the music's start. The player's start waits that much longer.",
        valueName: "duration"))
    var leadIn: String?

    func validate() throws {
        guard clip == nil || clipBase64 == nil else {
            throw ValidationError("--clip and --clip-base64 are mutually exclusive")
        }
    }

    /// The settings these options give, over `base`: a `--frequency` alone retunes the base's
    /// signal, a `--fade` alone the base's schedule. Exits with the sysexits code that fits:
    /// 64 for options, 65 for an undecodable WAV, 66 for an unreadable file.
    func settings(over base: OutputConfiguration) throws -> OutputSettings {
        var settings = OutputSettings()
        if signal != nil || frequency != nil {
            var parsed = signal ?? base.signal
            if let frequency {
                switch parsed.kind {
                case .sine: parsed = .sine(frequency: frequency)
                case .fluctuate: parsed = .fluctuate(perSecond: frequency)
                default: throw CleanExit.failure("--frequency applies to sine and fluctuate, not \(parsed.name)", code: SysExit.usage)
                }
            }
            settings.signal = parsed
        }
        settings.volume = volume
        settings.ceiling = maxLevel
        let fadeDuration = fade.map { Duration.milliseconds(Int64($0 * 1000)) }
        if let fade, !(fade.isFinite && fade >= 0 && fade <= 86400) {
            throw CleanExit.failure("--fade must be finite, positive seconds (at most a day)", code: SysExit.usage)
        }
        switch (playFor, pauseFor) {
        case (nil, nil):
            if let fadeDuration, var schedule = base.schedule {
                schedule.fade = fadeDuration
                settings.schedule = schedule
            }
        case (let play?, let pause?):
            guard play.isFinite, pause.isFinite, play > 0, pause >= 0, play <= 86400, pause <= 86400 else {
                throw CleanExit.failure("--play-for, --pause-for and --fade must be finite, positive seconds (at most a day)", code: SysExit.usage)
            }
            settings.schedule = PlaySchedule(
                playFor: .milliseconds(Int64(play * 1000)), pauseFor: .milliseconds(Int64(pause * 1000)),
                fade: fadeDuration ?? base.schedule?.fade ?? PlaySchedule.defaultFade)
        default:
            throw CleanExit.failure("--play-for and --pause-for go together", code: SysExit.usage)
        }
        if let leadIn {
            do {
                let duration = try DurationArgument.parse(leadIn, option: "--lead-in", atLeast: .zero, written: "0s")
                guard duration <= .seconds(10) else { throw ValidationError("--lead-in must be at most 10s, not \(leadIn): a player's start waits that long") }
                settings.carryLeadIn = duration
            } catch let error as ValidationError {
                throw CleanExit.failure(error.message, code: SysExit.usage)
            }
        }
        settings.clip = try loadClip()
        return settings
    }

    /// The clip asked for, or nil for the embedded one. Exits 66 for a file that cannot be read,
    /// 65 for bytes that are not a usable WAV.
    func loadClip() throws -> Clip? {
        do {
            if let clip { return try Clip(contentsOfFile: clip) }
            if let clipBase64 { return try Clip(base64: clipBase64) }
            return nil
        } catch {
            switch error.code {
            case .unreadableFile, .fileTooLarge:
                throw CleanExit.failure("clip: \(error)", code: SysExit.noInput)
            default:
                throw CleanExit.failure("clip: \(error)", code: SysExit.dataError)
            }
        }
    }
}
