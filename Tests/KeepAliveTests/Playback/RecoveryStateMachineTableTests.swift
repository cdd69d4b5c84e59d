import Glibc
import Testing
@testable import KeepAlive
import TestSupport

/// Every state of the recovery state machine against every event: the action and the state it
/// leads to, and a precondition failure for the events that cannot happen in it.
@Suite("Recovery state machine, every state × every event")
struct RecoveryStateMachineTableTests: TransitionTable {
    typealias Machine = RecoveryStateMachine
    typealias Outage = RecoveryStateMachine.Outage

    static let start = ContinuousClock.now
    static let policy = RetryPolicy(initialDelay: .milliseconds(50), maximumDelay: .seconds(2), jitter: 0, stablePeriod: .seconds(10))
    static func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }
    static let settle = Machine.settleDelay
    static let server = "the sound server's socket was created again (server restarted)"

    /// The states, each reached through events from a new machine; events come at `at(1000)`.
    enum Setup: String, CaseIterable, Codable, Sendable {
        /// New.
        case starting
        /// Opened, not played yet.
        case announced
        /// Played since `at(0)`.
        case playing
        /// Played since `at(0)`, then opened again (for a new configuration).
        case reopened
        /// Played, then an underrun at `at(500)` was repaired in place.
        case repairing
        /// The first open failed at `at(0)` (one backoff step taken: the next is 100 ms).
        case waiting
        case stopped

        func make() -> Machine {
            var machine = Machine(retry: RecoveryStateMachineTableTests.policy, seed: 1)
            switch self {
            case .starting:
                break
            case .announced:
                _ = machine.opened()
            case .playing, .reopened, .repairing:
                machine.attemptingOpen(seen: [])
                _ = machine.opened()
                _ = machine.flowing(at: at(0))
                if self == .reopened { _ = machine.opened() }
                if self == .repairing { _ = machine.streamFailed(-EPIPE, message: "m", dryAt: nil, seen: [], at: at(500)) }
            case .waiting:
                _ = machine.openFailed(-ENOENT, message: "m", seen: [], at: at(0))
            case .stopped:
                _ = machine.stopped()
            }
            return machine
        }

        /// Whether an open was announced in this state.
        var announced: Bool { self == .announced || self == .reopened }
    }

    enum Event: String, CaseIterable, Codable, Sendable {
        case attemptingOpen, attemptingOpenAfterServer, opened, openFailed, openFailedAfterServer, cannotRender, flowing
        case underrun, underrunAfterServer, unplugged, repairFailed, lost
        case waitSawNothing, waitSawCard, waitSawServer, playSawCard, playSawServer, stopped, reconfigured

        func apply(to machine: inout Machine) -> Machine.Action {
            let now = at(1000)
            switch self {
            case .attemptingOpen: machine.attemptingOpen(seen: []); return .none
            case .attemptingOpenAfterServer: machine.attemptingOpen(seen: [.server]); return .none
            case .opened: return machine.opened()
            case .openFailed: return machine.openFailed(-ENOENT, message: "m", seen: [], at: now)
            case .openFailedAfterServer: return machine.openFailed(-ECONNREFUSED, message: "m", seen: [.server], at: now)
            case .cannotRender: return machine.cannotRender(message: "m", at: now)
            case .flowing: return machine.flowing(at: now)
            case .underrun: return machine.streamFailed(-EPIPE, message: "m", dryAt: at(900), seen: [], at: now)
            case .underrunAfterServer: return machine.streamFailed(-EPIPE, message: "m", dryAt: at(900), seen: [.server], at: now)
            case .unplugged: return machine.streamFailed(-ENODEV, message: "m", dryAt: at(900), seen: [], at: now)
            case .repairFailed: return machine.repairFailed(-EIO, message: "m", at: now)
            case .lost: return machine.lost(.stalled, "m", since: at(800), seen: [], at: now)
            case .waitSawNothing: return machine.sawWhileWaiting([])
            case .waitSawCard: return machine.sawWhileWaiting([.card])
            case .waitSawServer: return machine.sawWhileWaiting([.server])
            case .playSawCard: return machine.sawWhilePlaying([.card], at: now)
            case .playSawServer: return machine.sawWhilePlaying([.server], at: now)
            case .stopped: return machine.stopped()
            case .reconfigured: machine.reconfigured(retry: RecoveryStateMachineTableTests.policy, seed: 1); return .none
            }
        }
    }

    typealias Expected = Transition<Machine.Action, Machine.State>

    typealias Action = Machine.Action
    typealias MachineState = Machine.State

    static func make(_ setup: Setup) -> Machine { setup.make() }
    static func apply(_ event: Event, to machine: inout Machine) -> Machine.Action { event.apply(to: &machine) }
    static func state(of machine: Machine) -> Machine.State { machine.state }

    static func fault(_ reason: InterruptionReason, _ state: KeepAliveState?, _ message: String = "m") -> Machine.Fault {
        .init(reason: reason, message: message, state: state)
    }

    /// The four states without an outage: what each event does there (only whether an open was
    /// announced carries over into an outage).
    static func withoutOutage(_ setup: Setup) -> [Row] {
        let announced = setup.announced
        let playing = setup == .playing || setup == .reopened
        func outage(_ reason: InterruptionReason, since: Int = 1000, _ shown: KeepAliveState, repaired: Bool = false) -> Machine.State {
            .outage(Outage(reason: reason, since: at(since), shown: shown, repairedInPlace: repaired, announced: announced))
        }
        func row(_ event: Event, _ expected: Expected) -> Row { Row(setup: setup, event: event, transition: expected) }
        return [
            row(.attemptingOpen, .to(.none, nil)),
            row(.attemptingOpenAfterServer, .to(.none, nil)),
            row(.opened, announced ? .to(.none, nil)
                : .to(.announceOpen, playing ? .playing(since: at(0), announced: true) : .starting(announced: true))),
            row(.openFailed, .to(.reopen(after: .milliseconds(50), fault(.noDevice, .waitingForDevice(.noDevice))),
                                     outage(.noDevice, .waitingForDevice(.noDevice)))),
            row(.openFailedAfterServer, .to(.reopen(after: settle, fault(.serverGone, .waitingForDevice(.serverGone))),
                                                outage(.serverGone, .waitingForDevice(.serverGone)))),
            row(.cannotRender, .to(.reopen(after: .seconds(2), fault(.unknown, .waitingForDevice(.unknown))),
                                       outage(.unknown, .waitingForDevice(.unknown)))),
            row(.flowing, playing ? .to(.none, nil) : .to(.play(recovered: nil), .playing(since: at(1000), announced: false))),
            row(.underrun, .to(.repair(.prepare, fault(.underrun, .recovering(.underrun))),
                                   outage(.underrun, since: 900, .recovering(.underrun), repaired: true))),
            row(.underrunAfterServer, .to(.reopen(after: settle, fault(.underrun, .recovering(.serverGone))),
                                              outage(.serverGone, since: 900, .recovering(.serverGone)))),
            row(.unplugged, .to(.reopen(after: .milliseconds(50), fault(.unplugged, .recovering(.unplugged))),
                                    outage(.unplugged, .recovering(.unplugged)))),
            row(.repairFailed, .to(.reopen(after: .milliseconds(50), fault(.serverGone, .recovering(.serverGone))),
                                       outage(.serverGone, .recovering(.serverGone)))),
            row(.lost, .to(.reopen(after: .milliseconds(50), fault(.stalled, .recovering(.stalled))),
                               outage(.stalled, since: 800, .recovering(.stalled)))),
            row(.waitSawNothing, .impossible),
            row(.waitSawCard, .impossible),
            row(.waitSawServer, .impossible),
            row(.playSawCard, .to(.none, nil)),
            row(.playSawServer, .to(.reopen(after: settle, fault(.serverGone, .recovering(.serverGone), server)),
                                        outage(.serverGone, .recovering(.serverGone)))),
            row(.stopped, .to(.stop, .stopped)),
            row(.reconfigured, .to(.none, nil)),
        ]
    }

    /// An underrun at `at(500)`, repaired in place: another fault that could be repaired
    /// reopens; every reason but `stalled` and `unknown` is more telling than `underrun`.
    static let repairing: [Row] = {
        func outage(_ reason: InterruptionReason = .underrun, _ shown: KeepAliveState = .recovering(.underrun), announced: Bool = false) -> Machine.State {
            .outage(Outage(reason: reason, since: at(500), shown: shown, repairedInPlace: true, announced: announced))
        }
        func row(_ event: Event, _ expected: Expected) -> Row { Row(setup: .repairing, event: event, transition: expected) }
        return [
            row(.attemptingOpen, .to(.none, nil)),
            row(.attemptingOpenAfterServer, .to(.none, outage(.serverGone))),
            row(.opened, .to(.announceOpen, outage(announced: true))),
            row(.openFailed, .to(.reopen(after: .milliseconds(50), fault(.noDevice, .waitingForDevice(.noDevice))),
                                     outage(.noDevice, .waitingForDevice(.noDevice)))),
            row(.openFailedAfterServer, .to(.reopen(after: settle, fault(.serverGone, .waitingForDevice(.serverGone))),
                                                outage(.serverGone, .waitingForDevice(.serverGone)))),
            row(.cannotRender, .to(.reopen(after: .seconds(2), fault(.unknown, .waitingForDevice(.unknown))),
                                       outage(.underrun, .waitingForDevice(.unknown)))),
            row(.flowing, .to(.play(recovered: .init(reason: .underrun, downtime: .milliseconds(500))),
                                  .playing(since: at(1000), announced: false))),
            row(.underrun, .to(.reopen(after: .milliseconds(50), fault(.underrun, nil, "m, again right after recovering in place")), nil)),
            row(.underrunAfterServer, .to(.reopen(after: settle, fault(.underrun, .recovering(.serverGone))),
                                              outage(.serverGone, .recovering(.serverGone)))),
            row(.unplugged, .to(.reopen(after: .milliseconds(50), fault(.unplugged, .recovering(.unplugged))),
                                    outage(.unplugged, .recovering(.unplugged)))),
            row(.repairFailed, .to(.reopen(after: .milliseconds(50), fault(.serverGone, .recovering(.serverGone))),
                                       outage(.serverGone, .recovering(.serverGone)))),
            row(.lost, .to(.reopen(after: .milliseconds(50), fault(.stalled, nil)), nil)),
            row(.waitSawNothing, .to(.none, nil)),
            row(.waitSawCard, .to(.reopen(after: settle, nil), nil)),
            row(.waitSawServer, .to(.reopen(after: settle, nil), outage(.serverGone))),
            row(.playSawCard, .to(.none, nil)),
            row(.playSawServer, .to(.reopen(after: settle, fault(.serverGone, .recovering(.serverGone), server)),
                                        outage(.serverGone, .recovering(.serverGone)))),
            row(.stopped, .to(.stop, .stopped)),
            row(.reconfigured, .to(.none, nil)),
        ]
    }()

    /// The first open failed (no device) at `at(0)`: `no-device` is as telling as any reason
    /// but `unknown` and the in-place ones, so it stays the outage's; what is shown follows the
    /// latest fault.
    static let waiting: [Row] = {
        func outage(_ shown: KeepAliveState = .waitingForDevice(.noDevice), repaired: Bool = false, announced: Bool = false) -> Machine.State {
            .outage(Outage(reason: .noDevice, since: at(0), shown: shown, repairedInPlace: repaired, announced: announced))
        }
        func row(_ event: Event, _ expected: Expected) -> Row { Row(setup: .waiting, event: event, transition: expected) }
        return [
            row(.attemptingOpen, .to(.none, nil)),
            row(.attemptingOpenAfterServer, .to(.none, nil)),
            row(.opened, .to(.announceOpen, outage(announced: true))),
            row(.openFailed, .to(.reopen(after: .milliseconds(100), fault(.noDevice, nil)), nil)),
            row(.openFailedAfterServer, .to(.reopen(after: settle, fault(.serverGone, .waitingForDevice(.serverGone))),
                                                outage(.waitingForDevice(.serverGone)))),
            row(.cannotRender, .to(.reopen(after: .seconds(2), fault(.unknown, .waitingForDevice(.unknown))),
                                       outage(.waitingForDevice(.unknown)))),
            row(.flowing, .to(.play(recovered: .init(reason: .noDevice, downtime: .seconds(1))),
                                  .playing(since: at(1000), announced: false))),
            row(.underrun, .to(.repair(.prepare, fault(.underrun, .recovering(.noDevice))), outage(.recovering(.noDevice), repaired: true))),
            row(.underrunAfterServer, .to(.reopen(after: settle, fault(.underrun, .recovering(.noDevice))), outage(.recovering(.noDevice)))),
            row(.unplugged, .to(.reopen(after: .milliseconds(100), fault(.unplugged, .recovering(.noDevice))), outage(.recovering(.noDevice)))),
            row(.repairFailed, .to(.reopen(after: .milliseconds(100), fault(.serverGone, .recovering(.noDevice))), outage(.recovering(.noDevice)))),
            row(.lost, .to(.reopen(after: .milliseconds(100), fault(.stalled, .recovering(.noDevice))), outage(.recovering(.noDevice)))),
            row(.waitSawNothing, .to(.none, nil)),
            row(.waitSawCard, .to(.reopen(after: settle, nil), nil)),
            row(.waitSawServer, .to(.reopen(after: settle, nil), nil)),
            row(.playSawCard, .to(.none, nil)),
            row(.playSawServer, .to(.reopen(after: settle, fault(.serverGone, .recovering(.noDevice), server)), outage(.recovering(.noDevice)))),
            row(.stopped, .to(.stop, .stopped)),
            row(.reconfigured, .to(.none, nil)),
        ]
    }()

    /// Stopped: the thread has ended; only a configuration may still be handed over.
    static let stopped: [Row] = Event.allCases.map {
        Row(setup: .stopped, event: $0, transition: $0 == .reconfigured ? .to(.none, nil) : .impossible)
    }

    static let table: [Row] = [Setup.starting, .announced, .playing, .reopened].flatMap(withoutOutage) + repairing + waiting + stopped

    @Test("the table holds every state × every event once")
    func exhaustive() { Self.expectExhaustive() }

    @Test("each event leads to its action and state", arguments: possible)
    func row(_ row: Row) { Self.expect(row) }

    @Test("an event that cannot happen is a precondition failure", arguments: impossible)
    func impossibleRow(_ row: Row) async {
        // An exit test captures its row from Swift 6.3 on; Swift 6.2 (Debian's swiftlang, which
        // builds the arm64 tests: scripts/test-arm64) cannot, and leaves these rows to amd64.
        #if compiler(>=6.3)
        await #expect(processExitsWith: .failure) { [setup = row.setup as Setup, event = row.event as Event] in
            var machine = setup.make()
            _ = event.apply(to: &machine)
        }
        #endif
    }
}
