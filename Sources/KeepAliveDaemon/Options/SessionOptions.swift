import ArgumentParser
import KeepAlive

/// When to stop keeping awake for the user's login session (from logind); sleep is always
/// followed. Part of the playback options, so the options file and a reload carry them.
///
/// The values are parsed here rather than by typed options: ArgumentParser's own conversion
/// errors leave an allocation behind that LeakSanitizer reports at exit, and every bad value
/// gets the same kind of message as the other playback options.
struct SessionOptions: ParsableArguments {
    @Option(name: .customLong("pause-when"), help: ArgumentHelp(
        "Stop keeping awake while the login session is locked, or idle for --idle-after (repeat for both); it plays again the moment the session is active. Follows logind's LockedHint and IdleHint.",
        valueName: "locked|idle"), completion: .list(["locked", "idle"]))
    var pauseWhen: [String] = []

    @Option(name: .customLong("idle-after"), help: ArgumentHelp(
        "With --pause-when idle: how long the session must have been idle, like 90s, 10min or 1h (default 10min).",
        valueName: "duration"))
    var idleAfter: String?

    mutating func validate() throws {
        _ = try policy
    }

    /// The checked policy.
    /// - Throws: `ValidationError` naming the option and what was wrong.
    var policy: PauseStateMachine.Policy {
        get throws {
            var conditions: Set<PauseStateMachine.Condition> = []
            for word in pauseWhen {
                guard let condition = PauseStateMachine.Condition(rawValue: word) else {
                    throw ValidationError("--pause-when takes 'locked' or 'idle', not '\(word)'")
                }
                conditions.insert(condition)
            }
            var policy = PauseStateMachine.Policy(pauseWhen: conditions)
            if let idleAfter {
                guard conditions.contains(.idle) else { throw ValidationError("--idle-after goes with --pause-when idle") }
                policy.idleAfter = try DurationArgument.parse(idleAfter, option: "--idle-after", atLeast: .seconds(1), written: "1s")
            }
            return policy
        }
    }
}
