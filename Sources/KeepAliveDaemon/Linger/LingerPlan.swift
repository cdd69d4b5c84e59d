import KeepAlive

/// Which outputs `--linger` applies to, decided at start and on every reload: the sound-server
/// outputs linger; every other output is kept awake all the time, with one warning each. Refused
/// (exit 64) when only named outputs are given and none goes to a sound server: nothing could
/// linger.
///
/// ```swift
/// let plan = try LingerPlan(duration: .seconds(600), devices: ["pulse", "hw:0"], hasSelection: false)
/// plan.outputs       // ["pulse"]
/// plan.unsupported   // ["hw:0 is a hardware output"]
/// ```
struct LingerPlan: Equatable, Sendable {
    let duration: Duration
    let outputs: [String]
    /// Why each other output does not linger, one line each.
    let unsupported: [String]
    /// The outputs that do not linger, by name.
    let keptAwake: [String: String]

    init(duration: Duration, devices: [String], hasSelection: Bool, kind: (String) -> SoundServerOutput = SoundServerOutput.kind(of:)) throws {
        var outputs: [String] = []
        var unsupported: [String] = []
        var keptAwake: [String: String] = [:]
        for device in devices {
            switch kind(device) {
            case .soundServer: outputs.append(device)
            case .other(let type):
                let why = SoundServerOutput.describe(device, type: type)
                unsupported.append(why)
                keptAwake[device] = why
            }
        }
        if outputs.isEmpty, !hasSelection, let first = unsupported.first {
            throw CleanExit.failure(
                "--linger needs a sound-server output (PulseAudio or PipeWire): \(first); see 'Keep awake only while it helps' in docs/usage.md",
                code: SysExit.usage)
        }
        self.duration = duration
        self.outputs = outputs
        self.unsupported = unsupported
        self.keptAwake = keptAwake
    }
}

extension LingerPlan {
    /// `plan` with other reasons kept awake (its warnings already given).
    init(sameAs plan: LingerPlan, unsupported: [String]) {
        duration = plan.duration
        outputs = plan.outputs
        self.unsupported = unsupported
        keptAwake = plan.keptAwake
    }
}

extension PlaybackOptions {
    /// `--linger`'s plan for the outputs `configuration` names; nil without `--linger`. The same
    /// check for `run`, `start` (before any daemon is spawned) and a reload.
    /// - Throws: ``CleanExit`` (64) when only named hardware outputs would linger.
    func lingerPlan(for configuration: KeepAliveConfiguration) throws -> LingerPlan? {
        try lingerDuration.map { try LingerPlan(duration: $0, devices: configuration.devices, hasSelection: !choice.isEmpty) }
    }
}
