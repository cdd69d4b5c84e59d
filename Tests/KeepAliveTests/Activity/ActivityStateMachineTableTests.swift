import Testing

@testable import KeepAlive
import TestSupport

/// Every state of the activity state machine against every event: the action and the state it
/// leads to. No event is impossible anywhere: the sources of real audio (loans, the server's
/// streams) may say the same thing twice.
@Suite("Activity state machine, every state × every event")
struct ActivityStateMachineTableTests: TransitionTable {
    typealias Machine = ActivityStateMachine

    static let start = ContinuousClock.now
    static func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    /// The states, reached through events with a 300 s --on-idle-after; events come at 5 s but
    /// for `timerLate`, at 1000 s.
    enum Setup: String, CaseIterable, Codable, Sendable {
        case idle
        /// mpd started at 0.
        case active
        /// mpd started at 0 and stopped at 1: idle at 301.
        case quieting

        func make() -> Machine {
            var machine = Machine(idleAfter: .seconds(300))
            switch self {
            case .idle: break
            case .active: _ = machine.audioStarted(by: "mpd", at: at(0))
            case .quieting:
                _ = machine.audioStarted(by: "mpd", at: at(0))
                _ = machine.audioStopped(at: at(1))
            }
            return machine
        }
    }

    enum Event: String, CaseIterable, Codable, Sendable {
        case started, startedByAnother, stopped, timerEarly, timerLate, silenceEnded

        func apply(to machine: inout Machine) -> Machine.Action {
            switch self {
            case .started: machine.audioStarted(by: "mpd", at: at(5))
            case .startedByAnother: machine.audioStarted(by: "mpv", at: at(5))
            case .stopped: machine.audioStopped(at: at(5))
            case .timerEarly: machine.timerFired(at: at(5))
            case .timerLate: machine.timerFired(at: at(1000))
            case .silenceEnded: machine.silenceEnded(at: at(5))
            }
        }
    }

    typealias Action = Machine.Action
    typealias MachineState = Machine.State

    static func make(_ setup: Setup) -> Machine { setup.make() }
    static func apply(_ event: Event, to machine: inout Machine) -> Machine.Action { event.apply(to: &machine) }
    static func state(of machine: Machine) -> Machine.State { machine.state }

    static let table: [Row] = rows([
        (.idle, [
            (.started, .to(.becameActive(program: "mpd"), .active(since: at(5), program: "mpd"))),
            (.startedByAnother, .to(.becameActive(program: "mpv"), .active(since: at(5), program: "mpv"))),
            (.stopped, .to(.none, nil)),
            (.timerEarly, .to(.none, nil)),
            (.timerLate, .to(.none, nil)),
            (.silenceEnded, .to(.none, nil)),
        ]),
        (.active, [
            (.started, .to(.none, nil)),
            // Still the same active period: no hook, the program shown is the one playing now.
            (.startedByAnother, .to(.none, .active(since: at(0), program: "mpv"))),
            (.stopped, .to(.armTimer(at(305)), .quieting(since: at(0), program: "mpd", idleAt: at(305)))),
            (.timerEarly, .to(.none, nil)),
            (.timerLate, .to(.none, nil)),
            // Real audio plays: "standby now" leaves it alone.
            (.silenceEnded, .to(.none, nil)),
        ]),
        (.quieting, [
            // The next track: no hook, the period goes on.
            (.started, .to(.cancelTimer, .active(since: at(0), program: "mpd"))),
            (.startedByAnother, .to(.cancelTimer, .active(since: at(0), program: "mpv"))),
            (.stopped, .to(.none, nil)),
            (.timerEarly, .to(.armTimer(at(301)), nil)),
            (.timerLate, .to(.becameIdle(program: "mpd"), .idle(since: at(1000)))),
            // "Standby now": idle at once, the hook and --cec as at the silence's end.
            (.silenceEnded, .to(.becameIdle(program: "mpd"), .idle(since: at(5)))),
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
        let report = machine.report
        switch machine.state {
        case .idle: #expect(!report.active && machine.idleAt == nil)
        case .active: #expect(report.active && machine.idleAt == nil)
        case .quieting(_, _, let idleAt): #expect(report.active && machine.idleAt == idleAt)
        }
    }

    @Test("a playlist with skips and gaps shorter than --on-idle-after: one active period, one hook each way")
    func playlist() {
        var machine = Machine(idleAfter: .seconds(300))
        var actions: [Machine.Action] = []
        // Three tracks with a skip (0.1 s gap) and a format change (the player's close and reopen).
        for (start, stop) in [(0.0, 180.0), (180.1, 200.0), (200.3, 420.0)] {
            actions.append(machine.audioStarted(by: "mpd", at: Self.at(start)))
            actions.append(machine.audioStopped(at: Self.at(stop)))
        }
        actions.append(machine.timerFired(at: Self.at(600)))
        actions.append(machine.timerFired(at: Self.at(720)))
        #expect(actions.filter { if case .becameActive = $0 { true } else { false } }.count == 1)
        #expect(actions.filter { if case .becameIdle = $0 { true } else { false } }.count == 1)
        #expect(actions.last == .becameIdle(program: "mpd"))
    }
}
