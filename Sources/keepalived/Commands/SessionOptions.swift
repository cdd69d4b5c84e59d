import ArgumentParser
import KeepAlive

/// When to stop keeping awake for the user's login session (from logind); sleep is always
/// followed. Part of the playback options, so the options file and a reload carry them.
struct SessionOptions: ParsableArguments {
    /// A `--pause-when` value.
    enum Condition: String, ExpressibleByArgument, CaseIterable {
        case locked, idle
    }

    @Option(name: .customLong("pause-when"), help: ArgumentHelp(
        "Stop keeping awake while the login session is locked, or idle for --idle-after (repeat for both); it plays again the moment the session is active. Follows logind's LockedHint and IdleHint.",
        valueName: "locked|idle"))
    var pauseWhen: [Condition] = []

    @Option(name: .customLong("idle-after"), help: ArgumentHelp(
        "With --pause-when idle: how long the session must have been idle, like 90s, 10min or 1h (default 10min).",
        valueName: "duration"), transform: DurationArgument.init(parsing:))
    var idleAfter: DurationArgument?

    mutating func validate() throws {
        if idleAfter != nil, !pauseWhen.contains(.idle) {
            throw ValidationError("--idle-after goes with --pause-when idle")
        }
        if let idleAfter, idleAfter.duration < .seconds(1) {
            throw ValidationError("--idle-after must be at least 1s, not \(idleAfter)")
        }
    }

    var policy: PauseStateMachine.Policy {
        PauseStateMachine.Policy(
            pauseWhen: Set(pauseWhen.map { $0 == .locked ? .locked : .idle }),
            idleAfter: idleAfter?.duration ?? PauseStateMachine.Policy.defaultIdleAfter)
    }
}
