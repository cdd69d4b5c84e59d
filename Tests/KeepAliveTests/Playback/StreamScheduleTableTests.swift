import Testing
import TestSupport
@testable import KeepAlive

/// Every state of the streaming loop's schedule against every event: the action and the state it
/// leads to, and a precondition failure for an event the loop cannot send.
@Suite("Stream schedule, every state × every event")
struct StreamScheduleTableTests: TransitionTable {
    typealias Machine = StreamSchedule
    /// nil: the event answers nothing (a restart).
    typealias Action = StreamSchedule.Action?
    typealias MachineState = StreamSchedule.Phase

    static let start = ContinuousClock.now
    static func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }
    /// 0.5 s at 48 kHz in four periods of 6000: writes of 12 000 frames, a 0.75 s stall window
    /// once the device freed room (3 s before).
    static let format = OutputFormat(sampleFormat: .s16, sampleRate: 48_000, channels: 2, bufferFrames: 24_000, periodFrames: 6_000)

    enum Setup: String, CaseIterable, Codable, Sendable {
        /// Just opened at 0: nothing looked at.
        case idle
        /// A look at 0 found the buffer empty: a write of 24 000 is due.
        case writing
        /// That write took 22 000: 2000 free after it, nothing freed since.
        case waiting
        /// The device freed 1000 by 100 ms, then nothing until 500 ms: it holds back, and is given
        /// its 3000 free (the threshold lowered to a period).
        case toppingUp

        func make() -> Machine {
            var machine = StreamSchedule(format: format, at: at(0))
            guard self != .idle else { return machine }
            _ = machine.looked(available: 24_000, at: at(0))
            guard self != .writing else { return machine }
            _ = machine.wrote(22_000, availableAfter: nil, at: at(0))
            guard self != .waiting else { return machine }
            _ = machine.looked(available: 3_000, at: at(100))
            _ = machine.looked(available: 3_000, at: at(500))
            return machine
        }
    }

    enum Event: String, CaseIterable, Codable, Sendable {
        /// A look at 1 s: the buffer empty; 6000 free; at 10 s, none free.
        case roomy, short, late
        /// The write due took nothing (EAGAIN).
        case tookNothing
        /// 1000 frames written at 600 ms: not looked at after; looked at, and the buffer all free.
        case wrote, wroteFreed
        case restart

        func apply(to machine: inout Machine) -> Action {
            switch self {
            case .roomy: return machine.looked(available: 24_000, at: at(1_000))
            case .short: return machine.looked(available: 6_000, at: at(1_000))
            case .late: return machine.looked(available: 0, at: at(10_000))
            case .tookNothing: return machine.tookNothing()
            case .wrote: return machine.wrote(1_000, availableAfter: nil, at: at(600))
            case .wroteFreed: return machine.wrote(1_000, availableAfter: 24_000, at: at(600))
            case .restart:
                machine.restart(at: at(700))
                return nil
            }
        }
    }

    static func make(_ setup: Setup) -> Machine { setup.make() }
    static func apply(_ event: Event, to machine: inout Machine) -> Action { event.apply(to: &machine) }
    static func state(of machine: Machine) -> MachineState { machine.phase }

    static let table: [Row] = rows([
        (.idle, [
            (.roomy, .to(.write(24_000), .writing(available: 24_000, toppingUp: false))),
            // 6000 short of the threshold: looked at again when it is due (125 ms, and 2 ms late).
            (.short, .to(.sleep(until: at(1_127)), nil)),
            // A first look is progress.
            (.late, .to(.sleep(until: at(10_252)), nil)),
            (.tookNothing, .impossible), (.wrote, .impossible), (.wroteFreed, .impossible),
            (.restart, .to(nil, nil)),
        ]),
        (.writing, [
            (.roomy, .impossible), (.short, .impossible), (.late, .impossible),
            // Room reported but nothing taken: look again when the threshold is due (now).
            (.tookNothing, .to(.sleep(until: at(2)), .idle)),
            (.wrote, .to(.wrote(pacedByClock: false), .idle)),
            // Most of the write freed at once: a device that does not pace.
            (.wroteFreed, .to(.wrote(pacedByClock: true), .idle)),
            (.restart, .to(nil, .idle)),
        ]),
        (.waiting, [
            (.roomy, .to(.write(24_000), .writing(available: 24_000, toppingUp: false))),
            (.short, .to(.sleep(until: at(1_127)), nil)),
            // Nothing freed for 10 s, beyond even the start window.
            (.late, .to(.stalled(for: .seconds(10), since: at(0)), nil)),
            (.tookNothing, .impossible), (.wrote, .impossible), (.wroteFreed, .impossible),
            (.restart, .to(nil, nil)),
        ]),
        (.toppingUp, [
            (.roomy, .impossible), (.short, .impossible), (.late, .impossible),
            // The lowered threshold's 3000 missing are due in 62.5 ms, before the window's end.
            (.tookNothing, .to(.sleep(until: at(500) + .microseconds(64_500)), .idle)),
            (.wrote, .to(.wrote(pacedByClock: false), .idle)),
            (.wroteFreed, .to(.wrote(pacedByClock: true), .idle)),
            (.restart, .to(nil, .idle)),
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

    @Test("the queued audio runs out a buffer's worth after the look before the write, less what was left free")
    func drainsAt() {
        var schedule = Setup.writing.make()
        _ = schedule.wrote(12_000, availableAfter: nil, at: Self.at(400))
        // 12 000 queued at 48 kHz: a quarter second from the look at 0, not from the write's end.
        #expect(schedule.drainsAt == Self.at(250))
        #expect(schedule.dryAt(before: Self.at(300)) == Self.at(250))
        #expect(schedule.dryAt(before: Self.at(200)) == nil)
        // A look after the write that failed counts as none.
        var failedLook = Setup.writing.make()
        _ = failedLook.wrote(12_000, availableAfter: -32, at: Self.at(400))
        #expect(failedLook.drainsAt == Self.at(250))
        // One that found room freed already counts it.
        var freed = Setup.writing.make()
        _ = freed.wrote(12_000, availableAfter: 18_000, at: Self.at(400))
        #expect(freed.drainsAt == Self.at(125))
    }

    @Test("a top-up is no progress of the device's: the stall window still runs from before it")
    func toppingUpIsNoProgress() {
        var schedule = Setup.toppingUp.make()
        #expect(schedule.threshold == 6_000)
        _ = schedule.wrote(3_000, availableAfter: nil, at: Self.at(500))
        #expect(schedule.stalls.lastProgress == Self.at(100))
        #expect(schedule.looked(available: 0, at: Self.at(900)) == .stalled(for: .milliseconds(800), since: Self.at(100)))
    }
}
