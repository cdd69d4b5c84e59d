import Testing

@testable import KeepAliveDaemon
import TestSupport

/// Every state of `--cec`'s state machine against every event: the action and the state it
/// leads to. The impossible ones are what its one owner never reports: an adapter opened twice
/// or lost while closed, the box active twice in a row, a transmission's result or a message
/// from a closed adapter.
@Suite("CEC state machine, every state × every event")
struct CECStateMachineTableTests: TransitionTable {
    typealias Machine = CECStateMachine
    typealias Addresses = CECStateMachine.Addresses

    static let here = Addresses(physical: 0x2000, logical: 4)
    /// After an HDMI replug: another port, another Playback address.
    static let elsewhere = Addresses(physical: 0x3200, logical: 8)
    static let request = CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x2000)
    /// Made once, as `request` is: a message made inside the table's rows keeps its operands
    /// behind a pointer packed into the enum's spare bits, which LeakSanitizer cannot follow from
    /// the static table (it reported the three rows' 33-byte arrays as leaks).
    static let powerStatusAnswer = CECMessage.reportPowerStatusOn(from: 4, to: 0)

    /// The states, reached through events. Every setup has `--cec-standby`;
    /// `readyActiveWakeTV` also `--cec-wake-tv`.
    enum Setup: String, CaseIterable, Codable, Sendable {
        case closed, closedActive, claiming, claimingActive, ready, readyActive, readyActiveWakeTV

        func make() -> Machine {
            var machine = Machine(settings: .init(wakeTV: self == .readyActiveWakeTV, standby: true))
            if [.closedActive, .claimingActive].contains(self) { _ = machine.boxActive() }
            if self == .closed || self == .closedActive { return machine }
            _ = machine.adapterOpened()
            if self == .claiming || self == .claimingActive { return machine }
            _ = machine.adapterReady(physicalAddress: 0x2000, logicalAddress: 4)
            if self != .ready { _ = machine.boxActive() }
            return machine
        }
    }

    enum Event: String, CaseIterable, Codable, Sendable {
        case opened, readySame, readyElsewhere, unclaimed, lost, active, idle
        case acknowledged, notAcknowledged, failed, powerStatusAsked, reloadWakeTV

        func apply(to machine: inout Machine) -> Machine.Action {
            switch self {
            case .opened: machine.adapterOpened()
            case .readySame: machine.adapterReady(physicalAddress: 0x2000, logicalAddress: 4)
            case .readyElsewhere: machine.adapterReady(physicalAddress: 0x3200, logicalAddress: 8)
            case .unclaimed: machine.adapterUnclaimed()
            case .lost: machine.adapterLost()
            case .active: machine.boxActive()
            case .idle: machine.boxIdle()
            case .acknowledged: machine.transmitResult(request, .acknowledged)
            case .notAcknowledged: machine.transmitResult(request, .notAcknowledged)
            case .failed: machine.transmitResult(request, .failed("arbitration lost"))
            case .powerStatusAsked: machine.messageReceived(CECMessage(initiator: 0, destination: 4, opcode: CECMessage.Opcode.giveDevicePowerStatus))
            case .reloadWakeTV: machine.apply(.init(wakeTV: true, standby: true))
            }
        }
    }

    typealias Action = Machine.Action
    typealias MachineState = Machine.Report

    static func make(_ setup: Setup) -> Machine { setup.make() }
    static func apply(_ event: Event, to machine: inout Machine) -> Machine.Action { event.apply(to: &machine) }
    static func state(of machine: Machine) -> Machine.Report { machine.report }

    static func closed(active: Bool = false, woke: [UInt8] = []) -> Machine.Report {
        .init(state: "waiting for the adapter", active: active, woke: woke)
    }
    static func claiming(active: Bool = false, woke: [UInt8] = []) -> Machine.Report {
        .init(state: "claiming a logical address", active: active, woke: woke)
    }
    static func ready(_ addresses: Addresses = here, active: Bool = false, woke: [UInt8] = []) -> Machine.Report {
        .init(state: "ready", addresses: addresses, active: active, woke: woke)
    }

    /// Rows every open adapter has alike: results are reported, power status is answered when
    /// ready, and a reload sends nothing.
    static func results(ready: Bool) -> [(Event, Transition<Action, MachineState>)] {
        [
            (.acknowledged, .to(.none, nil)),
            (.notAcknowledged, .to(.noReceiver(request), nil)),
            (.failed, .to(.transmitFailed(request, "arbitration lost"), nil)),
            (.powerStatusAsked, .to(ready ? .answer(powerStatusAnswer) : .none, nil)),
            (.reloadWakeTV, .to(.none, nil)),
        ]
    }

    static let closedRows: [(Event, Transition<Action, MachineState>)] = [
        (.readySame, .impossible), (.readyElsewhere, .impossible), (.unclaimed, .impossible), (.lost, .impossible),
        (.acknowledged, .impossible), (.notAcknowledged, .impossible), (.failed, .impossible), (.powerStatusAsked, .impossible),
        (.reloadWakeTV, .to(.none, nil)),
    ]

    static let table: [Row] = rows([
        (.closed, closedRows + [
            (.opened, .to(.none, claiming())),
            // Remembered: announced once the adapter is ready.
            (.active, .to(.none, closed(active: true))),
            (.idle, .impossible),
        ]),
        (.closedActive, closedRows + [
            (.opened, .to(.none, claiming(active: true))),
            (.active, .impossible),
            (.idle, .to(.none, closed())),
        ]),
        (.claiming, results(ready: false) + [
            (.opened, .impossible),
            // Nothing plays: on the bus without a word.
            (.readySame, .to(.none, ready())),
            (.readyElsewhere, .to(.none, ready(elsewhere))),
            (.unclaimed, .to(.none, nil)),
            (.lost, .to(.none, closed())),
            (.active, .to(.none, claiming(active: true))),
            (.idle, .impossible),
        ]),
        (.claimingActive, results(ready: false) + [
            (.opened, .impossible),
            // Audio plays already: the adapter that came late announces it.
            (.readySame, .to(.announce([request]), ready(active: true, woke: [5]))),
            (.readyElsewhere, .to(.announce([.systemAudioModeRequest(from: 8, physicalAddress: 0x3200)]), ready(elsewhere, active: true, woke: [5]))),
            (.unclaimed, .to(.none, nil)),
            (.lost, .to(.none, closed(active: true))),
            (.active, .impossible),
            // Nothing was woken: nothing to put in standby.
            (.idle, .to(.none, claiming())),
        ]),
        (.ready, results(ready: true) + [
            (.opened, .impossible),
            (.readySame, .to(.none, nil)),
            (.readyElsewhere, .to(.none, ready(elsewhere))),
            (.unclaimed, .to(.none, claiming())),
            (.lost, .to(.none, closed())),
            // The TV is left alone without --cec-wake-tv.
            (.active, .to(.announce([request]), ready(active: true, woke: [5]))),
            (.idle, .impossible),
        ]),
        (.readyActive, results(ready: true) + [
            (.opened, .impossible),
            (.readySame, .to(.none, nil)),
            // An HDMI replug while playing: the audio system hears of the new address.
            (.readyElsewhere, .to(.announce([.systemAudioModeRequest(from: 8, physicalAddress: 0x3200)]), ready(elsewhere, active: true, woke: [5]))),
            (.unclaimed, .to(.none, claiming(active: true, woke: [5]))),
            (.lost, .to(.none, closed(active: true, woke: [5]))),
            (.active, .impossible),
            // --cec-standby: Standby to what was woken, and only that.
            (.idle, .to(.announce([.standby(from: 4, to: 5)]), ready())),
        ]),
        (.readyActiveWakeTV, results(ready: true) + [
            (.opened, .impossible),
            (.readySame, .to(.none, nil)),
            (.readyElsewhere, .to(.announce([.systemAudioModeRequest(from: 8, physicalAddress: 0x3200), .imageViewOn(from: 8),
                                             .activeSource(from: 8, physicalAddress: 0x3200)]), ready(elsewhere, active: true, woke: [5, 0]))),
            (.unclaimed, .to(.none, claiming(active: true, woke: [5, 0]))),
            (.lost, .to(.none, closed(active: true, woke: [5, 0]))),
            (.active, .impossible),
            (.idle, .to(.announce([.standby(from: 4, to: 5), .standby(from: 4, to: 0)]), ready())),
        ]),
    ])

    @Test("the table holds every state × every event once")
    func exhaustive() { Self.expectExhaustive() }

    @Test("each event leads to its action and state", arguments: possible)
    func row(_ row: Row) { Self.expect(row) }

    @Test("an event that cannot happen is a precondition failure", arguments: impossible)
    func impossibleRow(_ row: Row) async {
        // As the other tables: an exit test captures its row from Swift 6.3 on.
        #if compiler(>=6.3)
        await #expect(processExitsWith: .failure) { [setup = row.setup as Setup, event = row.event as Event] in
            var machine = setup.make()
            _ = event.apply(to: &machine)
        }
        #endif
    }
}

/// The sequences the table's single steps do not show.
@Suite("CEC state machine, in sequence")
struct CECStateMachineTests {
    @Test("without --cec-standby the idle box sends nothing; a reload never sends")
    func noStandby() {
        var machine = CECStateMachine(settings: .init())
        _ = machine.adapterOpened()
        #expect(machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4) == .none)
        #expect(machine.boxActive() == .announce([.systemAudioModeRequest(from: 4, physicalAddress: 0x1000)]))
        #expect(machine.apply(.init(wakeTV: true, standby: true)) == .none)
        // The TV was not woken in this period: Standby goes to the audio system alone.
        #expect(machine.boxIdle() == .announce([.standby(from: 4, to: 5)]))
        #expect(machine.apply(.init(wakeTV: true, standby: false)) == .none)
        #expect(machine.boxActive() == .announce([.systemAudioModeRequest(from: 4, physicalAddress: 0x1000), .imageViewOn(from: 4),
                                                  .activeSource(from: 4, physicalAddress: 0x1000)]))
        #expect(machine.boxIdle() == .none)
    }

    @Test("a bus where nothing answers is said once, until something does")
    func noReceiverOnce() {
        var machine = CECStateMachine(settings: .init())
        _ = machine.adapterOpened()
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4)
        let request = CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x1000)
        #expect(machine.boxActive() == .announce([request]))
        #expect(machine.last?.outcome == nil)
        #expect(machine.transmitResult(request, .notAcknowledged) == .noReceiver(request))
        #expect(machine.last?.outcome == .notAcknowledged)
        _ = machine.boxIdle()
        _ = machine.boxActive()
        #expect(machine.transmitResult(request, .notAcknowledged) == .none)
        #expect(machine.transmitResult(request, .acknowledged) == .none)
        #expect(machine.last?.outcome == .acknowledged)
        #expect(machine.transmitResult(request, .notAcknowledged) == .noReceiver(request))
        // An answer's result is nobody's business but the log's debug line.
        #expect(machine.transmitResult(.featureAbort(from: 4, to: 0, opcode: 0x44), .notAcknowledged) == .none)
    }

    @Test("the audio system's Set System Audio Mode is shown")
    func systemAudioMode() {
        var machine = CECStateMachine(settings: .init())
        _ = machine.adapterOpened()
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4)
        #expect(machine.systemAudioMode == nil)
        #expect(machine.messageReceived(CECMessage(initiator: 5, destination: 15, opcode: CECMessage.Opcode.setSystemAudioMode, operands: [1])) == .none)
        #expect(machine.systemAudioMode == true)
        #expect(machine.messageReceived(CECMessage(initiator: 5, destination: 4, opcode: CECMessage.Opcode.setSystemAudioMode, operands: [0])) == .none)
        #expect(machine.systemAudioMode == false)
    }
}
