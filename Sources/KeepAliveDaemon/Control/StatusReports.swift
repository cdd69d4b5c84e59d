#if canImport(Glibc)
import Glibc
#endif
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
            framesPlayed: output.framesPlayed, recoveriesByReason: Dictionary(uniqueKeysWithValues: output.recoveries.map { ($0.key.description, $0.value) }),
            lastError: output.lastError, signal: signal)
        hardware = output.hardware?.pcm
        carrying = output.carrying
        carriedSilent = output.carrying == nil ? nil : output.carriedSilent
    }
}

extension KeepAliveState {
    /// The reason the wire carries beside the state's name: an interruption's, or what holds a
    /// paused output (`sleeping` needs none).
    var wireReason: String? {
        if let reason { return reason.description }
        if let pause = pauseReason, pause != .sleep { return pause.name }
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

extension DaemonStatus {
    /// What `status` answers, in one place: the outputs (one snapshot of the manager's), their
    /// sinks and lingering, the cards withheld, and, from the daemon's own parts, the loans,
    /// each output's activity and CEC.
    init(manager: KeepAliveManager, started: ContinuousClock.Instant, paths: RuntimePaths, logFile: String?,
         scanner: OutputScanner? = nil, linger: (plan: LingerPlan?, watcher: LingerWatcher?) = (nil, nil),
         loans: PlayerLoans? = nil, activity: BoxActivity? = nil, cec cecFollower: CECFollower? = nil) {
        // One snapshot: the state is the outputs' own, the ceiling the configuration's they play.
        let snapshot = manager.snapshot
        let state = snapshot.state
        let choice = scanner?.choice ?? OutputChoice()
        let server = scanner?.server ?? .unreachable("")
        self.init(
            state: state.name, reason: state.wireReason, pid: getpid(),
            uptimeSeconds: started.duration(to: .now).seconds, socket: paths.socket, logFile: logFile,
            outputs: snapshot.outputs.map { output in
                let own = snapshot.configuration.configuration(for: output.device)
                var report = OutputReport(output, ceiling: own.ceiling, signal: own.signal.description)
                if let plan = linger.plan { report.linger = LingerReport(device: output.device, plan: plan, watcher: linger.watcher) }
                if let view = server.view, let sink = view.sink(forPCM: output.device) {
                    report.server = view.server
                    report.sink = sink.name
                    report.sinkKind = sink.kind.rawValue
                } else if let view = server.view, own.serverSink == ServerDefaultOutput.defaultSink {
                    // The default sink, whichever it is now.
                    let sink = view.sinks.first { $0.name == view.defaultSink }
                    report.server = view.server
                    report.sink = view.defaultSink.map { "\($0) (the default sink)" }
                    report.sinkKind = sink?.kind.rawValue
                }
                return report
            },
            exclude: choice.exclusions.isEmpty ? nil : choice.exclusions.map(\.pattern))
        if !choice.isEmpty {
            switch server {
            case .connected(let view): soundServer = view.server
            case .unreachable(let why): soundServer = "none (\(why.isEmpty ? "not followed" : why))"
            case .unknown: soundServer = "not answered yet"
            }
        }
        // Named outputs too: a card another program reserved.
        let withheld = scanner?.withheld() ?? [:]
        self.withheld = withheld.isEmpty ? nil : withheld
        if let lent = loans?.reports, !lent.isEmpty { self.loans = lent }
        if let activity {
            for index in outputs.indices { outputs[index].activity = activity.report(for: outputs[index].device) }
        }
        cec = cecFollower?.report
        // A busy device's holder, from the kernel: a player on the card is the usual one, and
        // the one a user asks about. One look for all outputs.
        if outputs.contains(where: { $0.reason == InterruptionReason.busy.description }) {
            let holders = CardHolders.descriptions()
            for index in outputs.indices where outputs[index].reason == InterruptionReason.busy.description {
                outputs[index].heldBy = holders
            }
        }
    }
}
