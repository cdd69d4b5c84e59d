import ArgumentParser

/// What one `--output 'NAME OPTIONS…'` may say of its output: how it sounds (``SoundOptions``)
/// and what follows its real audio, over the global `--on-active`, `--on-idle` and
/// `--on-idle-after`: a box whose DAC feeds one amplifier and whose HDMI feeds a receiver
/// switches each on its own.
///
/// ```swift
/// let options = try OutputOptions.parse(["--volume", "-50dB", "--on-active", "gpioset gpiochip0 17=1"])
/// let hooks = try options.activity(hookTimeout: .seconds(30))   // onActive: gpioset …
/// ```
struct OutputOptions: ParsableArguments {
    @OptionGroup var sound: SoundOptions

    @Option(name: .customLong("on-active"), help: ArgumentHelp("This output's --on-active, instead of the global one.", valueName: "command"))
    var onActive: String?

    @Option(name: .customLong("on-idle"), help: ArgumentHelp("This output's --on-idle, instead of the global one.", valueName: "command"))
    var onIdle: String?

    @Option(name: .customLong("on-idle-after"), help: ArgumentHelp("This output's --on-idle-after, instead of the global one.", valueName: "duration"))
    var onIdleAfter: String?

    /// This output's own hooks and idle time; what it leaves out follows the global options.
    /// - Throws: `ValidationError` or `CleanExit` (64) naming the option and what was wrong.
    func activity(hookTimeout: Duration) throws -> BoxActivity.OutputHooks {
        var hooks = BoxActivity.OutputHooks()
        hooks.onActive = try onActive.map { try Hook(option: "--on-active", command: $0) }
        hooks.onIdle = try onIdle.map { try Hook(option: "--on-idle", command: $0) }
        hooks.onActive?.timeout = hookTimeout
        hooks.onIdle?.timeout = hookTimeout
        hooks.idleAfter = try onIdleAfter.map { try DurationArgument.parse($0, option: "--on-idle-after", atLeast: .seconds(1), written: "1s") }
        return hooks
    }
}
