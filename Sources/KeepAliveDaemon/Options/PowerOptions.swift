import ArgumentParser

/// What follows real audio on the outputs: the hooks run when an output becomes active and idle.
/// Part of the playback options, so the options file and a reload carry them.
///
/// The durations are parsed here rather than by typed options, as ``SessionOptions`` does, so
/// that every bad value gets the same kind of message.
struct PowerOptions: ParsableArguments {
    /// The plug-in holds an open at most this long (CKEEPALIVED_PCM_POWER_WAIT_MAX_MS).
    static let longestPowerOnWait: Duration = .seconds(30)

    @Option(name: .customLong("on-active"), help: ArgumentHelp(
        "Run this command when real audio starts on an output that was idle (a player through keepalived:, another stream on a kept sink): its words split like a shell's, run without one; KEEPALIVED_EVENT, KEEPALIVED_OUTPUT, KEEPALIVED_PROGRAM and KEEPALIVED_CARD/KEEPALIVED_DEVICE or KEEPALIVED_SINK in its environment; its output goes to the log. Once per active period, not per track.",
        valueName: "command"))
    var onActive: String?

    @Option(name: .customLong("on-idle"), help: ArgumentHelp(
        "Run this command when an output's real audio has stopped for --on-idle-after; as --on-active.",
        valueName: "command"))
    var onIdle: String?

    @Option(name: .customLong("on-idle-after"), help: ArgumentHelp(
        "How long no real audio must play before an output is idle, like 90s, 10min or 1h (default 5min). Pauses between tracks and track skips stay active.",
        valueName: "duration"))
    var onIdleAfter: String?

    @Option(name: .customLong("hook-timeout"), help: ArgumentHelp(
        "How long --on-active and --on-idle may run before they are ended (SIGTERM to their process group, SIGKILL a second later), like 10s or 1min (default 30s).",
        valueName: "duration"))
    var hookTimeout: String?

    @Option(name: .customLong("power-on-wait"), help: ArgumentHelp(
        "Hold a player's open through keepalived: until --on-active has ended (it switches the amplifier on), at most this long, like 5s (from 100ms to 30s; default: no hold; needs --on-active or --cec): the first note plays on an amplifier that is on, while keepalived keeps the card awake. Once per active period, not per track.",
        valueName: "duration"))
    var powerOnWait: String?

    @Option(name: .customLong("power-on-settle"), help: ArgumentHelp(
        "With --power-on-wait: how long the open still waits after --on-active has ended (with --cec and no --on-active: after the receiver is woken), for an amplifier or receiver that takes a moment to play once on, like 500ms (default 0; within --power-on-wait).",
        valueName: "duration"))
    var powerOnSettle: String?

    @Flag(name: .customLong("carry"), inversion: .prefixedNo, help: ArgumentHelp(
        "Carry a player's audio through keepalived: on keepalived's own running stream, unchanged, instead of handing the card over: the link to the receiver or DAC never stops between keepalived's signal and the music (keepalived on the card's own PCM, hw:, in ring-loop or stream mode, IEC958-only ports such as a Pi's HDMI included; a player whose format differs gets the device switched to it once). On by default; --no-carry hands the card over (keepalived closes its stream while the player plays). See docs/players.md."))
    var carry = true

    mutating func validate() throws {
        _ = try settings
    }

    /// `--hook-timeout`, every hook's, the outputs' own too (default 30 s).
    var timeout: Duration {
        get throws {
            try hookTimeout.map { try DurationArgument.parse($0, option: "--hook-timeout", atLeast: .milliseconds(100), written: "100ms") } ?? .seconds(30)
        }
    }

    /// The checked settings.
    /// - Throws: `ValidationError` naming the option and what was wrong.
    var settings: BoxActivity.Settings {
        get throws {
            var settings = BoxActivity.Settings()
            if let onIdleAfter {
                settings.idleAfter = try DurationArgument.parse(onIdleAfter, option: "--on-idle-after", atLeast: .seconds(1), written: "1s")
            }
            let timeout = try self.timeout
            do {
                settings.onActive = try onActive.map { try Hook(option: "--on-active", command: $0) }
                settings.onIdle = try onIdle.map { try Hook(option: "--on-idle", command: $0) }
            } catch let exit as CleanExit {
                throw ValidationError(exit.description)
            }
            settings.onActive?.timeout = timeout
            settings.onIdle?.timeout = timeout
            if let powerOnWait {
                let wait = try DurationArgument.parse(powerOnWait, option: "--power-on-wait", atLeast: .milliseconds(100), written: "100ms")
                guard wait <= Self.longestPowerOnWait else {
                    throw ValidationError("--power-on-wait must be at most 30s, not \(powerOnWait): a player's open waits that long")
                }
                settings.powerOnWait = wait
            }
            if let powerOnSettle {
                guard settings.powerOnWait != nil else { throw ValidationError("--power-on-settle is part of --power-on-wait: give both") }
                settings.powerOnSettle = try DurationArgument.parse(powerOnSettle, option: "--power-on-settle", atLeast: .zero, written: "0s")
            }
            settings.carriesPlayers = carry
            return settings
        }
    }
}
