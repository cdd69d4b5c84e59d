import KeepAlive

/// The daemon's own reasons to hold an output closed, beside the library's `sleep`, `locked` and
/// `idle`. Their strengths keep the order `keepalived status` has always shown: switched-off,
/// sleep, lent, locked, idle, linger.
extension PauseReason {
    /// A player on the same machine has the output's card device: the daemon lends it through
    /// its `keepalived:` ALSA PCM, and takes it back once the player closes it.
    static let lent = PauseReason(name: "lent", strength: 250)
    /// Nothing else has played on the output's sink for a while (`--linger`): keeping it awake
    /// no longer helps.
    static let linger = PauseReason(name: "linger", strength: 50)
    /// Home automation switched the keep-alive off (`--mqtt-commands`): every output rests until
    /// it is switched on again or the daemon restarts. The strongest: the user's own word.
    static let switchedOff = PauseReason(name: "switched-off", strength: 400)
}
