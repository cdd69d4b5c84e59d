import ControlProtocol
import KeepAlive

extension OutputReport {
    /// The wire form of one output's status.
    init(_ output: OutputStatus, ceiling: Level, signal: String? = nil) {
        self.init(
            device: output.device, state: output.state.name, reason: output.state.wireReason, mode: output.mode?.rawValue,
            format: output.format?.sampleFormat.rawValue, rate: output.format?.sampleRate,
            channels: output.format?.channels, bufferFrames: output.format?.bufferFrames,
            periodFrames: output.format?.periodFrames, volume: output.volume.linear, ceiling: ceiling.linear,
            framesPlayed: output.framesPlayed, recoveries: output.totalRecoveries,
            recoveriesByReason: Dictionary(uniqueKeysWithValues: output.recoveries.map { ($0.key.rawValue, $0.value) }),
            lastError: output.lastError, signal: signal)
    }
}

extension KeepAliveState {
    /// The reason the wire carries beside the state's name: an interruption's, or what holds a
    /// paused output (`sleeping` needs none).
    var wireReason: String? {
        if let reason { return reason.rawValue }
        if let pause = pauseReason, pause != .sleep { return pause.rawValue }
        return nil
    }
}
