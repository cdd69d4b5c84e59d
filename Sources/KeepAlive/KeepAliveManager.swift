import Logging
import Synchronization

/// Starts and stops the keep-alive: one playback loop per output device, each recovering from
/// faults on its own.
///
/// The Linux counterpart of the iOS `BackgroundSync` pattern: a gate (``isOn``), ``start()`` and
/// ``stop()``, and playback that comes back after every interruption. All members are safe to
/// call from any thread; ``start()`` and ``stop()`` are idempotent.
///
/// ```swift
/// let manager = try KeepAliveManager(configuration: KeepAliveConfiguration(devices: ["default"]))
/// manager.start()
/// for await event in manager.events {
///     print(event)
/// }
/// manager.stop()
/// ```
public final class KeepAliveManager: Sendable {
    /// The validated configuration the manager plays.
    public let configuration: KeepAliveConfiguration
    private let logger: Logger
    private let broadcaster = EventBroadcaster()

    /// State read by any thread and written by playback threads on every report.
    private struct Shared {
        var isOn = true
        var running = false
        var outputs: [OutputStatus]
        /// The last fault logged per output since it last played, so that a retry loop logs once.
        var loggedFaults: [String?]
        /// When each output's playback thread last reported: at least once per period while
        /// playing, once per retry while waiting. A stale one means a wedged thread.
        var heartbeats: [ContinuousClock.Instant]
        /// Frames written per output. Kept out of `outputs` so that a snapshot a reader holds
        /// never makes the playback thread's update copy the array.
        var framesPlayed: [Int]

        var snapshot: [OutputStatus] {
            var copy = outputs
            for index in copy.indices { copy[index].framesPlayed = framesPlayed[index] }
            return copy
        }
    }

    private let shared: Mutex<Shared>
    /// The running loops; only ``start()`` and ``stop()`` touch them, one at a time. Kept apart
    /// from `shared` because ``stop()`` joins threads that report through `shared`.
    private let loops = Mutex<[PlaybackLoop]>([])

    /// Creates a stopped manager.
    /// - Parameters:
    ///   - configuration: what to play where; validated here.
    ///   - isOn: the initial gate; while off, ``start()`` does nothing.
    ///   - logger: receives state changes and faults, each once.
    /// - Throws: ``KeepAliveConfigurationError`` when the configuration breaks a rule.
    public init(configuration: KeepAliveConfiguration, isOn: Bool = true,
                logger: Logger = Logger(label: "KeepAlive")) throws(KeepAliveConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        let outputs = configuration.devices.map { OutputStatus(device: $0, state: .stopped, volume: configuration.volume) }
        shared = Mutex(Shared(
            isOn: isOn, outputs: outputs, loggedFaults: Array(repeating: nil, count: outputs.count),
            heartbeats: Array(repeating: .now, count: outputs.count), framesPlayed: Array(repeating: 0, count: outputs.count)))
    }

    deinit {
        for loop in loops.withLock({ $0 }) { loop.stopAndJoin() }
    }

    /// The gate. While off, ``start()`` does nothing; turning it off stops playback.
    public var isOn: Bool {
        get { shared.withLock { $0.isOn } }
        set {
            shared.withLock { $0.isOn = newValue }
            if !newValue { stop() }
        }
    }

    /// Whether the manager was started and not stopped since.
    public var isRunning: Bool { shared.withLock { $0.running } }

    /// The overall state: ``KeepAliveState/playing`` when every output plays, otherwise the state
    /// of the first output that does not.
    public var state: KeepAliveState {
        shared.withLock { shared in
            guard shared.running else { return .stopped }
            if let starting = shared.outputs.first(where: { $0.state == .starting }) { return starting.state }
            return shared.outputs.first(where: { $0.state != .playing })?.state ?? .playing
        }
    }

    /// A snapshot of every output.
    public var outputs: [OutputStatus] { shared.withLock { $0.snapshot } }

    /// Whether every output's playback thread reported within `interval`: the health signal a
    /// watchdog should follow (a timer would keep pinging while a thread hangs in a driver).
    ///
    /// ```swift
    /// if manager.isResponsive(within: .seconds(3)) { notifyWatchdog() }
    /// ```
    public func isResponsive(within interval: Duration) -> Bool {
        let now = ContinuousClock.now
        return shared.withLock { shared in
            !shared.running || shared.heartbeats.allSatisfy { $0.duration(to: now) <= interval }
        }
    }

    /// How many times any output recovered from `reason`.
    public func recoveries(for reason: InterruptionReason) -> Int {
        shared.withLock { $0.outputs.reduce(0) { $0 + ($1.recoveries[reason] ?? 0) } }
    }

    /// A new subscription to the manager's events, from now on.
    ///
    /// Each access returns an independent stream; every subscriber receives every event. A
    /// subscriber that falls more than 256 events behind loses its oldest ones; playback is
    /// never delayed by a slow or idle subscriber.
    public var events: AsyncStream<KeepAliveEvent> { broadcaster.subscribe() }

    /// Starts playing on every output, if the gate is on and not already started. Returns at
    /// once; watch ``state`` or ``events`` for the outputs opening.
    public func start() {
        loops.withLock { loops in
            let begin = shared.withLock { shared -> Bool in
                guard shared.isOn, !shared.running else { return false }
                shared.running = true
                for index in shared.outputs.indices {
                    shared.outputs[index] = OutputStatus(device: shared.outputs[index].device, state: .starting, volume: configuration.volume)
                    shared.loggedFaults[index] = nil
                    shared.heartbeats[index] = .now
                    shared.framesPlayed[index] = 0
                }
                return true
            }
            guard begin else { return }
            logger.info("starting", metadata: ["devices": "\(configuration.devices.joined(separator: ","))", "volume": "\(configuration.volume)", "ceiling": "\(configuration.ceiling)"])
            broadcaster.publish(.started)
            loops = configuration.devices.enumerated().map { index, device in
                PlaybackLoop(device: device, configuration: configuration) { [weak self] report in
                    self?.handle(report, output: index)
                }
            }
            for loop in loops { loop.start() }
        }
    }

    /// Stops every output: streams are dropped at once, threads joined. Returns when playback has
    /// ended (well under 100 ms).
    public func stop() {
        loops.withLock { loops in
            guard !loops.isEmpty else { return }
            for loop in loops { loop.stopAndJoin() }
            loops = []
            shared.withLock { shared in
                shared.running = false
                for index in shared.outputs.indices { shared.outputs[index].state = .stopped }
            }
            logger.info("stopped")
            broadcaster.publish(.stopped)
        }
    }

    /// Runs on a playback thread: updates the snapshot, logs changes once, publishes events.
    private func handle(_ report: PlaybackReport, output index: Int) {
        let now = ContinuousClock.now
        // The steady-state report, once per period: a counter and a timestamp under the lock,
        // nothing that allocates.
        if case .wrote(let frames) = report {
            shared.withLock {
                $0.framesPlayed[index] += frames
                $0.heartbeats[index] = now
            }
            return
        }
        shared.withLock { $0.heartbeats[index] = now }
        let device = configuration.devices[index]
        let metadata: Logger.Metadata = ["device": "\(device)"]
        switch report {
        case .wrote:
            return
        case .state(let state):
            let (changed, lastError) = shared.withLock { shared -> (Bool, String?) in
                let old = shared.outputs[index].state
                shared.outputs[index].state = state
                if state == .playing { shared.loggedFaults[index] = nil }
                return (old != state, shared.outputs[index].lastError)
            }
            guard changed else { return }
            switch state {
            case .playing, .starting, .stopped:
                logger.info("\(state)", metadata: metadata)
            case .waitingForDevice, .recovering:
                logger.warning("\(state)", metadata: metadata.merging(lastError.map { ["error": "\($0)"] } ?? [:]) { $1 })
            }
            broadcaster.publish(.stateChanged(device: device, state: state))
        case .opened(let format):
            shared.withLock { $0.outputs[index].format = format }
            logger.info("opened", metadata: metadata.merging([
                "format": "\(format.sampleFormat)", "rate": "\(format.sampleRate)", "channels": "\(format.channels)",
                "buffer": "\(format.bufferFrames)", "period": "\(format.periodFrames)",
            ]) { $1 })
            broadcaster.publish(.opened(device: device, format: format))
        case .fault(let reason, let message):
            let first = shared.withLock { shared -> Bool in
                shared.outputs[index].lastError = message
                defer { shared.loggedFaults[index] = message }
                return shared.loggedFaults[index] != message
            }
            if first { logger.debug("fault", metadata: metadata.merging(["reason": "\(reason)", "error": "\(message)"]) { $1 }) }
            broadcaster.publish(.error(device: device, reason: reason, message: message))
        case .recovered(let reason, let downtime):
            shared.withLock { $0.outputs[index].recoveries[reason, default: 0] += 1 }
            logger.notice("recovered", metadata: metadata.merging(["reason": "\(reason)", "downtime": "\(downtime)"]) { $1 })
            broadcaster.publish(.recovered(device: device, reason: reason, downtime: downtime))
        case .notice(let message):
            logger.notice("\(message)", metadata: metadata)
        }
    }
}
