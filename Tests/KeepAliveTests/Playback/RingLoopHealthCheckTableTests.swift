import Glibc
import Testing
import TestSupport
@testable import KeepAlive

/// Every state of the ring loop's check against every event: the action and the state it leads
/// to, and a precondition failure for a look the loop cannot be asked for.
@Suite("Ring loop health check, every state × every event")
struct RingLoopHealthCheckTableTests: TransitionTable {
    typealias Machine = RingLoopHealthCheck
    typealias Action = RingLoopHealthCheck.Action
    typealias MachineState = RingLoopHealthCheck.Phase

    static let start = ContinuousClock.now
    static func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    /// The states, each reached through events: a 2 s ring at 48 kHz on the quiet path (15 s
    /// health checks), filled at 0 from position 1000, so the replay's first look is due at 5 s.
    enum Setup: String, CaseIterable, Codable, Sendable {
        /// Nothing filled, no position read.
        case unfilled
        /// Filled and playing; the replay's first look due at 5 s.
        case firstLook
        /// The first look saw less than a ring played (at 91 000): the second is due at 6 s.
        case confirming
        /// The ring went round: health checks from position 100 000.
        case checking

        func make() -> Machine {
            var machine = RingLoopHealthCheck(quiet: true, ringFrames: 96_000, ringDuration: .seconds(2), boundary: 1 << 24, rate: 48_000)
            guard self != .unfilled else { return machine }
            machine.filled(at: at(0), position: 1_000)
            machine.playing(position: 1_000)
            switch self {
            case .unfilled, .firstLook: break
            case .confirming: _ = machine.replayLooked(at: at(5_000), .running(position: 91_000))
            case .checking:
                _ = machine.replayLooked(at: at(5_000), .running(position: 100_000))
                machine.playing(position: 100_000)
            }
            return machine
        }
    }

    /// Each at 20 s but for `timeoutEarly`, at 1 s.
    enum Event: String, CaseIterable, Codable, Sendable {
        case filled, playing
        case underrun, suspended
        case timeoutEarly, timeoutDue
        /// The replay's look: at 201 000 (round), at 91 000 (still since the first look), underrun, another state.
        case replayRound, replayStill, replayUnderrun, replayOther
        /// The health check: failed, moved a second's worth, still, the position unknown.
        case healthFailed, healthMoved, healthStill, healthUnknown
        /// The card's PCM node changed: the stream running and the node there (a udev chmod),
        /// the node gone, the stream suspended.
        case nodeThere, nodeGone, nodeSuspended

        func apply(to machine: inout Machine) -> Action {
            let now = at(20_000)
            switch self {
            case .filled:
                machine.filled(at: now, position: 0)
                return .none
            case .playing:
                machine.playing(position: 7)
                return .none
            case .underrun: return machine.streamFailed(-EPIPE)
            case .suspended: return machine.streamFailed(-ESTRPIPE)
            case .timeoutEarly: return machine.timedOut(at: at(1_000))
            case .timeoutDue: return machine.timedOut(at: now)
            case .replayRound: return machine.replayLooked(at: now, .running(position: 201_000))
            case .replayStill: return machine.replayLooked(at: now, .running(position: 91_000))
            case .replayUnderrun: return machine.replayLooked(at: now, .underrun)
            case .replayOther: return machine.replayLooked(at: now, .other)
            case .healthFailed: return machine.healthLooked(at: now, .failed(-ESTRPIPE))
            case .healthMoved: return machine.healthLooked(at: now, .running(position: 148_000))
            case .healthStill: return machine.healthLooked(at: now, .running(position: 100_000))
            case .healthUnknown: return machine.healthLooked(at: now, .running(position: nil))
            case .nodeThere: return machine.nodeChanged(stateError: nil, nodeExists: true)
            case .nodeGone: return machine.nodeChanged(stateError: nil, nodeExists: false)
            case .nodeSuspended: return machine.nodeChanged(stateError: -ESTRPIPE, nodeExists: true)
            }
        }
    }

    static func make(_ setup: Setup) -> Machine { setup.make() }
    static func apply(_ event: Event, to machine: inout Machine) -> Action { event.apply(to: &machine) }
    static func state(of machine: Machine) -> MachineState { machine.phase }

    static let refilled = MachineState.playing(position: 0, replayDue: at(25_000))

    static let table: [Row] = rows([
        (.unfilled, [
            (.filled, .to(.none, refilled)),
            (.playing, .to(.none, .playing(position: 7, replayDue: nil))),
            // The first fill's own write or start failed: the recovery's.
            (.underrun, .to(.recover(-EPIPE), nil)),
            (.suspended, .to(.recover(-ESTRPIPE), nil)),
            (.timeoutEarly, .impossible), (.timeoutDue, .impossible),
            (.replayRound, .impossible), (.replayStill, .impossible), (.replayUnderrun, .impossible), (.replayOther, .impossible),
            (.healthFailed, .impossible), (.healthMoved, .impossible), (.healthStill, .impossible), (.healthUnknown, .impossible),
            (.nodeThere, .impossible), (.nodeGone, .impossible), (.nodeSuspended, .impossible),
        ]),
        (.firstLook, [
            (.filled, .to(.none, refilled)),
            (.playing, .to(.none, .playing(position: 7, replayDue: at(5_000)))),
            (.underrun, .to(.notReplayed(.underrun), .playing(position: 1_000, replayDue: nil))),
            (.suspended, .to(.recover(-ESTRPIPE), nil)),
            (.timeoutEarly, .to(.none, nil)),
            (.timeoutDue, .to(.lookAtReplay, nil)),
            (.replayRound, .to(.none, .playing(position: 1_000, replayDue: nil))),
            // Less than a ring: a second look, a margin later.
            (.replayStill, .to(.none, .playing(position: 1_000, replayDue: at(21_000)))),
            (.replayUnderrun, .to(.notReplayed(.underrun), .playing(position: 1_000, replayDue: nil))),
            (.replayOther, .to(.none, .playing(position: 1_000, replayDue: nil))),
            (.healthFailed, .impossible), (.healthMoved, .impossible), (.healthStill, .impossible), (.healthUnknown, .impossible),
            (.nodeThere, .to(.none, nil)),
            (.nodeGone, .to(.recover(-ENODEV), nil)),
            (.nodeSuspended, .to(.recover(-ESTRPIPE), nil)),
        ]),
        (.confirming, [
            (.filled, .to(.none, refilled)),
            (.playing, .to(.none, .playing(position: 7, replayDue: at(6_000)))),
            (.underrun, .to(.notReplayed(.underrun), .playing(position: 1_000, replayDue: nil))),
            (.suspended, .to(.recover(-ESTRPIPE), nil)),
            (.timeoutEarly, .to(.none, nil)),
            (.timeoutDue, .to(.lookAtReplay, nil)),
            (.replayRound, .to(.none, .playing(position: 1_000, replayDue: nil))),
            (.replayStill, .to(.notReplayed(.positionStopped), .playing(position: 1_000, replayDue: nil))),
            (.replayUnderrun, .to(.notReplayed(.underrun), .playing(position: 1_000, replayDue: nil))),
            (.replayOther, .to(.none, .playing(position: 1_000, replayDue: nil))),
            (.healthFailed, .impossible), (.healthMoved, .impossible), (.healthStill, .impossible), (.healthUnknown, .impossible),
            (.nodeThere, .to(.none, nil)),
            (.nodeGone, .to(.recover(-ENODEV), nil)),
            (.nodeSuspended, .to(.recover(-ESTRPIPE), nil)),
        ]),
        (.checking, [
            (.filled, .to(.none, refilled)),
            (.playing, .to(.none, .playing(position: 7, replayDue: nil))),
            (.underrun, .to(.recover(-EPIPE), nil)),
            (.suspended, .to(.recover(-ESTRPIPE), nil)),
            (.timeoutEarly, .to(.lookAtHealth, nil)),
            (.timeoutDue, .to(.lookAtHealth, nil)),
            (.replayRound, .impossible), (.replayStill, .impossible), (.replayUnderrun, .impossible), (.replayOther, .impossible),
            (.healthFailed, .to(.recover(-ESTRPIPE), nil)),
            (.healthMoved, .to(.played(48_000), .playing(position: 148_000, replayDue: nil))),
            // The quiet path's 15 s, since the look before.
            (.healthStill, .to(.stalled(for: .seconds(15), since: at(5_000)), nil)),
            (.healthUnknown, .to(.none, .playing(position: nil, replayDue: nil))),
            (.nodeThere, .to(.none, nil)),
            (.nodeGone, .to(.recover(-ENODEV), nil)),
            (.nodeSuspended, .to(.recover(-ESTRPIPE), nil)),
        ]),
    ])

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
