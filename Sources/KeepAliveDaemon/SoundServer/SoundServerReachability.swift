import KeepAlive

/// Whether a sound server answers, as far as the daemon knows.
///
/// ```swift
/// switch watcher.reachability {
/// case .unknown: break                        // not answered yet: pick no card meanwhile
/// case .unreachable(let why): print(why)      // none for this user: the cards are keepalived's
/// case .connected(let view): print(view.sinks.count)
/// }
/// ```
enum SoundServerReachability: Sendable, Equatable {
    /// Not asked yet, or the first answer is still on its way.
    case unknown
    /// No server answers this user (none runs, or it runs as another user); why, in libpulse's words.
    case unreachable(String)
    case connected(SoundServerView)

    var view: SoundServerView? {
        if case .connected(let view) = self { view } else { nil }
    }
}
