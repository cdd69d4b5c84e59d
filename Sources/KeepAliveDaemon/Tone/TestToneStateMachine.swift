import KeepAlive

/// What the daemon decides when asked to sound the test tone on its own outputs (home
/// automation's "Test tone" button), without I/O: which outputs sound it, the configuration that
/// plays it there, and what gives them their keep-alive back afterwards.
///
/// The tone plays only where the keep-alive plays now: never on an output lent to a player or
/// carrying one (real audio always wins), never on one held for another reason (switched off,
/// asleep, idle), never on one whose `--max-level` is below the tone's peak (the ceiling a user
/// set is never exceeded; those are named and left out). One tone at a time.
///
/// Afterwards each output gets back the settings it had, unless a reload or a rescan replaced
/// the tone's meanwhile (theirs are newer and stay).
///
/// ```swift
/// var machine = TestToneStateMachine()
/// let outputs = manager.snapshot.outputs.map(TestToneStateMachine.Output.init)
/// switch machine.pressed(outputs: outputs, configuration: manager.configuration) {
/// case .sound(let devices, let configuration, _): print("reopen \(devices) with \(configuration)")
/// case .refuse(let why): logger.notice("\(why)")
/// case .restore: preconditionFailure("a press never restores")
/// }
/// // TestTone.daemonRestoresAfter later:
/// _ = machine.restoreDue(outputs: outputs, configuration: manager.configuration)   // .restore(…)
/// ```
struct TestToneStateMachine: Sendable {
    /// An output as the decision needs it: the manager's `OutputStatus`, reduced.
    struct Output: Equatable, Sendable {
        var device: String
        var state: KeepAliveState
        /// The player carried on its stream, if any.
        var carrying: String?

        init(device: String, state: KeepAliveState, carrying: String? = nil) {
            (self.device, self.state, self.carrying) = (device, state, carrying)
        }

        init(_ status: OutputStatus) {
            self.init(device: status.device, state: status.state, carrying: status.carrying)
        }
    }

    enum Action: Equatable, Sendable {
        /// Reopen `devices` with `configuration` (the tone on them, every other output as it
        /// was); `skipped`: playing outputs left out for their `--max-level`.
        case sound(devices: [String], configuration: KeepAliveConfiguration, skipped: [String])
        /// Apply `configuration` (the tone's outputs with their own settings again), reopening
        /// `reopen` so they play as before (their buffer, a ring loop); `replaced`: outputs whose
        /// tone a reload or a rescan replaced already.
        case restore(configuration: KeepAliveConfiguration, reopen: [String], replaced: [String])
        /// Nothing sounds: why, in a sentence.
        case refuse(String)
    }

    private struct Sounding: Sendable {
        var devices: [String]
        /// Each output's settings before the tone (nil: it had none of its own).
        var saved: [String: OutputSettings?]
        /// The tone's settings each output was given.
        var tone: [String: OutputSettings]
    }

    private enum State: Sendable {
        case idle
        case sounding(Sounding)
    }

    private var state = State.idle

    init() {}

    /// Whether a tone sounds now (its restore not yet due).
    var isSounding: Bool {
        if case .sounding = state { return true }
        return false
    }

    /// The button was pressed: the tone on every output where the keep-alive plays now.
    mutating func pressed(outputs: [Output], configuration: KeepAliveConfiguration) -> Action {
        if case .sounding(let sounding) = state {
            return .refuse("a test tone sounds already (on \(sounding.devices.joined(separator: ", ")))")
        }
        if let refusal = TestTone.ceilingRefusal(globalCeiling: configuration.defaults.ceiling) {
            return .refuse("no test tone: \(refusal)")
        }
        let playing = outputs.filter { $0.state == .playing && $0.carrying == nil && configuration.devices.contains($0.device) }
        let skipped = playing.map(\.device).filter { configuration.configuration(for: $0).ceiling < TestTone.level }
        let devices = playing.map(\.device).filter { !skipped.contains($0) }
        guard !devices.isEmpty else {
            if !skipped.isEmpty {
                return .refuse("no test tone: the max level of \(skipped.joined(separator: ", ")) is below the tone's peak \(TestTone.describe(TestTone.level)), "
                    + "and the test never plays above a ceiling you set")
            }
            return .refuse("no test tone: no output plays the keep-alive now (\(Self.describe(outputs)))")
        }
        var next = configuration
        var sounding = Sounding(devices: devices, saved: [:], tone: [:])
        for device in devices {
            let own = configuration.outputSettings[device]
            let tone = TestTone.settings(over: own)
            sounding.saved[device] = .some(own)
            sounding.tone[device] = tone
            next.outputSettings[device] = tone
        }
        state = .sounding(sounding)
        return .sound(devices: devices, configuration: next, skipped: skipped)
    }

    /// The tone has played (``TestTone/daemonRestoresAfter``): the keep-alive again on its outputs.
    mutating func restoreDue(outputs: [Output], configuration: KeepAliveConfiguration) -> Action {
        guard case .sounding(let sounding) = state else {
            preconditionFailure("TestToneStateMachine.restoreDue without a tone sounding")
        }
        state = .idle
        var next = configuration
        var replaced: [String] = []
        var reopen: [String] = []
        for device in sounding.devices where configuration.devices.contains(device) {
            if configuration.outputSettings[device] == sounding.tone[device] {
                next.outputSettings[device] = sounding.saved[device] ?? nil
            } else {
                replaced.append(device)
            }
            // Not a stream a player is carried on, nor one held for another reason (it opens
            // with its own settings when that ends).
            let status = outputs.first { $0.device == device }
            if let status, status.carrying == nil, !Self.isPaused(status.state) { reopen.append(device) }
        }
        return .restore(configuration: next, reopen: reopen, replaced: replaced)
    }

    private static func isPaused(_ state: KeepAliveState) -> Bool { state.kind == .paused }

    /// "hw:CARD=PCH,DEV=3 paused (lent), pulse waiting-for-device (no-device)".
    private static func describe(_ outputs: [Output]) -> String {
        guard !outputs.isEmpty else { return "it has no output" }
        return outputs.map { output in
            output.carrying.map { "\(output.device) carrying \($0)" } ?? "\(output.device) \(output.state)"
        }.joined(separator: ", ")
    }
}
