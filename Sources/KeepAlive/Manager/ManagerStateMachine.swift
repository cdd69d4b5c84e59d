/// What ``KeepAliveManager`` decides: which outputs have a playback loop, which are held by a
/// pause, and what each call changes. No I/O, no threads: the manager performs the one
/// ``Action`` each event returns, and its ``Plan/start`` is the only place loops are started.
///
/// In the shape of swift-nio's state machines: one private ``State`` whose cases carry their
/// data, one mutating function per event returning one ``Action``.
///
/// ```swift
/// var machine = ManagerStateMachine(configuration: KeepAliveConfiguration(devices: ["hw:0"]), isOn: true)
/// if case .perform(let plan) = machine.start() { print(plan.start) }   // ["hw:0"]
/// ```
struct ManagerStateMachine: Sendable {
    /// What the manager knows whether it runs or not.
    struct Outputs: Sendable, Equatable {
        var isOn: Bool
        var configuration: KeepAliveConfiguration
        /// Reasons that hold every output closed.
        var pauses: Set<PauseReason> = []
        /// Reasons that hold one output closed, by device.
        var outputPauses: [String: Set<PauseReason>] = [:]

        /// The strongest reason that holds `device` closed, nil when it may play.
        func hold(on device: String) -> PauseReason? {
            pauses.union(outputPauses[device] ?? []).min()
        }
    }

    private enum State: Sendable, Equatable {
        case stopped(Outputs)
        /// Started; `looping` names the outputs with a playback loop (the others are held).
        case running(Outputs, looping: Set<String>)
    }

    /// The records the manager keeps for its outputs after a plan.
    enum Records: Sendable, Equatable {
        /// New records for every output, each in the state it starts in (a start).
        case renew
        /// The outputs' records in the configuration's order: existing ones kept, with the
        /// level now configured, new ones made (a reconfiguration).
        case follow
    }

    /// What one event makes the manager do, in this order: stop and join `stop`'s loops, update
    /// the records, mark every record stopped if `markStopped`, log and publish `event`, report
    /// `states`, hand `apply`'s loops their new configuration, start `start`'s loops.
    struct Plan: Sendable, Equatable {
        var stop: [String] = []
        var records: Records?
        var markStopped = false
        var event: KeepAliveEvent?
        /// State changes the manager reports for outputs without a loop to report them.
        var states: [Change] = []
        var apply: [String] = []
        var start: [String] = []
        /// What a reconfiguration changed.
        var reconfiguration: Reconfiguration = .unchanged

        struct Change: Sendable, Equatable {
            var device: String
            var state: KeepAliveState
        }
    }

    enum Action: Sendable, Equatable {
        case none
        case perform(Plan)
    }

    private var state: State

    init(configuration: KeepAliveConfiguration, isOn: Bool) {
        state = .stopped(Outputs(isOn: isOn, configuration: configuration))
    }

    var outputs: Outputs {
        switch state {
        case .stopped(let outputs), .running(let outputs, _): outputs
        }
    }

    var isRunning: Bool {
        if case .running = state { return true }
        return false
    }

    /// The outputs that have a playback loop now.
    var looping: Set<String> {
        if case .running(_, let looping) = state { return looping }
        return []
    }

    /// The state a record made now starts in.
    func initialState(of device: String) -> KeepAliveState {
        guard isRunning else { return .stopped }
        return outputs.hold(on: device).map { .paused($0) } ?? .starting
    }

    /// ``KeepAliveManager/start()``: every output not held gets a loop; nothing while the gate
    /// is off or already running.
    mutating func start() -> Action {
        guard case .stopped(let outputs) = state, outputs.isOn else { return .none }
        let start = outputs.configuration.devices.filter { outputs.hold(on: $0) == nil }
        state = .running(outputs, looping: Set(start))
        return .perform(Plan(records: .renew, event: .started, start: start))
    }

    /// ``KeepAliveManager/stop()``: every loop stopped, every record marked stopped.
    mutating func stop() -> Action {
        guard case .running(let outputs, let looping) = state else { return .none }
        state = .stopped(outputs)
        let stop = outputs.configuration.devices.filter(looping.contains)
        return .perform(Plan(stop: stop, markStopped: true, event: .stopped))
    }

    /// ``KeepAliveManager/isOn``: turning the gate off stops.
    mutating func gate(_ isOn: Bool) -> Action {
        switch state {
        case .stopped(var outputs):
            outputs.isOn = isOn
            state = .stopped(outputs)
            return .none
        case .running(var outputs, let looping):
            outputs.isOn = isOn
            state = .running(outputs, looping: looping)
            return isOn ? .none : stop()
        }
    }

    /// ``KeepAliveManager/reconfigure(_:)`` with a validated configuration: outputs no longer
    /// named stop, new ones start unless held, the others that play differently now take their
    /// new configuration without closing.
    mutating func reconfigure(_ configuration: KeepAliveConfiguration) -> Action {
        var outputs = self.outputs
        let old = outputs.configuration
        guard old != configuration else { return .none }
        var changes = Reconfiguration()
        let (oldDevices, newDevices) = (Set(old.devices), Set(configuration.devices))
        changes.removed = old.devices.filter { !newDevices.contains($0) }
        changes.added = configuration.devices.filter { !oldDevices.contains($0) }
        // Each output compares what it plays itself: another output's settings leave it alone.
        changes.updatedInPlace = configuration.devices.filter {
            oldDevices.contains($0) && old.configuration(for: $0) != configuration.configuration(for: $0)
        }
        outputs.configuration = configuration
        var plan = Plan(records: .follow, reconfiguration: changes)
        switch state {
        case .stopped:
            state = .stopped(outputs)
        case .running(_, var looping):
            plan.stop = changes.removed.filter(looping.contains)
            looping.subtract(changes.removed)
            plan.apply = changes.updatedInPlace.filter(looping.contains)
            plan.start = changes.added.filter { outputs.hold(on: $0) == nil }
            looping.formUnion(plan.start)
            state = .running(outputs, looping: looping)
        }
        return .perform(plan)
    }

    /// ``KeepAliveManager/pause(_:)`` (`device` nil) or ``KeepAliveManager/pause(_:output:)``:
    /// held loops stop. Nothing when `reason` already held there.
    mutating func pause(_ reason: PauseReason, output device: String?) -> Action {
        setHold(reason, on: device, holding: true)
    }

    /// ``KeepAliveManager/resume(_:)`` or ``KeepAliveManager/resume(_:output:)``: outputs that
    /// nothing holds any more start again. Nothing when `reason` did not hold there.
    mutating func resume(_ reason: PauseReason, output device: String?) -> Action {
        setHold(reason, on: device, holding: false)
    }

    private mutating func setHold(_ reason: PauseReason, on device: String?, holding: Bool) -> Action {
        var outputs = self.outputs
        let changed: Bool
        if let device {
            var reasons = outputs.outputPauses[device] ?? []
            changed = holding ? reasons.insert(reason).inserted : reasons.remove(reason) != nil
            outputs.outputPauses[device] = reasons.isEmpty ? nil : reasons
        } else {
            changed = holding ? outputs.pauses.insert(reason).inserted : outputs.pauses.remove(reason) != nil
        }
        guard changed else { return .none }
        var plan = Plan(event: holding ? .paused(device: device, reason: reason) : .resumed(device: device, reason: reason))
        switch state {
        case .stopped:
            state = .stopped(outputs)
        case .running(_, var looping):
            for output in outputs.configuration.devices where device == nil || output == device {
                if let hold = outputs.hold(on: output) {
                    if looping.remove(output) != nil { plan.stop.append(output) }
                    plan.states.append(.init(device: output, state: .paused(hold)))
                } else if !looping.contains(output) {
                    looping.insert(output)
                    plan.states.append(.init(device: output, state: .starting))
                    plan.start.append(output)
                }
            }
            state = .running(outputs, looping: looping)
        }
        return .perform(plan)
    }
}
