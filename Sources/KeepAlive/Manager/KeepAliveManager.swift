import Logging

/// Starts and stops the keep-alive: one playback loop per output device, each recovering from
/// faults on its own.
///
/// The Linux counterpart of the iOS `BackgroundSync` pattern: a gate (``isOn``), ``start()`` and
/// ``stop()``, and playback that comes back after every interruption. All members are safe to
/// call from any thread; ``start()`` and ``stop()`` are idempotent.
///
/// ```swift
/// let manager = try KeepAliveManager(configuration: KeepAliveConfiguration(devices: ["default"]), logger: logger)
/// let events = manager.events   // subscribe first: a stream has the events from then on
/// manager.start()               // returns at once; each output plays on a thread of its own
/// let observer = Task { for await event in events { logger.info("\(event)") } }
/// // … until it is time to stop:
/// manager.stop()                // drops every stream; returns within 100 ms
/// observer.cancel()             // the stream does not end at stop()
/// ```
public final class KeepAliveManager: Sendable {
    /// The caller's logger; a ``KeepAliveService`` around this manager logs through it too.
    let logger: Logger
    private let broadcaster = EventBroadcaster<KeepAliveEvent>()

    /// State read by any thread; the records inside carry their own locks.
    struct Shared {
        /// Every decision: which outputs loop, which are held, what a call changes.
        var machine: ManagerStateMachine
        /// One per configured device, in configuration order.
        var records: [OutputRecord]
    }

    let shared: Locked<Shared>
    /// The running loops by device; only ``perform(_:loops:)`` touches them, under this lock, so
    /// lifecycle calls run one at a time. Kept apart from `shared` because stopping joins threads
    /// that report through it.
    private let loops = Locked<[String: PlaybackLoop]>([:], order: .managerLifecycle)

    /// Creates a stopped manager.
    /// - Parameters:
    ///   - configuration: what to play where; validated here.
    ///   - isOn: the initial gate; while off, ``start()`` does nothing.
    ///   - logger: receives state changes and faults, each once.
    /// - Throws: ``KeepAliveConfigurationError`` when the configuration breaks a rule.
    public init(configuration: KeepAliveConfiguration, isOn: Bool = true, logger: Logger) throws(KeepAliveConfigurationError) {
        try configuration.validate()
        self.logger = logger
        let records = configuration.devices.map { OutputRecord(device: $0, volume: configuration.configuration(for: $0).volume, state: .stopped) }
        shared = Locked(Shared(machine: ManagerStateMachine(configuration: configuration, isOn: isOn), records: records), order: .manager)
    }

    deinit {
        for loop in loops.withLock({ $0.values }) { loop.stopAndJoin() }
    }

    /// The validated configuration the manager plays.
    public var configuration: KeepAliveConfiguration { shared.withLock { $0.machine.outputs.configuration } }

    /// The gate. While off, ``start()`` does nothing; turning it off stops playback.
    public var isOn: Bool {
        get { shared.withLock { $0.machine.outputs.isOn } }
        set { decide { $0.gate(newValue) } }
    }

    /// Whether the manager was started and not stopped since.
    public var isRunning: Bool { shared.withLock { $0.machine.isRunning } }

    /// The overall state: ``KeepAliveState/playing`` when every output plays, otherwise the state
    /// of the first output that does not. See ``KeepAliveSnapshot/state``.
    public var state: KeepAliveState { snapshot.state }

    /// A status of every output.
    public var outputs: [OutputStatus] { snapshot.outputs }

    /// State, outputs and configuration read together, under one lock, so they agree.
    ///
    /// ```swift
    /// let snapshot = manager.snapshot
    /// print(snapshot.state, snapshot.outputs.map(\.device), snapshot.configuration.defaults.volume)
    /// ```
    public var snapshot: KeepAliveSnapshot {
        // Each record's own lock is taken inside the manager's: nothing takes them the other way.
        shared.withLock { shared in
            KeepAliveSnapshot(isRunning: shared.machine.isRunning, configuration: shared.machine.outputs.configuration, outputs: shared.records.map(\.snapshot))
        }
    }

    /// Whether every output's playback thread reported within `interval`: the health signal a
    /// watchdog should follow (a timer would keep pinging while a thread hangs in a driver).
    ///
    /// ```swift
    /// if manager.isResponsive(within: .seconds(3)) { notifyWatchdog() }
    /// ```
    public func isResponsive(within interval: Duration) -> Bool {
        let (running, records) = shared.withLock { ($0.machine.isRunning, $0.records) }
        guard running else { return true }
        let now = ContinuousClock.now
        return records.allSatisfy { record in
            record.fields.withLock { fields in
                // A paused output has no thread to report.
                if fields.status.state.pauseReason != nil { return true }
                // A ring loop reports at its health checks only: that is its pulse.
                let allowed = fields.status.mode == .ringLoop && fields.status.state == .playing
                    ? interval + RingLoopPlayback.healthCheckInterval : interval
                return fields.heartbeat.duration(to: now) <= allowed
            }
        }
    }

    /// A new subscription to the manager's events, from now on.
    ///
    /// Each access returns an independent stream; every subscriber receives every event. A
    /// subscriber that falls more than 256 events behind loses its oldest ones; playback is
    /// never delayed by a slow or idle subscriber. A stream does not end at ``stop()``: it ends
    /// when its task is cancelled, when it is dropped, or when the manager is deallocated. See
    /// <doc:ObservingEvents>.
    ///
    /// ```swift
    /// for await event in manager.events.cancelOnGracefulShutdown() {
    ///     if event.kind == .recovered, let device = event.device, let reason = event.reason { logger.notice("\(device) back after \(reason)") }
    /// }
    /// ```
    public var events: AsyncStream<KeepAliveEvent> { broadcaster.subscribe() }

    /// Calls `observer` with every event from now on, on the playback thread that caused it (it
    /// must not block: write to an eventfd, say). For the daemon, whose main thread waits in one
    /// `poll` with no Swift concurrency running; embedders use ``events``.
    package func observe(_ observer: @escaping @Sendable (KeepAliveEvent) -> Void) {
        broadcaster.observe(observer)
    }

    /// The broadcaster behind ``events``, for tests that inspect subscriber buffers.
    var eventBroadcaster: EventBroadcaster<KeepAliveEvent> { broadcaster }

    /// Starts playing on every output, if the gate is on and not already started. Returns at
    /// once; watch ``state`` or ``events`` for the outputs opening.
    public func start() {
        decide { $0.start() }
    }

    /// Stops every output: streams are dropped at once, threads joined. Returns when playback has
    /// ended (well under 100 ms).
    public func stop() {
        decide { $0.stop() }
    }

    /// Applies a new configuration to a running (or stopped) manager.
    ///
    /// Outputs the new configuration no longer names are stopped, new ones are started, and
    /// outputs that stay keep their stream open: a new clip or level is rendered on their own
    /// thread and takes over without a gap. Buffer settings apply from the output's next open.
    ///
    /// ```swift
    /// var louder = manager.configuration
    /// louder.defaults.volume = try Level(parsing: "-34dB")
    /// let outcome = try manager.reconfigure(louder)  // updated in place default
    /// ```
    /// - Throws: ``KeepAliveConfigurationError`` when the new configuration breaks a rule; the
    ///   running one is kept.
    @discardableResult
    public func reconfigure(_ configuration: KeepAliveConfiguration) throws(KeepAliveConfigurationError) -> Reconfiguration {
        try configuration.validate()
        return decide { $0.reconfigure(configuration) }
    }

    /// Holds every output closed for `reason` until ``resume(_:)`` with the same reason: each
    /// stream is dropped (never drained) and its thread joined before this returns, so a device
    /// about to suspend is no longer written. Outputs found later start held too. Idempotent;
    /// reasons add up, and the state shows the strongest (``PauseReason``).
    ///
    /// ```swift
    /// manager.pause(.sleep)     // before the system sleeps; returns once every output is closed
    /// manager.resume(.sleep)    // after resume: outputs open again, unless another reason holds
    /// ```
    public func pause(_ reason: PauseReason) {
        setPause(reason, on: nil, holding: true)
    }

    /// Ends a ``pause(_:)`` for `reason`; outputs that nothing else holds open again at once.
    /// Idempotent.
    ///
    /// ```swift
    /// manager.resume(.locked)
    /// ```
    public func resume(_ reason: PauseReason) {
        setPause(reason, on: nil, holding: false)
    }

    /// Holds one output closed for `reason` until ``resume(_:output:)``: the other outputs play
    /// on. The hold belongs to the device name: it lasts across ``stop()``/``start()`` and a
    /// reconfiguration that drops and re-adds the output.
    ///
    /// ```swift
    /// manager.pause(.call, output: "hdmi:CARD=PCH,DEV=0")   // a call on the headset: the TV sleeps
    /// manager.resume(.call, output: "hdmi:CARD=PCH,DEV=0")  // it ended: keep the TV awake again
    /// ```
    public func pause(_ reason: PauseReason, output device: String) {
        setPause(reason, on: device, holding: true)
    }

    /// Ends a ``pause(_:output:)`` for `reason` on `device`. Idempotent.
    ///
    /// ```swift
    /// manager.resume(.call, output: "hdmi:CARD=PCH,DEV=0")   // `.call`: see ``PauseReason``
    /// ```
    public func resume(_ reason: PauseReason, output device: String) {
        setPause(reason, on: device, holding: false)
    }

    /// What a player may set when carried on `hardware`: the capabilities of the output playing
    /// there on a stream that can carry one; nil when none does.
    package func carryCapabilities(on hardware: HardwareDevice) -> PCMCapabilities? {
        shared.withLock { shared in
            shared.records.lazy.compactMap { record in
                record.fields.withLock { $0.status.hardware == hardware && $0.status.state == .playing ? $0.capabilities : nil }
            }.first
        }
    }

    /// The player an output carries on `hardware` now, if any (its program's name).
    package func carriedPlayer(on hardware: HardwareDevice) -> String? {
        shared.withLock { shared in
            shared.records.lazy.compactMap { record in
                record.fields.withLock { $0.status.hardware == hardware ? $0.status.carrying : nil }
            }.first
        }
    }

    /// Hands `player` to the output that plays on `hardware` and can carry it (its playback
    /// thread answers it from then on). False when none can: the caller still owns `player`.
    package func carry(_ player: CarriedPlayer, on hardware: HardwareDevice) -> Bool {
        loops.withLock { loops in
            let device = shared.withLock { shared in
                shared.records.first { record in
                    record.fields.withLock { $0.status.hardware == hardware && $0.status.state == .playing && $0.capabilities != nil }
                }?.device
            }
            guard let device, let loop = loops[device] else { return false }
            loop.carry(player)
            return true
        }
    }

    /// The reasons that hold every output closed, from ``pause(_:)``.
    ///
    /// ```swift
    /// if manager.pauses.contains(.sleep) { print("sleeping") }
    /// ```
    public var pauses: Set<PauseReason> { shared.withLock { $0.machine.outputs.pauses } }

    private func setPause(_ reason: PauseReason, on device: String?, holding: Bool) {
        decide { holding ? $0.pause(reason, output: device) : $0.resume(reason, output: device) }
    }

    /// Takes one decision of the state machine and performs it, under the lifecycle lock: calls
    /// that start, stop or reconfigure run one at a time.
    @discardableResult
    private func decide(_ event: (inout ManagerStateMachine) -> ManagerStateMachine.Action) -> Reconfiguration {
        loops.withLock { loops in
            guard case .perform(let plan) = shared.withLock({ event(&$0.machine) }) else { return .unchanged }
            perform(plan, loops: &loops)
            return plan.reconfiguration
        }
    }

    /// Does what a plan says, in its order; the one place loops are started.
    private func perform(_ plan: ManagerStateMachine.Plan, loops: inout [String: PlaybackLoop]) {
        for device in plan.stop { loops.removeValue(forKey: device)?.stopAndJoin() }
        let (records, outputs) = shared.withLock { shared -> ([OutputRecord], ManagerStateMachine.Outputs) in
            let configuration = shared.machine.outputs.configuration
            switch plan.records {
            case .renew?:
                shared.records = configuration.devices.map {
                    OutputRecord(device: $0, volume: configuration.configuration(for: $0).volume, state: shared.machine.initialState(of: $0))
                }
            case .follow?:
                let previous = Dictionary(shared.records.map { ($0.device, $0) }) { first, _ in first }
                shared.records = configuration.devices.map { device in
                    let volume = configuration.configuration(for: device).volume
                    guard let existing = previous[device] else {
                        return OutputRecord(device: device, volume: volume, state: shared.machine.initialState(of: device))
                    }
                    existing.fields.withLock { $0.status.volume = volume }
                    return existing
                }
            case nil:
                break
            }
            return (shared.records, shared.machine.outputs)
        }
        if plan.markStopped {
            for record in records { record.fields.withLock { $0.status.state = .stopped } }
        }
        if let event = plan.event { announce(event, outputs) }
        let byDevice = Dictionary(records.map { ($0.device, $0) }) { first, _ in first }
        for change in plan.states {
            guard let record = byDevice[change.device] else { continue }
            Self.handle(.state(change.state), record: record, logger: logger, broadcaster: broadcaster)
        }
        for device in plan.apply { loops[device]?.apply(outputs.configuration.configuration(for: device)) }
        for device in plan.start {
            guard let record = byDevice[device] else { continue }
            // The loop reports to its record, the logger and the broadcaster, never to the
            // manager: no reference back (a `weak self` here left a weak-reference side table
            // that LeakSanitizer reported whenever the manager outlived its loops), and nothing
            // to load atomically per period. `deinit` joins every loop before these go away.
            let loop = PlaybackLoop(device: device, configuration: outputs.configuration.configuration(for: device)) {
                [logger, broadcaster, record] report in
                Self.handle(report, record: record, logger: logger, broadcaster: broadcaster)
            }
            loops[device] = loop
            loop.start()
        }
    }

    /// Logs a lifecycle event once and publishes it.
    private func announce(_ event: KeepAliveEvent, _ outputs: ManagerStateMachine.Outputs) {
        switch event.storage {
        case .started:
            let configuration = outputs.configuration
            logger.info("starting", metadata: [
                "devices": "\(configuration.devices.joined(separator: ","))",
                "volume": "\(configuration.defaults.volume)", "ceiling": "\(configuration.defaults.ceiling)",
            ])
        case .stopped:
            logger.info("stopped")
        case .paused(let device, let reason), .resumed(let device, let reason):
            var metadata: Logger.Metadata = ["reason": "\(reason)"]
            if let device { metadata["device"] = "\(device)" }
            if case .paused = event.storage { logger.notice("paused", metadata: metadata) } else { logger.notice("resumed", metadata: metadata) }
        default:
            break
        }
        broadcaster.publish(event)
    }

    /// Runs on a playback thread: updates the record, logs changes once, publishes events.
    private static func handle(_ report: PlaybackReport, record: OutputRecord, logger: Logger, broadcaster: EventBroadcaster<KeepAliveEvent>) {
        let now = ContinuousClock.now
        // The steady-state report, once per period: a counter and a timestamp under the
        // output's own lock, nothing that allocates.
        if case .wrote(let frames) = report {
            record.fields.withLock {
                $0.framesPlayed += frames
                $0.heartbeat = now
            }
            return
        }
        record.fields.withLock { $0.heartbeat = now }
        let device = record.device
        let metadata: Logger.Metadata = ["device": "\(device)"]
        switch report {
        case .wrote:
            return
        case .state(let state):
            let (level, lastError) = record.fields.withLock { fields -> (Logger.Level?, String?) in
                let old = fields.status.state
                fields.status.state = state
                if state == .playing { fields.loggedFault = nil }
                guard old != state else { return (nil, nil) }
                return (fields.logging.changed(from: old, to: state, at: now), fields.status.lastError)
            }
            guard let level else { return }
            switch state.storage {
            case .playing, .starting, .stopped, .paused:
                logger.log(level: level, "\(state)", metadata: metadata)
            case .waitingForDevice, .recovering:
                logger.log(level: level, "\(state)", metadata: metadata.merging(lastError.map { ["error": "\($0)"] } ?? [:]) { $1 })
            }
            broadcaster.publish(.stateChanged(device: device, state: state))
        case .opened(let format, let mode):
            record.fields.withLock {
                $0.status.format = format
                $0.status.mode = mode
            }
            logger.info("opened", metadata: metadata.merging([
                "mode": "\(mode)",
                "format": "\(format.deviceFormatName)", "rate": "\(format.sampleRate)", "channels": "\(format.channels)",
                "buffer": "\(format.bufferFrames)", "period": "\(format.periodFrames)",
            ]) { $1 })
            broadcaster.publish(.opened(device: device, format: format))
        case .carrying(let program, let pid):
            record.fields.withLock {
                $0.status.carrying = program
                $0.status.carriedSilent = false
            }
            if let program {
                logger.info("carrying a player", metadata: metadata.merging(["program": "\(program)", "pid": "\(pid)"]) { $1 })
            } else {
                logger.info("carries no player now", metadata: metadata)
            }
        case .carriedSound(let sounding):
            let program = record.fields.withLock { fields -> String? in
                fields.status.carriedSilent = !sounding
                return fields.status.carrying
            }
            logger.debug(sounding ? "the carried player sends sound" : "the carried player sends silence", metadata: metadata.merging(["program": "\(program ?? "?")"]) { $1 })
        case .carries(let capabilities):
            record.fields.withLock { $0.capabilities = capabilities }
        case .playsOn(let hardware):
            record.fields.withLock { $0.status.hardware = hardware }
            if let hardware { logger.debug("plays on a card device", metadata: metadata.merging(["hardware": "\(hardware)"]) { $1 }) }
        case .fault(let reason, let message):
            let (first, overdue, state) = record.fields.withLock { fields -> (Bool, Bool, KeepAliveState) in
                fields.status.lastError = message
                defer { fields.loggedFault = message }
                return (fields.loggedFault != message, fields.logging.faultRepeated(at: now), fields.status.state)
            }
            if first { logger.debug("fault", metadata: metadata.merging(["reason": "\(reason)", "error": "\(message)"]) { $1 }) }
            if overdue {
                logger.warning("still \(state) after \(StateChangeLogging.quietWaitLimit.components.seconds) s",
                               metadata: metadata.merging(["error": "\(message)"]) { $1 })
            }
            broadcaster.publish(.error(device: device, reason: reason, message: message))
        case .recovered(let reason, let downtime):
            let count = record.fields.withLock { fields -> Int in
                fields.status.recoveries[reason, default: 0] += 1
                return fields.status.recoveries[reason, default: 0]
            }
            // count: this output's recoveries for this reason so far; downtime in seconds (0.012s).
            logger.notice("recovered", metadata: metadata.merging([
                "reason": "\(reason)", "downtime": "\(PlaybackLoop.format(downtime))", "count": "\(count)",
            ]) { $1 })
            broadcaster.publish(.recovered(device: device, reason: reason, downtime: downtime))
        case .notice(let message):
            logger.notice("\(message)", metadata: metadata)
        }
    }
}
