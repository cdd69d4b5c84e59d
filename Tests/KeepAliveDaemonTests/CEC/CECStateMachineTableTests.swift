import Testing

@testable import KeepAliveDaemon
import TestSupport
import CKeepAliveLinuxCEC

/// Every state of `--cec`'s state machine against every event: the action and the state it
/// leads to. The impossible ones are what its one owner never reports: an adapter opened twice
/// or lost while closed, the box active twice in a row, a transmission's result or a message
/// from a closed adapter.
@Suite("CEC state machine, every state × every event")
struct CECStateMachineTableTests: TransitionTable {
    typealias Machine = CECStateMachine
    typealias Addresses = CECStateMachine.Addresses

    static let t0 = ContinuousClock.now
    static let here = Addresses(physical: 0x2000, logical: 4)
    static let request = CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x2000)
    /// Made once, as `request` is: a message made inside the table's rows keeps its operands
    /// behind a pointer packed into the enum's spare bits, which LeakSanitizer cannot follow from
    /// the static table (it reported the three rows' 33-byte arrays as leaks).
    static let askAudio = CECMessage.giveDevicePowerStatus(from: 4, to: 5)
    static let ourSource = CECMessage.activeSource(from: 4, physicalAddress: 0x2000)
    static let audioStandbyReport = CECMessage(initiator: 5, destination: 4, opcode: CECMessage.Opcode.reportPowerStatus, operands: [1])
    static let audioOnReport = CECMessage(initiator: 5, destination: 4, opcode: CECMessage.Opcode.reportPowerStatus, operands: [0])
    static let broadcastStandby = CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.standby)
    static let askSource = CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.requestActiveSource)
    static let tvOnReport = CECMessage(initiator: 0, destination: 4, opcode: CECMessage.Opcode.reportPowerStatus, operands: [0])
    static let streamPathHere = CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.setStreamPath, operands: [0x20, 0x00])
    static let powerOnKey = CECMessage.userControlPressed(from: 4, to: 5, key: CECMessage.Key.powerOnFunction)
    static let keyReleased = CECMessage.userControlReleased(from: 4, to: 5)

    /// The states, reached through events. Every setup has `--cec-standby`;
    /// `readyActiveWakeTV` and `readyActiveTVOn` also `--cec-wake-tv`. `readyActive` and
    /// `readyActiveWakeTV` have woken what reported nothing before the wake, and the audio
    /// system confirmed it is on; `confirming` woke the audio system (it reported standby) and
    /// waits for its confirmation; `readyActiveTVOn` found both on (nothing woken, the box the
    /// source); `readyUnregistered` is on the bus as Unregistered (15).
    enum Setup: String, CaseIterable, Codable, Sendable {
        case closed, closedActive, claiming, leftAlone, lost, ready, readyActive, readyActiveWakeTV
        case confirming, readyUnregistered, readyActiveTVOn

        func make() -> Machine {
            var machine = Machine(settings: .init(wakeTV: self == .readyActiveWakeTV || self == .readyActiveTVOn, standby: true))
            if self == .closedActive { _ = machine.boxActive(now: t0) }
            if self == .closed || self == .closedActive { return machine }
            _ = machine.adapterOpened(configuration: self == .leftAlone ? .foreign : .none, physicalAddress: 0x2000)
            if self == .claiming || self == .leftAlone { return machine }
            _ = machine.adapterReady(physicalAddress: 0x2000, logicalAddress: self == .readyUnregistered ? 15 : 4, now: t0)
            if self == .lost { _ = machine.adapterUnclaimed(physicalAddress: 0x2000, now: t0) }
            if self == .readyActive || self == .readyActiveWakeTV {
                _ = machine.boxActive(now: t0)
                _ = machine.timerFired(now: t0 + .seconds(2))
                _ = machine.messageReceived(audioOnReport)
            }
            if self == .confirming {
                _ = machine.boxActive(now: t0)
                _ = machine.messageReceived(audioStandbyReport)
            }
            if self == .readyActiveTVOn {
                _ = machine.boxActive(now: t0)
                _ = machine.messageReceived(tvOnReport)
                _ = machine.messageReceived(audioOnReport)
            }
            return machine
        }
    }

    enum Event: String, CaseIterable, Codable, Sendable {
        case opened, openedForeign, ready, unplugged, cleared, lookAgain, lost, active, idle, timer
        case arbitrationLost, reportStandby, standby, requestActiveSource
        /// Issue 58: the configuration read after a state change (another program's, or
        /// keepalived's own), a wake the kernel aborted, Set Stream Path to the box, and a
        /// reload that names another adapter and adds --cec-take-over.
        case foreign, ours, aborted, streamPath, reloadElsewhere

        func apply(to machine: inout Machine) -> Machine.Action {
            switch self {
            case .opened: machine.adapterOpened(configuration: .none, physicalAddress: 0x2000)
            case .openedForeign: machine.adapterOpened(configuration: .foreign, physicalAddress: 0x2000)
            case .ready: machine.adapterReady(physicalAddress: 0x2000, logicalAddress: 4, now: t0)
            case .unplugged: machine.adapterUnclaimed(physicalAddress: nil, now: t0)
            case .cleared: machine.adapterUnclaimed(physicalAddress: 0x2000, now: t0)
            case .lookAgain: machine.adapterConfiguration(.none, physicalAddress: 0x2000)
            case .lost: machine.adapterLost()
            case .active: machine.boxActive(now: t0)
            case .idle: machine.boxIdle()
            case .timer: machine.timerFired(now: t0 + .seconds(100))
            case .arbitrationLost: machine.transmitResult(request, .failed("arbitration lost", retry: true))
            case .reportStandby: machine.messageReceived(audioStandbyReport)
            case .standby: machine.messageReceived(broadcastStandby)
            case .requestActiveSource: machine.messageReceived(askSource)
            case .foreign: machine.configurationChanged(.foreign, physicalAddress: 0x2000, now: t0)
            case .ours: machine.configurationChanged(.ours, physicalAddress: 0x2000, now: t0)
            case .aborted: machine.transmitResult(request, .failed("aborted"))
            case .streamPath: machine.messageReceived(streamPathHere)
            case .reloadElsewhere: machine.reload(.init(wakeTV: machine.settings.wakeTV, standby: true, takeOver: true), otherAdapter: true)
            }
        }
    }

    typealias Action = Machine.Action
    typealias MachineState = Machine.Report
    typealias Rows = [(Event, Transition<Action, MachineState>)]

    static func make(_ setup: Setup) -> Machine { setup.make() }
    static func apply(_ event: Event, to machine: inout Machine) -> Machine.Action { event.apply(to: &machine) }
    static func state(of machine: Machine) -> Machine.Report { machine.report }

    static func closed(active: Bool = false, woke: [UInt8] = [], source: Bool = false) -> Machine.Report {
        .init(state: "waiting for the adapter", active: active, woke: woke, source: source)
    }
    static func claiming(active: Bool = false, woke: [UInt8] = [], source: Bool = false) -> Machine.Report {
        .init(state: "claiming a logical address", active: active, woke: woke, source: source)
    }
    static func leftAlone(active: Bool = false) -> Machine.Report {
        .init(state: "left alone: another program configured the adapter (--cec-take-over takes it)", active: active)
    }
    static func lost(active: Bool = false, woke: [UInt8] = [], source: Bool = false) -> Machine.Report {
        .init(state: "logical address lost (another program cleared it?): claiming it again", active: active, woke: woke, source: source)
    }
    static func ready(active: Bool = false, woke: [UInt8] = [], source: Bool = false, switchedOff: [UInt8] = []) -> Machine.Report {
        .init(state: "ready", addresses: here, active: active, woke: woke, source: source, switchedOff: switchedOff)
    }
    static func unregistered(active: Bool = false) -> Machine.Report {
        .init(state: "ready", addresses: Addresses(physical: 0x2000, logical: 15), active: active)
    }

    static let closedRows: Rows = [
        (.ready, .impossible), (.unplugged, .impossible), (.cleared, .impossible), (.lookAgain, .impossible), (.lost, .impossible),
        (.timer, .to(.none, nil)), (.arbitrationLost, .impossible), (.reportStandby, .impossible), (.standby, .impossible),
        (.requestActiveSource, .impossible),
        // Nothing open: no configuration to read, nothing sent or received, nothing to let go.
        (.foreign, .impossible), (.ours, .impossible), (.aborted, .impossible), (.streamPath, .impossible),
        (.reloadElsewhere, .to(.none, nil)),
    ]
    /// Open but not ready: nothing is answered, nothing retried; a Standby while idle changes nothing.
    static let notReadyRows: Rows = [
        (.opened, .impossible), (.openedForeign, .impossible),
        (.arbitrationLost, .to(.transmitFailed(request, "arbitration lost"), nil)),
        (.reportStandby, .to(.none, nil)), (.standby, .to(.none, nil)), (.requestActiveSource, .to(.none, nil)),
        (.aborted, .to(.transmitFailed(request, "aborted"), nil)),
        // Without an address of its own the box cannot be the source.
        (.streamPath, .to(.none, nil)),
    ]
    static let openRows: Rows = [(.opened, .impossible), (.openedForeign, .impossible), (.lookAgain, .impossible)]

    static let table: [Row] = rows([
        (.closed, closedRows + [
            (.opened, .to(.claim(clearFirst: false), claiming())),
            // Another program's configuration is not taken without --cec-take-over.
            (.openedForeign, .to(.leaveAlone, leftAlone())),
            // Remembered: announced once the adapter is ready.
            (.active, .to(.none, closed(active: true))),
            (.idle, .impossible),
        ]),
        (.closedActive, closedRows + [
            (.opened, .to(.claim(clearFirst: false), claiming(active: true))),
            (.openedForeign, .to(.leaveAlone, leftAlone(active: true))),
            (.active, .impossible),
            (.idle, .to(.none, closed())),
        ]),
        (.claiming, notReadyRows + [
            // Nothing plays: on the bus without a word.
            (.ready, .to(.none, ready())),
            (.unplugged, .to(.none, nil)),
            (.cleared, .to(.none, nil)),
            (.lookAgain, .impossible),
            (.lost, .to(.none, closed())),
            (.active, .to(.none, claiming(active: true))),
            (.idle, .impossible),
            (.timer, .to(.none, nil)),
            // Another program configured the adapter while keepalived's claim ran: left alone.
            (.foreign, .to(.leaveAlone, leftAlone())),
            (.ours, .to(.none, nil)),
            (.reloadElsewhere, .to(.letGo, closed())),
        ]),
        (.leftAlone, notReadyRows + [
            (.ready, .impossible), (.unplugged, .impossible), (.cleared, .impossible),
            // The other program let go: keepalived claims its address.
            (.lookAgain, .to(.claim(clearFirst: false), claiming())),
            (.lost, .to(.none, closed())),
            (.active, .to(.none, leftAlone(active: true))),
            (.idle, .impossible),
            (.timer, .to(.none, nil)),
            // The same program, still there: said once already.
            (.foreign, .to(.none, nil)),
            (.ours, .to(.none, claiming())),
            // Issue 58: the adapter left alone is let go as it is, --cec-take-over or not.
            (.reloadElsewhere, .to(.letGo, closed())),
        ]),
        (.lost, notReadyRows + [
            (.ready, .to(.none, ready())),
            (.unplugged, .to(.none, nil)),
            (.cleared, .to(.none, nil)),
            (.lookAgain, .to(.claim(clearFirst: false), claiming())),
            (.lost, .to(.none, closed())),
            (.active, .to(.none, lost(active: true))),
            (.idle, .impossible),
            // The back-off is over: the configuration is read again, then claimed.
            (.timer, .to(.lookAgain, nil)),
            // Whoever cleared it claimed its own: left alone, without waiting for the back-off.
            (.foreign, .to(.leaveAlone, leftAlone())),
            (.ours, .to(.none, nil)),
            (.reloadElsewhere, .to(.letGo, closed())),
        ]),
        (.ready, openRows + [
            (.ready, .to(.none, nil)),
            (.unplugged, .to(.none, claiming())),
            // Cleared by another program: claimed again after the back-off.
            (.cleared, .to(.addressLost(reclaimIn: .seconds(2)), lost())),
            (.lost, .to(.none, closed())),
            // Who is on, before anything is woken.
            (.active, .to(.announce([askAudio]), ready(active: true))),
            (.idle, .impossible),
            (.timer, .to(.none, nil)),
            (.arbitrationLost, .to(.retry(request, "arbitration lost"), nil)),
            (.reportStandby, .to(.none, nil)),
            (.standby, .to(.none, nil)),
            // Not the active source: not answered.
            (.requestActiveSource, .to(.none, nil)),
            // Issue 58: another program took the adapter; whatever it sends is not keepalived's.
            (.foreign, .to(.leaveAlone, leftAlone())),
            (.ours, .to(.none, nil)),
            (.aborted, .to(.transmitFailed(request, "aborted"), nil)),
            // The TV routes to the box: it answers and is the source.
            (.streamPath, .to(.answer(ourSource), ready(source: true))),
            (.reloadElsewhere, .to(.letGo, closed())),
        ]),
        (.readyActive, openRows + [
            // The address back in the same period: nothing woken again.
            (.ready, .to(.none, nil)),
            (.unplugged, .to(.none, claiming(active: true, woke: [5]))),
            (.cleared, .to(.addressLost(reclaimIn: .seconds(2)), lost(active: true, woke: [5]))),
            (.lost, .to(.none, closed(active: true, woke: [5]))),
            (.active, .impossible),
            // --cec-standby: Standby to what was woken, and only that.
            (.idle, .to(.announce([.standby(from: 4, to: 5)]), ready())),
            (.timer, .to(.none, nil)),
            (.arbitrationLost, .to(.retry(request, "arbitration lost"), nil)),
            // The user switched it off: not woken again, nor put in standby, in this period.
            (.reportStandby, .to(.none, ready(active: true, woke: [5], switchedOff: [5]))),
            (.standby, .to(.none, ready(active: true, woke: [5], switchedOff: [0, 5]))),
            (.requestActiveSource, .to(.none, nil)),
            // What it woke is forgotten: never put in standby by keepalived from the other program's address.
            (.foreign, .to(.leaveAlone, leftAlone(active: true))),
            (.ours, .to(.none, nil)),
            // Only an acknowledged request counts: not woken, and due again.
            (.aborted, .to(.transmitFailed(request, "aborted"), ready(active: true))),
            (.streamPath, .to(.answer(ourSource), ready(active: true, woke: [5], source: true))),
            (.reloadElsewhere, .to(.letGo, closed(active: true, woke: [5]))),
        ]),
        (.readyActiveWakeTV, openRows + [
            (.ready, .to(.none, nil)),
            // A TV that pulls hotplug low in standby is not woken again from Unregistered: its
            // Image View On was sent in this period (libcec #239/#403).
            (.unplugged, .to(.none, claiming(active: true, woke: [5, 0], source: true))),
            (.cleared, .to(.addressLost(reclaimIn: .seconds(2)), lost(active: true, woke: [5, 0], source: true))),
            (.lost, .to(.none, closed(active: true, woke: [5, 0], source: true))),
            (.active, .impossible),
            (.idle, .to(.announce([.standby(from: 4, to: 5), .standby(from: 4, to: 0)]), ready())),
            (.timer, .to(.none, nil)),
            (.arbitrationLost, .to(.retry(request, "arbitration lost"), nil)),
            (.reportStandby, .to(.none, ready(active: true, woke: [5, 0], source: true, switchedOff: [5]))),
            (.standby, .to(.none, ready(active: true, woke: [5, 0], switchedOff: [0, 5]))),
            // The active source answers.
            (.requestActiveSource, .to(.answer(ourSource), nil)),
            (.foreign, .to(.leaveAlone, leftAlone(active: true))),
            (.ours, .to(.none, nil)),
            (.aborted, .to(.transmitFailed(request, "aborted"), ready(active: true, woke: [0], source: true))),
            (.streamPath, .to(.answer(ourSource), nil)),
            (.reloadElsewhere, .to(.letGo, closed(active: true, woke: [5, 0], source: true))),
        ]),
        // The audio system woken (it reported standby), its confirmation awaited.
        (.confirming, openRows + [
            (.ready, .to(.none, nil)),
            (.unplugged, .to(.none, claiming(active: true, woke: [5]))),
            (.cleared, .to(.addressLost(reclaimIn: .seconds(2)), lost(active: true, woke: [5]))),
            (.lost, .to(.none, closed(active: true, woke: [5]))),
            (.active, .impossible),
            (.idle, .to(.announce([.standby(from: 4, to: 5)]), ready())),
            // No answer by the deadline: the wake stands, without the key.
            (.timer, .to(.none, nil)),
            (.arbitrationLost, .to(.retry(request, "arbitration lost"), nil)),
            // Still in standby after the request: the power-on key.
            (.reportStandby, .to(.announce([powerOnKey, keyReleased]), nil)),
            // The user's Standby: never the key after it.
            (.standby, .to(.none, ready(active: true, woke: [5], switchedOff: [0, 5]))),
            (.requestActiveSource, .to(.none, nil)),
            (.foreign, .to(.leaveAlone, leftAlone(active: true))),
            (.ours, .to(.none, nil)),
            (.aborted, .to(.transmitFailed(request, "aborted"), ready(active: true))),
            (.streamPath, .to(.answer(ourSource), ready(active: true, woke: [5], source: true))),
            (.reloadElsewhere, .to(.letGo, closed(active: true, woke: [5]))),
        ]),
        // Unregistered: nobody's answer reaches keepalived, so nothing is woken or put in standby.
        (.readyUnregistered, openRows + [
            (.ready, .to(.none, ready())),
            (.unplugged, .to(.none, claiming())),
            (.cleared, .to(.addressLost(reclaimIn: .seconds(2)), lost())),
            (.lost, .to(.none, closed())),
            (.active, .to(.none, unregistered(active: true))),
            (.idle, .impossible),
            (.timer, .to(.none, nil)),
            (.arbitrationLost, .to(.retry(request, "arbitration lost"), nil)),
            (.reportStandby, .to(.none, nil)),
            (.standby, .to(.none, nil)),
            (.requestActiveSource, .to(.none, nil)),
            (.foreign, .to(.leaveAlone, leftAlone())),
            (.ours, .to(.none, nil)),
            (.aborted, .to(.transmitFailed(request, "aborted"), nil)),
            (.streamPath, .to(.none, nil)),
            (.reloadElsewhere, .to(.letGo, closed())),
        ]),
        // Both found on: nothing woken, the box the source.
        (.readyActiveTVOn, openRows + [
            (.ready, .to(.none, nil)),
            // The TV switched off by its remote pulls hotplug low: not woken again (issue 58).
            (.unplugged, .to(.none, claiming(active: true, source: true))),
            (.cleared, .to(.addressLost(reclaimIn: .seconds(2)), lost(active: true, source: true))),
            (.lost, .to(.none, closed(active: true, source: true))),
            (.active, .impossible),
            // Nothing woken: no Standby; no longer the source, without Inactive Source.
            (.idle, .to(.none, ready())),
            (.timer, .to(.none, nil)),
            (.arbitrationLost, .to(.retry(request, "arbitration lost"), nil)),
            (.reportStandby, .to(.none, nil)),
            (.standby, .to(.none, ready(active: true, switchedOff: [0, 5]))),
            (.requestActiveSource, .to(.answer(ourSource), nil)),
            (.foreign, .to(.leaveAlone, leftAlone(active: true))),
            (.ours, .to(.none, nil)),
            (.aborted, .to(.transmitFailed(request, "aborted"), nil)),
            (.streamPath, .to(.answer(ourSource), nil)),
            (.reloadElsewhere, .to(.letGo, closed(active: true, source: true))),
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

/// The sequences the table's single steps do not show: one test per rule of issue 48.
@Suite("CEC state machine, in sequence")
struct CECStateMachineTests {
    static let t0 = ContinuousClock.now
    static let later = t0 + .seconds(5)

    static func report(_ from: UInt8, _ status: UInt8) -> CECMessage {
        CECMessage(initiator: from, destination: 4, opcode: CECMessage.Opcode.reportPowerStatus, operands: [status])
    }

    /// Opened, claimed and ready at 1.0.0.0, logical address 4.
    static func ready(wakeTV: Bool = false, standby: Bool = true, takeOver: Bool = false) -> CECStateMachine {
        var machine = CECStateMachine(settings: .init(wakeTV: wakeTV, standby: standby, takeOver: takeOver))
        _ = machine.adapterOpened(configuration: .none, physicalAddress: 0x1000)
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: t0)
        return machine
    }

    @Test("without --cec-standby the idle box sends nothing; a reload never sends")
    func noStandby() {
        var machine = Self.ready(standby: false)
        #expect(machine.boxActive(now: Self.t0) == .announce([.giveDevicePowerStatus(from: 4, to: 5)]))
        #expect(machine.messageReceived(Self.report(5, 1)) == .announce([.systemAudioModeRequest(from: 4, physicalAddress: 0x1000),
                                                                      .giveDevicePowerStatus(from: 4, to: 5)]))
        #expect(machine.apply(.init(wakeTV: true, standby: true)) == .none)
        // The TV was not woken in this period: Standby goes to the audio system alone.
        #expect(machine.boxIdle() == .announce([.standby(from: 4, to: 5)]))
        #expect(machine.apply(.init(wakeTV: true, standby: false)) == .none)
        _ = machine.boxActive(now: Self.t0)
        #expect(machine.timerFired(now: Self.later) == .announce([.systemAudioModeRequest(from: 4, physicalAddress: 0x1000), .giveDevicePowerStatus(from: 4, to: 5),
                                                                 .imageViewOn(from: 4), .activeSource(from: 4, physicalAddress: 0x1000)]))
        #expect(machine.boxIdle() == .none)
    }

    @Test("the power statuses are waited for until the deadline, no longer; early timers do nothing")
    func askingDeadline() {
        var machine = Self.ready(wakeTV: true)
        #expect(machine.deadline == nil)
        #expect(machine.boxActive(now: Self.t0) == .announce([.giveDevicePowerStatus(from: 4, to: 5), .giveDevicePowerStatus(from: 4, to: 0)]))
        #expect(machine.deadline == Self.t0 + CECStateMachine.powerStatusWait)
        #expect(machine.timerFired(now: Self.t0) == .none)
        // The TV answers on; the audio system's silence counts as off.
        #expect(machine.messageReceived(Self.report(0, 0)) == .none)
        #expect(machine.timerFired(now: Self.later) == .announce([.systemAudioModeRequest(from: 4, physicalAddress: 0x1000), .giveDevicePowerStatus(from: 4, to: 5),
                                                                 .activeSource(from: 4, physicalAddress: 0x1000)]))
        // The audio system's confirmation has its own deadline (issue 58).
        #expect(machine.deadline == Self.t0 + CECStateMachine.powerStatusWait + CECStateMachine.confirmWait)
        #expect(machine.waking)
        #expect(machine.timerFired(now: Self.later + .seconds(10)) == .none)
        #expect(machine.deadline == nil && !machine.waking)
        #expect(machine.report.woke == [5])
    }

    @Test("what was already on is not put in standby: the receiver on before the wake")
    func alreadyOn() {
        var machine = Self.ready()
        _ = machine.boxActive(now: Self.t0)
        // On: the request still asks it for the box's sound, without a confirmation.
        #expect(machine.messageReceived(Self.report(5, 0)) == .announce([.systemAudioModeRequest(from: 4, physicalAddress: 0x1000)]))
        #expect(machine.report.woke == [])
        #expect(machine.boxIdle() == .none)
    }

    @Test("the TV on another source, then a short sound and the idle time: no Standby to anything")
    func anotherSource() {
        var machine = Self.ready(wakeTV: true)
        _ = machine.boxActive(now: Self.t0)
        _ = machine.timerFired(now: Self.later)
        #expect(machine.report.woke == [5, 0])
        #expect(machine.report.source)
        // The user picks another input (a set-top box at 2.0.0.0).
        #expect(machine.messageReceived(CECMessage(initiator: 3, destination: 15, opcode: CECMessage.Opcode.activeSource, operands: [0x20, 0x00])) == .none)
        #expect(!machine.report.source)
        #expect(machine.boxIdle() == .none)
        // Without the TV: the audio system alone, another source since the wake.
        var audio = Self.ready()
        _ = audio.boxActive(now: Self.t0)
        _ = audio.timerFired(now: Self.later)
        #expect(audio.messageReceived(CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.routingChange, operands: [0x10, 0x00, 0x20, 0x00])) == .none)
        #expect(audio.boxIdle() == .none)
        // A Routing Change to the box itself is no other source.
        var ours = Self.ready()
        _ = ours.boxActive(now: Self.t0)
        _ = ours.timerFired(now: Self.later)
        _ = ours.messageReceived(CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.routingChange, operands: [0x20, 0x00, 0x10, 0x00]))
        #expect(ours.boxIdle() == .announce([.standby(from: 4, to: 5)]))
    }

    @Test("the user's Standby during an active period: no re-wake in it, not even at a new address; the next period wakes")
    func userStandby() {
        var machine = Self.ready(wakeTV: true)
        _ = machine.boxActive(now: Self.t0)
        _ = machine.timerFired(now: Self.later)
        #expect(machine.messageReceived(CECMessage(initiator: 0, destination: 4, opcode: CECMessage.Opcode.standby)) == .none)
        // The TV in standby pulls hotplug low, then is switched on again by the user.
        #expect(machine.adapterUnclaimed(physicalAddress: nil, now: Self.later) == .none)
        #expect(machine.adapterReady(physicalAddress: 0x2000, logicalAddress: 8, now: Self.later) == .none)
        #expect(machine.boxIdle() == .none)
        #expect(machine.boxActive(now: Self.later) == .announce([.giveDevicePowerStatus(from: 8, to: 5), .giveDevicePowerStatus(from: 8, to: 0)]))
    }

    @Test("a hotplug-low TV is woken with Image View On from Unregistered, once, then the rest at its address")
    func hotplugLow() {
        var machine = CECStateMachine(settings: .init(wakeTV: true, standby: true))
        _ = machine.adapterOpened(configuration: .none, physicalAddress: nil)
        let wake = machine.boxActive(now: Self.t0)
        #expect(wake == .announce([.imageViewOn(from: 15)]))
        #expect(CECMessage.imageViewOn(from: 15).bytes == [0xF0, 0x04])
        #expect(machine.adapterUnclaimed(physicalAddress: nil, now: Self.t0) == .none)
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: Self.t0)
        #expect(machine.timerFired(now: Self.later) == .announce([.systemAudioModeRequest(from: 4, physicalAddress: 0x1000), .giveDevicePowerStatus(from: 4, to: 5),
                                                                 .activeSource(from: 4, physicalAddress: 0x1000)]))
        #expect(machine.report.woke == [0, 5])
        // Without --cec-wake-tv the TV is left alone.
        var alone = CECStateMachine(settings: .init(standby: true))
        _ = alone.adapterOpened(configuration: .none, physicalAddress: nil)
        #expect(alone.boxActive(now: Self.t0) == .none)
    }

    @Test("Request Active Source answered only while the box is the source; Set Stream Path to the box makes it the source, and is answered (issue 58)")
    func activeSource() {
        var machine = Self.ready(wakeTV: true)
        let request = CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.requestActiveSource)
        let streamPath = CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.setStreamPath, operands: [0x10, 0x00])
        let elsewhere = CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.setStreamPath, operands: [0x20, 0x00])
        let answer = CECStateMachine.Action.answer(.activeSource(from: 4, physicalAddress: 0x1000))
        #expect(machine.messageReceived(request) == .none)
        _ = machine.boxActive(now: Self.t0)
        _ = machine.timerFired(now: Self.later)
        #expect(machine.messageReceived(request) == answer)
        #expect(machine.messageReceived(streamPath) == answer)
        // Idle: no longer the source, without a word (no Inactive Source), whatever --cec-standby says.
        _ = machine.apply(.init(wakeTV: true, standby: false))
        _ = machine.boxIdle()
        #expect(!machine.report.source)
        #expect(machine.messageReceived(request) == .none)
        // The TV routes to another address, then to the box: the box answers and is the source again.
        _ = machine.messageReceived(elsewhere)
        #expect(machine.messageReceived(request) == .none)
        #expect(machine.messageReceived(streamPath) == answer)
        #expect(machine.report.source)
        #expect(machine.messageReceived(request) == answer)
        // From Unregistered an Active Source would name nobody: not answered.
        var unregistered = CECStateMachine(settings: .init())
        _ = unregistered.adapterOpened(configuration: .none, physicalAddress: 0x1000)
        _ = unregistered.adapterReady(physicalAddress: 0x1000, logicalAddress: 15, now: Self.t0)
        #expect(unregistered.messageReceived(streamPath) == .none)
    }

    @Test("a lost address is claimed again after a back-off that doubles up to its bound while it keeps being lost")
    func reclaim() {
        var machine = Self.ready()
        #expect(machine.adapterUnclaimed(physicalAddress: 0x1000, now: Self.t0) == .addressLost(reclaimIn: .seconds(2)))
        #expect(machine.deadline == Self.t0 + .seconds(2))
        #expect(machine.timerFired(now: Self.t0 + .seconds(1)) == .none)
        #expect(machine.timerFired(now: Self.t0 + .seconds(2)) == .lookAgain)
        // Cleared again before the kernel claimed it: longer.
        #expect(machine.adapterConfiguration(.none, physicalAddress: 0x1000) == .claim(clearFirst: false))
        #expect(machine.adapterUnclaimed(physicalAddress: 0x1000, now: Self.t0) == .none)
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: Self.t0)
        #expect(machine.adapterUnclaimed(physicalAddress: 0x1000, now: Self.t0) == .addressLost(reclaimIn: .seconds(4)))
        _ = machine.timerFired(now: Self.later)
        // Another program configured it meanwhile: left alone.
        #expect(machine.adapterConfiguration(.foreign, physicalAddress: 0x1000) == .leaveAlone)
        #expect(machine.leftAlone)
        #expect(machine.adapterConfiguration(.foreign, physicalAddress: 0x1000) == .none)
        var bound = CECStateMachine(settings: .init())
        _ = bound.adapterOpened(configuration: .ours, physicalAddress: 0x1000)
        var waits: [Duration] = []
        for _ in 0..<8 {
            _ = bound.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: Self.t0)
            if case .addressLost(let wait) = bound.adapterUnclaimed(physicalAddress: 0x1000, now: Self.t0) { waits.append(wait) }
            _ = bound.timerFired(now: Self.t0 + .seconds(600))
            _ = bound.adapterConfiguration(.ours, physicalAddress: 0x1000)
        }
        #expect(waits == [2, 4, 8, 16, 32, 60, 60, 60].map { .seconds($0) })
        // Kept for a minute: the next loss starts over.
        _ = bound.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: Self.t0)
        #expect(bound.adapterUnclaimed(physicalAddress: 0x1000, now: Self.t0 + .seconds(61)) == .addressLost(reclaimIn: .seconds(2)))
    }

    @Test("another program's configuration: left alone without --cec-take-over, taken with it, or on a reload that adds it")
    func foreign() {
        var machine = CECStateMachine(settings: .init())
        #expect(machine.adapterOpened(configuration: .foreign, physicalAddress: 0x1000) == .leaveAlone)
        #expect(machine.report.state.hasPrefix("left alone"))
        #expect(machine.apply(.init(takeOver: true)) == .lookAgain)
        #expect(machine.adapterConfiguration(.foreign, physicalAddress: 0x1000) == .claim(clearFirst: true))
        var taking = CECStateMachine(settings: .init(takeOver: true))
        #expect(taking.adapterOpened(configuration: .foreign, physicalAddress: 0x1000) == .claim(clearFirst: true))
        var ours = CECStateMachine(settings: .init())
        #expect(ours.adapterOpened(configuration: .ours, physicalAddress: 0x1000) == .none)
    }

    @Test("an audio system still in standby after System Audio Mode Request gets the power-on key, once")
    func confirmWake() {
        var machine = Self.ready()
        _ = machine.boxActive(now: Self.t0)
        _ = machine.messageReceived(Self.report(5, 1))
        let key = CECMessage.userControlPressed(from: 4, to: 5, key: 0x6D)
        #expect(key.bytes == [0x45, 0x44, 0x6D])
        #expect(CECMessage.userControlReleased(from: 4, to: 5).bytes == [0x45, 0x45])
        #expect(machine.messageReceived(Self.report(5, 3)) == .announce([key, .userControlReleased(from: 4, to: 5)]))
        #expect(machine.last?.message == key)
        // Its later standby is the user's.
        #expect(machine.messageReceived(Self.report(5, 1)) == .none)
        #expect(machine.report.switchedOff == [5])
        // On after the request: nothing more.
        var woke = Self.ready()
        _ = woke.boxActive(now: Self.t0)
        _ = woke.messageReceived(Self.report(5, 1))
        #expect(woke.messageReceived(Self.report(5, 2)) == .none)
        #expect(woke.boxIdle() == .announce([.standby(from: 4, to: 5)]))
        // The second question unanswered: a standby reported later is the user's, never the key.
        var silent = Self.ready()
        _ = silent.boxActive(now: Self.t0)
        _ = silent.messageReceived(Self.report(5, 1))
        #expect(silent.transmitResult(.giveDevicePowerStatus(from: 4, to: 5), .notAcknowledged) == .none)
        #expect(silent.messageReceived(Self.report(5, 1)) == .none)
        #expect(silent.report.switchedOff == [5])
        #expect(silent.boxIdle() == .none)
    }

    @Test("a Feature Abort of keepalived's message is said, and status does not show it acknowledged")
    func featureAbort() {
        var machine = Self.ready()
        _ = machine.boxActive(now: Self.t0)
        _ = machine.messageReceived(Self.report(5, 0))
        let request = CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x1000)
        _ = machine.transmitResult(request, .acknowledged)
        let abort = CECMessage(initiator: 5, destination: 4, opcode: CECMessage.Opcode.featureAbort, operands: [0x70, 0x04])
        #expect(machine.messageReceived(abort) == .refused(abort))
        #expect(machine.last?.outcome == .refused("refused"))
        #expect("\(abort)" == "5→4 Feature Abort (System Audio Mode Request: refused)")
        // Of something keepalived never sends: nobody's business.
        #expect(machine.messageReceived(CECMessage(initiator: 5, destination: 4, opcode: CECMessage.Opcode.featureAbort, operands: [0x9F, 0x00])) == .none)
    }

    @Test("arbitration lost or a timeout: sent again once per period; other failures are said")
    func retryOnce() {
        var machine = Self.ready()
        _ = machine.boxActive(now: Self.t0)
        _ = machine.messageReceived(Self.report(5, 0))
        let request = CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x1000)
        #expect(machine.transmitResult(request, .failed("timed out", retry: true)) == .retry(request, "timed out"))
        #expect(machine.transmitResult(request, .failed("timed out", retry: true)) == .transmitFailed(request, "timed out"))
        #expect(machine.transmitResult(request, .failed("low drive on the bus")) == .transmitFailed(request, "low drive on the bus"))
        #expect(CECAdapter.outcome(UInt8(CEC_TX_STATUS_ARB_LOST)) == .failed("arbitration lost", retry: true))
        #expect(CECAdapter.outcome(UInt8(CEC_TX_STATUS_LOW_DRIVE)) == .failed("low drive on the bus", retry: false))
    }

    @Test("a power status question nobody acknowledges counts as off: the wake goes on at once")
    func unansweredQuestion() {
        var machine = Self.ready()
        _ = machine.boxActive(now: Self.t0)
        #expect(machine.transmitResult(.giveDevicePowerStatus(from: 4, to: 5), .notAcknowledged)
            == .announce([.systemAudioModeRequest(from: 4, physicalAddress: 0x1000), .giveDevicePowerStatus(from: 4, to: 5)]))
    }

    @Test("a bus where nothing answers is said once, until something does")
    func noReceiverOnce() {
        var machine = Self.ready(standby: false)
        let request = CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x1000)
        _ = machine.boxActive(now: Self.t0)
        _ = machine.messageReceived(Self.report(5, 0))
        #expect(machine.last?.outcome == nil)
        #expect(machine.transmitResult(request, .notAcknowledged) == .noReceiver(request))
        #expect(machine.last?.outcome == .notAcknowledged)
        _ = machine.boxIdle()
        _ = machine.boxActive(now: Self.t0)
        _ = machine.messageReceived(Self.report(5, 0))
        #expect(machine.transmitResult(request, .notAcknowledged) == .none)
        #expect(machine.transmitResult(request, .acknowledged) == .none)
        #expect(machine.last?.outcome == .acknowledged)
        #expect(machine.transmitResult(request, .notAcknowledged) == .noReceiver(request))
        // An answer's result is nobody's business but the log's debug line.
        #expect(machine.transmitResult(.featureAbort(from: 4, to: 0, opcode: 0x44), .notAcknowledged) == .none)
    }

    @Test("the audio system's Set System Audio Mode is shown")
    func systemAudioMode() {
        var machine = Self.ready()
        #expect(machine.systemAudioMode == nil)
        #expect(machine.messageReceived(CECMessage(initiator: 5, destination: 15, opcode: CECMessage.Opcode.setSystemAudioMode, operands: [1])) == .none)
        #expect(machine.systemAudioMode == true)
        #expect(machine.messageReceived(CECMessage(initiator: 5, destination: 4, opcode: CECMessage.Opcode.setSystemAudioMode, operands: [0])) == .none)
        #expect(machine.systemAudioMode == false)
    }
}
