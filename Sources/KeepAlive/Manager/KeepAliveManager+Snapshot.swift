extension KeepAliveManager {
    /// The manager's state, outputs and configuration as of one moment, read under one lock: a
    /// caller that needs more than one of them (a status line naming the output whose state it
    /// shows) never sees an output list from after a reconfiguration beside the configuration
    /// from before it.
    ///
    /// ```swift
    /// let snapshot = manager.snapshot
    /// print(snapshot.state, snapshot.outputs.map(\.device))   // outputs may be empty: a selection waits
    /// ```
    public struct Snapshot: Sendable, Equatable {
        /// Whether the manager was started and not stopped since.
        public var isRunning: Bool
        /// The overall state, as ``KeepAliveManager/state``.
        public var state: KeepAliveState
        /// Every output, in configuration order; empty while a selection has found none.
        public var outputs: [OutputStatus]
        /// The configuration in force.
        public var configuration: KeepAliveConfiguration
    }

    /// A consistent view of ``isRunning``, ``state``, ``outputs`` and ``configuration``.
    public var snapshot: Snapshot {
        let (running, records, configuration) = shared.withLock { ($0.running, $0.records, $0.configuration) }
        let outputs = records.map(\.snapshot)
        return Snapshot(isRunning: running, state: Self.overallState(running: running, outputs: outputs),
                        outputs: outputs, configuration: configuration)
    }

    /// The state of the whole from its outputs': stopped when not running, waiting while a
    /// selection has found nothing, else the first output that is starting, then the first that
    /// is not playing.
    static func overallState(running: Bool, outputs: [OutputStatus]) -> KeepAliveState {
        guard running else { return .stopped }
        guard !outputs.isEmpty else { return .waitingForDevice(.noDevice) }
        if let starting = outputs.first(where: { $0.state == .starting }) { return starting.state }
        return outputs.first(where: { $0.state != .playing })?.state ?? .playing
    }
}
