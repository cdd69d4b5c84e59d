
/// One output's live record: its status, counters and heartbeat, behind a lock of its own.
///
/// Concurrency: written by that output's playback thread (through the manager's report
/// handler) and read by any thread taking a snapshot. The frame counter and heartbeat are kept
/// apart from the `OutputStatus` a snapshot copies, so that the once-per-period update never
/// has to copy anything: the steady-state path does not allocate.
final class OutputRecord: Sendable {
    struct Fields {
        var status: OutputStatus
        var framesPlayed = 0
        var heartbeat = ContinuousClock.now
        /// The last fault logged since the output last played, so a retry loop logs once.
        var loggedFault: String?
        /// How loudly its state changes are logged.
        var logging = StateChangeLogging()
        /// What a carried player may set on the open stream; nil when it carries none.
        var capabilities: PCMCapabilities?
    }

    let device: String
    let fields: Locked<Fields>

    init(device: String, volume: Level, state: KeepAliveState) {
        self.device = device
        fields = Locked(Fields(status: OutputStatus(device: device, state: state, volume: volume)), order: .outputRecord)
    }

    var snapshot: OutputStatus {
        fields.withLock { fields in
            var status = fields.status
            status.framesPlayed = fields.framesPlayed
            return status
        }
    }
}
