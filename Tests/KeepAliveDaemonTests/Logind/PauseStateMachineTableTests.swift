import Testing

import KeepAlive
@testable import KeepAliveDaemon
import TestSupport

/// Every state of the pause state machine against every event: the action and the state it
/// leads to. No event is impossible: logind may repeat itself, and the idle timer also wakes the
/// daemon for a reload.
@Suite("Pause state machine, every state × every event")
struct PauseStateMachineTableTests: TransitionTable {
    typealias Machine = PauseStateMachine
    typealias Action = PauseStateMachine.Action

    /// `--pause-when locked,idle --idle-after 60s`, but for `ignoring`.
    static let policy = Machine.Policy(pauseWhen: [.locked, .idle], idleAfter: .seconds(60))

    /// The states, each reached through events; events come at 1000 s.
    enum Setup: String, CaseIterable, Sendable {
        case active, locked, timing, idle, asleep, asleepLockedIdle
        /// `--pause-when` empty, the session locked and idle.
        case ignoring

        func make() -> Machine {
            var machine = Machine(policy: self == .ignoring ? .init() : PauseStateMachineTableTests.policy)
            switch self {
            case .active: break
            case .locked: _ = machine.session(locked: true, idle: false, idleSince: .zero, now: .seconds(900))
            case .timing: _ = machine.session(locked: false, idle: true, idleSince: .seconds(950), now: .seconds(960))
            case .idle: _ = machine.session(locked: false, idle: true, idleSince: .seconds(100), now: .seconds(900))
            case .asleep: _ = machine.prepareForSleep(true)
            case .asleepLockedIdle:
                _ = machine.session(locked: true, idle: true, idleSince: .seconds(100), now: .seconds(900))
                _ = machine.prepareForSleep(true)
            case .ignoring: _ = machine.session(locked: true, idle: true, idleSince: .seconds(100), now: .seconds(900))
            }
            return machine
        }
    }

    enum Event: String, CaseIterable, Sendable {
        case sleep, wake, active, locked, idleLong, idleRecent, idleUnknown, timer, policyNone, policyAll, lost

        func apply(to machine: inout Machine) -> Action {
            let now = Duration.seconds(1000)
            switch self {
            case .sleep: return machine.prepareForSleep(true)
            case .wake: return machine.prepareForSleep(false)
            case .active: return machine.session(locked: false, idle: false, idleSince: .zero, now: now)
            case .locked: return machine.session(locked: true, idle: false, idleSince: .zero, now: now)
            case .idleLong: return machine.session(locked: false, idle: true, idleSince: .seconds(100), now: now)
            case .idleRecent: return machine.session(locked: false, idle: true, idleSince: .seconds(990), now: now)
            case .idleUnknown: return machine.session(locked: false, idle: true, idleSince: .zero, now: now)
            case .timer: return machine.idleTimerFired(now: now)
            case .policyNone: return machine.policyChanged(.init(), now: now)
            case .policyAll: return machine.policyChanged(PauseStateMachineTableTests.policy, now: now)
            case .lost: return machine.lost()
            }
        }
    }

    typealias MachineState = Machine.State

    static func make(_ setup: Setup) -> Machine { setup.make() }
    static func apply(_ event: Event, to machine: inout Machine) -> Action { event.apply(to: &machine) }
    static func state(of machine: Machine) -> Machine.State { machine.state }

    static func update(pause: Set<PauseReason> = [], resume: Set<PauseReason> = [], timer: Machine.IdleTimer = .unchanged) -> Action {
        .update(pause: pause, resume: resume, timer: timer)
    }
    static func awake(_ locked: Bool = false, _ idle: Machine.Idle = .active) -> Machine.State { .awake(.init(locked: locked, idle: idle)) }
    static func asleep(_ locked: Bool = false, _ idle: Machine.Idle = .active) -> Machine.State { .asleep(.init(locked: locked, idle: idle)) }
    static func idle(_ since: Int, _ decision: Machine.IdleDecision) -> Machine.Idle { .idle(since: .seconds(since), decision) }

    static let events: [(Setup, [(Event, Action, Machine.State?)])] = [
        (.active, [
            (.sleep, .sleep, asleep()),
            (.wake, .none, nil),
            (.active, .none, nil),
            (.locked, update(pause: [.locked]), awake(true)),
            (.idleLong, update(pause: [.idle]), awake(false, idle(100, .paused))),
            (.idleRecent, update(timer: .arm(.seconds(50))), awake(false, idle(990, .timing))),
            (.idleUnknown, update(timer: .arm(.seconds(60))), awake(false, idle(1000, .timing))),
            (.timer, .none, nil),
            (.policyNone, .none, nil),
            (.policyAll, .none, nil),
            (.lost, .none, nil),
        ]),
        (.locked, [
            (.sleep, .sleep, asleep(true)),
            (.wake, .none, nil),
            (.active, update(resume: [.locked]), awake()),
            (.locked, .none, nil),
            (.idleLong, update(pause: [.idle], resume: [.locked]), awake(false, idle(100, .paused))),
            (.idleRecent, update(resume: [.locked], timer: .arm(.seconds(50))), awake(false, idle(990, .timing))),
            (.idleUnknown, update(resume: [.locked], timer: .arm(.seconds(60))), awake(false, idle(1000, .timing))),
            (.timer, .none, nil),
            (.policyNone, update(resume: [.locked]), nil),
            (.policyAll, .none, nil),
            (.lost, update(resume: [.locked]), awake()),
        ]),
        (.timing, [
            (.sleep, .sleep, asleep(false, idle(950, .timing))),
            (.wake, .none, nil),
            (.active, update(timer: .disarm), awake()),
            (.locked, update(pause: [.locked], timer: .disarm), awake(true)),
            (.idleLong, update(pause: [.idle], timer: .disarm), awake(false, idle(100, .paused))),
            (.idleRecent, update(timer: .arm(.seconds(50))), awake(false, idle(990, .timing))),
            (.idleUnknown, update(timer: .arm(.seconds(10))), nil),
            (.timer, update(timer: .arm(.seconds(10))), nil),
            (.policyNone, update(timer: .disarm), awake(false, idle(950, .ignored))),
            (.policyAll, update(timer: .arm(.seconds(10))), nil),
            (.lost, update(timer: .disarm), awake()),
        ]),
        (.idle, [
            (.sleep, .sleep, asleep(false, idle(100, .paused))),
            (.wake, .none, nil),
            (.active, update(resume: [.idle]), awake()),
            (.locked, update(pause: [.locked], resume: [.idle]), awake(true)),
            (.idleLong, .none, nil),
            (.idleRecent, update(resume: [.idle], timer: .arm(.seconds(50))), awake(false, idle(990, .timing))),
            (.idleUnknown, .none, nil),
            (.timer, .none, nil),
            (.policyNone, update(resume: [.idle]), awake(false, idle(100, .ignored))),
            (.policyAll, .none, nil),
            (.lost, update(resume: [.idle]), awake()),
        ]),
        (.asleep, [
            (.sleep, .none, nil),
            (.wake, .wake, awake()),
            (.active, .none, nil),
            (.locked, update(pause: [.locked]), asleep(true)),
            (.idleLong, update(pause: [.idle]), asleep(false, idle(100, .paused))),
            (.idleRecent, update(timer: .arm(.seconds(50))), asleep(false, idle(990, .timing))),
            (.idleUnknown, update(timer: .arm(.seconds(60))), asleep(false, idle(1000, .timing))),
            (.timer, .none, nil),
            (.policyNone, .none, nil),
            (.policyAll, .none, nil),
            (.lost, update(resume: [.sleep]), awake()),
        ]),
        (.asleepLockedIdle, [
            (.sleep, .none, nil),
            (.wake, .wake, awake(true, idle(100, .paused))),
            (.active, update(resume: [.locked, .idle]), asleep()),
            (.locked, update(resume: [.idle]), asleep(true)),
            (.idleLong, update(resume: [.locked]), asleep(false, idle(100, .paused))),
            (.idleRecent, update(resume: [.locked, .idle], timer: .arm(.seconds(50))), asleep(false, idle(990, .timing))),
            (.idleUnknown, update(resume: [.locked]), asleep(false, idle(100, .paused))),
            (.timer, .none, nil),
            (.policyNone, update(resume: [.locked, .idle]), asleep(true, idle(100, .ignored))),
            (.policyAll, .none, nil),
            (.lost, update(resume: [.sleep, .locked, .idle]), awake()),
        ]),
        (.ignoring, [
            (.sleep, .sleep, asleep(true, idle(100, .ignored))),
            (.wake, .none, nil),
            (.active, .none, awake()),
            (.locked, .none, awake(true)),
            (.idleLong, .none, awake(false, idle(100, .ignored))),
            (.idleRecent, .none, awake(false, idle(990, .ignored))),
            (.idleUnknown, .none, awake(false, idle(100, .ignored))),
            (.timer, .none, nil),
            (.policyNone, .none, nil),
            (.policyAll, update(pause: [.locked, .idle]), awake(true, idle(100, .paused))),
            (.lost, .none, awake()),
        ]),
    ]

    static let table: [Row] = rows(events.map { setup, events in (setup, events.map { ($0.0, .to($0.1, $0.2)) }) })

    @Test("the table holds every state × every event once")
    func exhaustive() { Self.expectExhaustive() }

    @Test("each event leads to its action and state", arguments: table)
    func row(_ row: Row) { Self.expect(row) }
}
