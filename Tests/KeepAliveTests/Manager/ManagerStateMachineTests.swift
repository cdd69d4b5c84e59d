import Testing
@testable import KeepAlive

/// Every event of ``ManagerStateMachine`` in every state it can be in, without a thread or a
/// device: what each call of ``KeepAliveManager`` makes it do.
@Suite("ManagerStateMachine: every state × every event")
struct ManagerStateMachineTests {
    typealias Machine = ManagerStateMachine
    typealias Plan = ManagerStateMachine.Plan

    static let configuration = KeepAliveConfiguration(devices: ["a", "b"])

    /// The states a manager can be in, each reached through events only.
    enum Start: String, CaseIterable, CustomTestStringConvertible {
        case stoppedOn, stoppedOff, running, runningWithAHeld, runningAllPaused
        var testDescription: String { rawValue }

        var machine: Machine {
            var machine = Machine(configuration: ManagerStateMachineTests.configuration, isOn: self != .stoppedOff)
            switch self {
            case .stoppedOn, .stoppedOff: break
            case .running: _ = machine.start()
            case .runningWithAHeld:
                _ = machine.pause(.linger, output: "a")
                _ = machine.start()
            case .runningAllPaused:
                _ = machine.start()
                _ = machine.pause(.locked, output: nil)
            }
            return machine
        }
    }

    enum Event: String, CaseIterable, CustomTestStringConvertible {
        case start, stop, gateOn, gateOff, reconfigureSame, reconfigureChanged
        case pauseAll, resumeAll, pauseA, resumeA, resumeNotHeld
        var testDescription: String { rawValue }

        func happen(to machine: inout Machine) -> Machine.Action {
            switch self {
            case .start: machine.start()
            case .stop: machine.stop()
            case .gateOn: machine.gate(true)
            case .gateOff: machine.gate(false)
            case .reconfigureSame: machine.reconfigure(ManagerStateMachineTests.configuration)
            case .reconfigureChanged: machine.reconfigure(ManagerStateMachineTests.changed)
            case .pauseAll: machine.pause(.sleep, output: nil)
            case .resumeAll: machine.resume(.locked, output: nil)
            case .pauseA: machine.pause(.linger, output: "a")
            case .resumeA: machine.resume(.linger, output: "a")
            case .resumeNotHeld: machine.resume(.idle, output: "b")
            }
        }
    }

    /// "b" stays and plays louder, "a" goes, "c" comes.
    static var changed: KeepAliveConfiguration {
        var changed = KeepAliveConfiguration(devices: ["b", "c"])
        changed.outputSettings["b"] = OutputSettings(volume: Level(uncheckedLinear: 0.02))
        return changed
    }

    struct Expected: Sendable {
        var action: Machine.Action
        var running: Bool
        var looping: Set<String>
    }

    static func perform(_ plan: Plan) -> Machine.Action { .perform(plan) }
    static let all = Reconfiguration(added: ["c"], removed: ["a"], updatedInPlace: ["b"])

    /// The table: what each event does in each state.
    static func expected(_ start: Start, _ event: Event) -> Expected {
        let none = Machine.Action.none
        switch (start, event) {
        // Stopped: only a start with the gate on starts; the rest is remembered for the start.
        case (.stoppedOn, .start): return Expected(action: .perform(Plan(records: .renew, event: .started, start: ["a", "b"])), running: true, looping: ["a", "b"])
        case (.stoppedOn, .reconfigureChanged), (.stoppedOff, .reconfigureChanged):
            return Expected(action: .perform(Plan(records: .follow, reconfiguration: all)), running: false, looping: [])
        case (.stoppedOn, .pauseAll), (.stoppedOff, .pauseAll):
            return Expected(action: .perform(Plan(event: .paused(device: nil, reason: .sleep))), running: false, looping: [])
        case (.stoppedOn, .pauseA), (.stoppedOff, .pauseA):
            return Expected(action: .perform(Plan(event: .paused(device: "a", reason: .linger))), running: false, looping: [])
        case (.stoppedOn, _), (.stoppedOff, _):
            return Expected(action: none, running: false, looping: [])
        // Running, both outputs looping.
        case (.running, .start), (.running, .gateOn), (.running, .reconfigureSame), (.running, .resumeAll), (.running, .resumeA), (.running, .resumeNotHeld):
            return Expected(action: none, running: true, looping: ["a", "b"])
        case (.running, .stop), (.running, .gateOff):
            return Expected(action: .perform(Plan(stop: ["a", "b"], markStopped: true, event: .stopped)), running: false, looping: [])
        case (.running, .reconfigureChanged):
            return Expected(action: .perform(Plan(stop: ["a"], records: .follow, apply: ["b"], start: ["c"], reconfiguration: all)), running: true, looping: ["b", "c"])
        case (.running, .pauseAll):
            return Expected(action: .perform(Plan(stop: ["a", "b"], event: .paused(device: nil, reason: .sleep),
                                                  states: [.init(device: "a", state: .paused(.sleep)), .init(device: "b", state: .paused(.sleep))])),
                            running: true, looping: [])
        case (.running, .pauseA):
            return Expected(action: .perform(Plan(stop: ["a"], event: .paused(device: "a", reason: .linger), states: [.init(device: "a", state: .paused(.linger))])),
                            running: true, looping: ["b"])
        // Running, "a" held by its own pause: it has no loop.
        case (.runningWithAHeld, .start), (.runningWithAHeld, .gateOn), (.runningWithAHeld, .reconfigureSame), (.runningWithAHeld, .resumeAll),
             (.runningWithAHeld, .resumeNotHeld), (.runningWithAHeld, .pauseA):
            return Expected(action: none, running: true, looping: ["b"])
        case (.runningWithAHeld, .stop), (.runningWithAHeld, .gateOff):
            return Expected(action: .perform(Plan(stop: ["b"], markStopped: true, event: .stopped)), running: false, looping: [])
        case (.runningWithAHeld, .reconfigureChanged):
            return Expected(action: .perform(Plan(records: .follow, apply: ["b"], start: ["c"], reconfiguration: all)), running: true, looping: ["b", "c"])
        case (.runningWithAHeld, .pauseAll):
            // "a" is held by both; the strongest reason shows.
            return Expected(action: .perform(Plan(stop: ["b"], event: .paused(device: nil, reason: .sleep),
                                                  states: [.init(device: "a", state: .paused(.sleep)), .init(device: "b", state: .paused(.sleep))])),
                            running: true, looping: [])
        case (.runningWithAHeld, .resumeA):
            return Expected(action: .perform(Plan(event: .resumed(device: "a", reason: .linger), states: [.init(device: "a", state: .starting)], start: ["a"])),
                            running: true, looping: ["a", "b"])
        // Running, every output held by a pause of all.
        case (.runningAllPaused, .start), (.runningAllPaused, .gateOn), (.runningAllPaused, .reconfigureSame), (.runningAllPaused, .resumeA),
             (.runningAllPaused, .resumeNotHeld):
            return Expected(action: none, running: true, looping: [])
        case (.runningAllPaused, .stop), (.runningAllPaused, .gateOff):
            return Expected(action: .perform(Plan(markStopped: true, event: .stopped)), running: false, looping: [])
        case (.runningAllPaused, .reconfigureChanged):
            // "c" comes held, like the others.
            return Expected(action: .perform(Plan(records: .follow, reconfiguration: all)), running: true, looping: [])
        case (.runningAllPaused, .pauseAll):
            return Expected(action: .perform(Plan(event: .paused(device: nil, reason: .sleep),
                                                  states: [.init(device: "a", state: .paused(.sleep)), .init(device: "b", state: .paused(.sleep))])),
                            running: true, looping: [])
        case (.runningAllPaused, .resumeAll):
            return Expected(action: .perform(Plan(event: .resumed(device: nil, reason: .locked),
                                                  states: [.init(device: "a", state: .starting), .init(device: "b", state: .starting)], start: ["a", "b"])),
                            running: true, looping: ["a", "b"])
        case (.runningAllPaused, .pauseA):
            return Expected(action: .perform(Plan(event: .paused(device: "a", reason: .linger), states: [.init(device: "a", state: .paused(.locked))])),
                            running: true, looping: [])
        }
    }

    static let cases: [(Start, Event)] = Start.allCases.flatMap { start in Event.allCases.map { (start, $0) } }

    @Test("each event in each state leads to its plan and state", arguments: cases)
    func table(_ start: Start, _ event: Event) {
        var machine = start.machine
        let expected = Self.expected(start, event)
        #expect(event.happen(to: &machine) == expected.action)
        #expect(machine.isRunning == expected.running)
        #expect(machine.looping == expected.looping)
    }

    @Test("a loop is started only for an output that has none, and stopped only for one that has one, through any sequence")
    func loopsBalance() {
        // Every sequence of three events from every state: a plan never starts a loop the
        // machine counts as looping, nor stops one it does not.
        for start in Start.allCases {
            for first in Event.allCases { for second in Event.allCases { for third in Event.allCases {
                var machine = start.machine
                for event in [first, second, third] {
                    let before = machine.looping
                    guard case .perform(let plan) = event.happen(to: &machine) else {
                        #expect(machine.looping == before)
                        continue
                    }
                    #expect(Set(plan.stop).isSubset(of: before), "\(start) \(first) \(second) \(third)")
                    #expect(Set(plan.start).isDisjoint(with: before.subtracting(plan.stop)), "\(start) \(first) \(second) \(third)")
                    #expect(machine.looping == before.subtracting(plan.stop).union(plan.start), "\(start) \(first) \(second) \(third)")
                    #expect(plan.start.allSatisfy { machine.outputs.hold(on: $0) == nil })
                }
            } } }
        }
    }

    @Test("a record made while running starts paused when held, starting otherwise; stopped when stopped")
    func initialStates() {
        #expect(Start.stoppedOn.machine.initialState(of: "a") == .stopped)
        #expect(Start.runningWithAHeld.machine.initialState(of: "a") == .paused(.linger))
        #expect(Start.runningWithAHeld.machine.initialState(of: "b") == .starting)
        #expect(Start.runningAllPaused.machine.initialState(of: "c") == .paused(.locked))
    }
}
