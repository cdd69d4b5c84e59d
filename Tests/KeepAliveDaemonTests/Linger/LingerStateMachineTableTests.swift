import Testing

import KeepAlive
@testable import KeepAliveDaemon
import TestSupport

/// Every state of the linger state machine against every event: the action and the state it
/// leads to, and a precondition failure before the start and for a second start.
@Suite("Linger state machine, every state × every event")
struct LingerStateMachineTableTests: TransitionTable {
    typealias Machine = LingerStateMachine

    static let start = ContinuousClock.now
    static func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }
    static func view(others: [UInt32] = []) -> LingerView {
        LingerView(streams: others.map { .init(sink: $0, isCorked: false, isOwn: false) } + [.init(sink: 1, isCorked: false, isOwn: true)],
                   sinks: [1, 2], defaultSink: 1)
    }

    /// The states, each reached through events (a 10 s linger started at 0); events come at 5 s
    /// but for `timerLate`, at 30 s.
    enum Setup: String, CaseIterable, Codable, Sendable {
        case notStarted
        /// Started, the server not answered yet: the start's window runs to 10 s.
        case window
        /// The server answered, then went away.
        case disconnected
        case othersPlaying
        /// Nothing else plays: paused at 10 s.
        case lingering
        case paused

        func make() -> Machine {
            var machine = Machine(duration: .seconds(10))
            guard self != .notStarted else { return machine }
            _ = machine.start(at: at(0))
            switch self {
            case .notStarted, .window: break
            case .disconnected:
                _ = machine.serverChanged(view(), at: at(0.1))
                _ = machine.serverLost()
            case .othersPlaying: _ = machine.serverChanged(view(others: [1]), at: at(0.1))
            case .lingering: _ = machine.serverChanged(view(), at: at(0.1))
            case .paused:
                _ = machine.serverChanged(view(), at: at(0.1))
                _ = machine.timerFired(at: at(10))
            }
            return machine
        }
    }

    enum Event: String, CaseIterable, Codable, Sendable {
        case start
        /// Nothing else plays on the watched sink (another stream plays elsewhere).
        case quiet
        case others
        case timerEarly, timerLate, lost

        func apply(to machine: inout Machine) -> Machine.Action {
            switch self {
            case .start: machine.start(at: at(5))
            case .quiet: machine.serverChanged(view(others: [2]), at: at(5))
            case .others: machine.serverChanged(view(others: [1]), at: at(5))
            case .timerEarly: machine.timerFired(at: at(5))
            case .timerLate: machine.timerFired(at: at(30))
            case .lost: machine.serverLost()
            }
        }
    }

    typealias Action = Machine.Action
    typealias MachineState = Machine.State

    static func make(_ setup: Setup) -> Machine { setup.make() }
    static func apply(_ event: Event, to machine: inout Machine) -> Machine.Action { event.apply(to: &machine) }
    static func state(of machine: Machine) -> Machine.State { machine.state }

    static let table: [Row] = rows([
        (.notStarted, [
            (.start, .to(.armTimer(at(15)), .disconnected(deadline: at(15)))),
            (.quiet, .impossible), (.others, .impossible), (.timerEarly, .impossible), (.timerLate, .impossible), (.lost, .impossible),
        ]),
        (.window, [
            (.start, .impossible),
            (.quiet, .to(.armTimer(at(10)), .lingering(until: at(10)))),
            (.others, .to(.cancelTimer, .othersPlaying)),
            (.timerEarly, .to(.none, nil)),
            (.timerLate, .to(.none, nil)),
            (.lost, .to(.cancelTimer, .disconnected(deadline: nil))),
        ]),
        (.disconnected, [
            (.start, .impossible),
            (.quiet, .to(.armTimer(at(15)), .lingering(until: at(15)))),
            (.others, .to(.none, .othersPlaying)),
            (.timerEarly, .to(.none, nil)),
            (.timerLate, .to(.none, nil)),
            (.lost, .to(.none, nil)),
        ]),
        (.othersPlaying, [
            (.start, .impossible),
            (.quiet, .to(.armTimer(at(15)), .lingering(until: at(15)))),
            (.others, .to(.none, nil)),
            (.timerEarly, .to(.none, nil)),
            (.timerLate, .to(.none, nil)),
            (.lost, .to(.none, .disconnected(deadline: nil))),
        ]),
        (.lingering, [
            (.start, .impossible),
            (.quiet, .to(.none, nil)),
            (.others, .to(.cancelTimer, .othersPlaying)),
            (.timerEarly, .to(.armTimer(at(10)), nil)),
            (.timerLate, .to(.pause, .paused)),
            (.lost, .to(.cancelTimer, .disconnected(deadline: nil))),
        ]),
        (.paused, [
            (.start, .impossible),
            (.quiet, .to(.none, nil)),
            (.others, .to(.resume, .othersPlaying)),
            (.timerEarly, .to(.none, nil)),
            (.timerLate, .to(.none, nil)),
            (.lost, .to(.resume, .disconnected(deadline: nil))),
        ]),
    ])

    @Test("the table holds every state × every event once")
    func exhaustive() { Self.expectExhaustive() }

    @Test("each event leads to its action and state", arguments: possible)
    func row(_ row: Row) {
        Self.expect(row)
        // What `status` shows follows from the state.
        var machine = row.setup.make()
        _ = row.event.apply(to: &machine)
        #expect(machine.isPaused == (machine.state == .paused))
        #expect(machine.othersPlaying == (machine.state == .othersPlaying))
    }

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
