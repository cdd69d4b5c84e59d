import KeepAlive
import Logging
import ServiceLifecycle

/// The daemon's own service, a stand-in for real work that needs an awake output: every
/// `interval` it "announces" something, but only while the keep-alive says every output plays.
/// It also follows the keep-alive's events, and logs when an output is lost and when it is back;
/// and it tells `activity` when it plays, and logs the outputs becoming active and idle.
struct Announcer: Service {
    private let keepAlive: KeepAliveManager
    private let events: AsyncStream<KeepAliveEvent>
    private let activity: OutputActivityTracker
    private let activityChanges: AsyncStream<OutputActivityTracker.Change>
    private let interval: Duration
    private let logger: Logger

    init(keepAlive: KeepAliveManager, activity: OutputActivityTracker, interval: Duration, logger: Logger) {
        self.keepAlive = keepAlive
        // Subscribe now, before the group starts any service, so that no event is missed: a
        // subscription receives the events published after it was made.
        self.events = keepAlive.events
        self.activity = activity
        self.activityChanges = activity.changes
        self.interval = interval
        self.logger = logger
    }

    func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await follow() }
            group.addTask { await followActivity() }
            group.addTask { try await announce() }
        }
        logger.info("announcer stopped")
    }

    /// Logs what happens to the outputs until graceful shutdown.
    private func follow() async {
        for await event in events.cancelOnGracefulShutdown() {
            // KeepAliveEvent grows in minor releases: a switch over its kind with a default keeps
            // this compiling; each event's fields are its accessors, nil where it has none.
            switch event.kind {
            case .opened:
                guard let device = event.device, let format = event.format else { break }
                logger.info("output opened", metadata: ["device": "\(device)", "format": "\(format)"])
            case .stateChanged:
                // Waiting for the device or recovering: the states with an interruption's reason.
                guard let device = event.device, let reason = event.state?.reason else { break }
                logger.warning("output lost; announcements wait", metadata: ["device": "\(device)", "reason": "\(reason)"])
            case .recovered:
                guard let device = event.device, let reason = event.reason, let downtime = event.downtime else { break }
                logger.notice("output recovered", metadata: ["device": "\(device)", "reason": "\(reason)", "downtime": "\(downtime)"])
            case .paused:
                guard let reason = event.pauseReason else { break }
                logger.notice("keep-alive paused; announcements wait", metadata: ["reason": "\(reason)"])
            default:
                break
            }
        }
    }

    /// Logs the outputs becoming active (an announcement) and idle (quiet for the idle time).
    private func followActivity() async {
        for await change in activityChanges.cancelOnGracefulShutdown() {
            logger.info("output \(change.kind)", metadata: ["device": "\(change.output)", "program": "\(change.program)"])
        }
    }

    /// Announces every `interval` while the outputs play, until graceful shutdown.
    private func announce() async throws {
        // Graceful shutdown cancels the loop: the sleep throws and the service returns.
        try? await cancelWhenGracefulShutdown { [keepAlive, activity, interval, logger] in
            var number = 0
            while true {
                try await Task.sleep(for: interval)
                let state = keepAlive.state
                if state == .playing {
                    number += 1
                    logger.info("announcement", metadata: ["number": "\(number)"])
                    // Every output plays the announcement: real audio, for the tracker.
                    activity.update(Dictionary(uniqueKeysWithValues: keepAlive.outputs.map { ($0.device, "announcer") }))
                    activity.update([:])
                } else {
                    logger.info("announcement held back", metadata: ["state": "\(state)"])
                }
            }
        }
    }
}
