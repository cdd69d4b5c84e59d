import _KeepalivedControlProtocol
import KeepAlive

extension OutputReport {
    /// The wire form of one output's status.
    init(_ output: OutputStatus, ceiling: Level, signal: String? = nil) {
        self.init(
            device: output.device, state: output.state.name, reason: output.state.wireReason, mode: output.mode?.rawValue,
            format: output.format?.deviceFormatName, rate: output.format?.sampleRate,
            channels: output.format?.channels, bufferFrames: output.format?.bufferFrames,
            periodFrames: output.format?.periodFrames, volume: output.volume.linear, ceiling: ceiling.linear,
            framesPlayed: output.framesPlayed, recoveriesByReason: Dictionary(uniqueKeysWithValues: output.recoveries.map { ($0.key.rawValue, $0.value) }),
            lastError: output.lastError, signal: signal)
        hardware = output.hardware?.pcm
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

extension LingerReport {
    /// What `--linger` does on `device`, from the running plan and its watcher's state.
    init(device: String, plan: LingerPlan, watcher: LingerWatcher?) {
        let seconds = plan.duration.seconds
        // The watcher follows the sink outputs a selection adds; the plan names the others.
        guard watcher?.outputs.contains(device) ?? plan.outputs.contains(device) else {
            let why = plan.keptAwake[device] ?? "\(device) is a hardware output"
            self.init(seconds: seconds, active: false, note: "not supported: \(why); kept awake all the time")
            return
        }
        guard let watcher else {
            self.init(seconds: seconds, active: false, note: "libpulse cannot be loaded; kept awake all the time")
            return
        }
        guard let status = watcher.status(of: device), status.connected else {
            self.init(seconds: seconds, active: true, note: "the sound server does not answer; kept awake until it does")
            return
        }
        let left = status.deadline.map { max(0, ContinuousClock.now.duration(to: $0).seconds) }
        self.init(seconds: seconds, active: true, sink: status.sink, othersPlaying: status.othersPlaying,
                  sleepsInSeconds: left.map { ($0 * 10).rounded() / 10 })
    }
}
