import KeepAlive
import Logging

/// Tells ``BoxActivity`` which sound-server outputs have real audio on their sink: another
/// stream that plays there (not corked, not keepalived's own, not another keepalived's), from
/// the daemon's one listing of the server (``ServerWatchers``). A sink output watches its sink
/// (`pulse:DEVICE=…`), an output that follows the default sink (`default`, `pulse`) the default
/// sink. It joins the listing only while such an output is followed: a box playing to its cards
/// loads no libpulse for it.
///
/// ```swift
/// let watcher = ActivityWatcher(activity: activity, logger: logger)
/// watcher.follow(["pulse:DEVICE=tv": "tv", "default": nil])   // on the main loop, after each change
/// watcher.stop()
/// ```
final class ActivityWatcher: SoundServerListener, Sendable {
    let activity: BoxActivity
    let logger: Logger
    /// The outputs followed: each with its sink's name, nil for the default sink. Written by the
    /// main loop, read on the listing's thread.
    private let followed = Locked<[String: String?]>([:])
    /// The listing while joined (joins and leaves come from the main loop).
    private let listing = Locked<ServerWatchers?>(nil)

    init(activity: BoxActivity, logger: Logger) {
        self.activity = activity
        self.logger = logger
    }

    /// The sound-server outputs now, each with its sink (nil: the default sink); on the main loop.
    func follow(_ outputs: [String: String?]) {
        let changed = followed.withLock { followed in
            defer { followed = outputs }
            return followed != outputs
        }
        guard changed else { return }
        if outputs.isEmpty {
            stop()
            return
        }
        if let joined = listing.withLock({ $0 }) {
            // A listing now, for the outputs just added.
            joined.listAgain()
            return
        }
        do {
            let shared = try ServerWatchers.shared(logger: logger)
            if shared.join(self) { listing.withLock { $0 = shared } }
        } catch {
            // The sink outputs themselves need libpulse: a box without it has none.
            logger.debug("activity: libpulse cannot be loaded; no sound-server activity", metadata: ["error": "\(error)"])
        }
    }

    /// Leaves the listing; nothing is reported afterwards.
    func stop() {
        guard let joined = listing.withLock({ listing in defer { listing = nil }; return listing }) else { return }
        joined.leave(self)
        activity.streamsChanged([:])
    }

    func connectionReady() {}

    func serverListed(_ view: SoundServerView) {
        activity.streamsChanged(Self.players(in: view, followed: followed.withLock { $0 }))
    }

    /// Who plays real audio on each followed output's sink (`followed`: output → its sink's name,
    /// nil for the default sink): the first stream there that is not corked, not this process's
    /// and not another keepalived's. Outputs with none, or whose sink is not listed, are left out.
    static func players(in view: SoundServerView, followed: [String: String?]) -> [String: BoxActivity.Player] {
        var players: [String: BoxActivity.Player] = [:]
        for (output, named) in followed {
            guard let sinkName = named ?? view.defaultSink, let sink = view.sinks.first(where: { $0.name == sinkName }) else { continue }
            let others = view.streams.filter { $0.sink == sink.index && !$0.isOwn && !$0.isAnotherKeepalived && !$0.isCorked }
            guard let first = others.first else { continue }
            players[output] = BoxActivity.Player(program: first.application.isEmpty ? "?" : first.application, sink: sink.name)
        }
        return players
    }

    func connectionLost(_ error: String) {
        // What plays there cannot be seen now: nothing is known to play.
        activity.streamsChanged([:])
    }
}
