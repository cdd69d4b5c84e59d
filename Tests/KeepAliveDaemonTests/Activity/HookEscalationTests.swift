import Testing

@testable import KeepAliveDaemon

/// A hook that overruns --hook-timeout: SIGTERM, SIGKILL a second later, given up after
/// abandonAfter more, each step taken once, without a process or a wait.
@Suite("Hook.Escalation: a hook past its timeout is ended, then given up")
struct HookEscalationTests {
    static let start = ContinuousClock.now
    static func at(_ duration: Duration) -> ContinuousClock.Instant { start + duration }

    @Test("within its timeout a hook is only waited for, and its exit is no timeout")
    func withinTimeout() {
        var escalation = Hook.Escalation(started: Self.start, timeout: .seconds(30))
        #expect(escalation.next(at: Self.at(.zero)) == .wait)
        #expect(escalation.next(at: Self.at(.seconds(30))) == .wait, "the timeout itself is still within it")
        #expect(!escalation.timedOut && escalation.state == .running)
    }

    @Test("past its timeout: SIGTERM once, SIGKILL once a second later, given up abandonAfter after that")
    func escalates() {
        var escalation = Hook.Escalation(started: Self.start, timeout: .seconds(30))
        let term = Self.at(.milliseconds(30_050))
        #expect(escalation.next(at: term) == .terminate)
        #expect(escalation.timedOut && escalation.state == .terminated(since: term))
        #expect(escalation.next(at: term + .milliseconds(50)) == .wait, "SIGTERM is sent once")
        #expect(escalation.next(at: term + Hook.Escalation.killAfter) == .wait)
        #expect(escalation.next(at: term + .milliseconds(1050)) == .kill)
        #expect(escalation.state == .killed(terminatedSince: term), "the wait to give up is counted from SIGTERM")
        #expect(escalation.next(at: term + .milliseconds(1100)) == .wait, "SIGKILL is sent once")
        #expect(escalation.next(at: term + Hook.Escalation.killAfter + Hook.abandonAfter) == .wait)
        #expect(escalation.next(at: term + Hook.Escalation.killAfter + Hook.abandonAfter + .milliseconds(1)) == .abandon)
    }

    @Test("a loop that wakes late takes one step per wake: a late SIGTERM still gives SIGKILL its second")
    func lateWakeTakesOneStep() {
        var escalation = Hook.Escalation(started: Self.start, timeout: .seconds(1))
        let late = Self.at(.seconds(20))
        #expect(escalation.next(at: late) == .terminate)
        #expect(escalation.next(at: late) == .wait)
        #expect(escalation.next(at: late + .seconds(10)) == .kill)
        #expect(escalation.next(at: late + .seconds(10)) == .abandon, "SIGTERM was long enough ago")
    }
}
