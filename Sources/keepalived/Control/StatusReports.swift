import ControlProtocol
import KeepAlive

extension OutputReport {
    /// The wire form of one output's status.
    init(_ output: OutputStatus, ceiling: Level, signal: String? = nil) {
        self.init(
            device: output.device, state: output.state.name, reason: output.state.reason?.rawValue, mode: output.mode?.rawValue,
            format: output.format?.sampleFormat.rawValue, rate: output.format?.sampleRate,
            channels: output.format?.channels, bufferFrames: output.format?.bufferFrames,
            periodFrames: output.format?.periodFrames, volume: output.volume.linear, ceiling: ceiling.linear,
            framesPlayed: output.framesPlayed, recoveries: output.totalRecoveries,
            recoveriesByReason: Dictionary(uniqueKeysWithValues: output.recoveries.map { ($0.key.rawValue, $0.value) }),
            lastError: output.lastError, signal: signal)
    }
}
