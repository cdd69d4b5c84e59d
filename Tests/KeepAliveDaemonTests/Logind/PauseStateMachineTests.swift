import Testing

import KeepAlive
@testable import KeepAliveDaemon
import TestSupport

@Suite("Pause state machine")
struct PauseStateMachineTests {
    typealias Machine = PauseStateMachine

    static func update(pause: Set<PauseReason> = [], resume: Set<PauseReason> = [], timer: Machine.IdleTimer = .unchanged) -> Machine.Action {
        .update(pause: pause, resume: resume, timer: timer)
    }

    @Test("the daemon's reasons rank among the library's as status has always shown them")
    func reasonOrder() {
        #expect([PauseReason.linger, .idle, .lent, .locked, .sleep].sorted() == [.sleep, .lent, .locked, .idle, .linger])
        #expect([PauseReason.lent, .linger].map(\.name) == ["lent", "linger"])
    }

    @Test("sleep closes first and then releases the lock; resume takes a new lock before playing")
    func sleep() {
        var machine = Machine(policy: .init())
        #expect(machine.prepareForSleep(true) == .sleep)
        #expect(machine.paused == [.sleep])
        #expect(machine.prepareForSleep(true) == .none, "a repeated signal changes nothing")
        #expect(machine.prepareForSleep(false) == .wake)
        #expect(machine.paused.isEmpty)
        #expect(machine.prepareForSleep(false) == .none)
    }

    @Test("a lock pauses only with --pause-when locked; unlocking resumes")
    func locked() {
        var ignoring = Machine(policy: .init())
        #expect(ignoring.session(locked: true, idle: false, idleSince: .zero, now: .seconds(100)) == .none)

        var machine = Machine(policy: .init(pauseWhen: [.locked]))
        #expect(machine.session(locked: true, idle: false, idleSince: .zero, now: .seconds(100)) == Self.update(pause: [.locked]))
        #expect(machine.session(locked: true, idle: false, idleSince: .zero, now: .seconds(101)) == .none)
        // Sleeping while locked: both hold; waking keeps the lock's pause.
        #expect(machine.prepareForSleep(true) == .sleep)
        #expect(machine.paused == [.sleep, .locked])
        #expect(machine.prepareForSleep(false) == .wake)
        #expect(machine.paused == [.locked])
        #expect(machine.session(locked: false, idle: false, idleSince: .zero, now: .seconds(200)) == Self.update(resume: [.locked]))
    }

    @Test("idle counts from the session's last activity, with a timer for the rest of --idle-after")
    func idle() {
        var machine = Machine(policy: .init(pauseWhen: [.idle], idleAfter: .seconds(600)))
        // The desktop reports idle after 300 s of inactivity that began at t = 1000.
        #expect(machine.session(locked: false, idle: true, idleSince: .seconds(1000), now: .seconds(1300)) == Self.update(timer: .arm(.seconds(300))))
        #expect(machine.idleTimerFired(now: .seconds(1600)) == Self.update(pause: [.idle]))
        // Activity: resume at once.
        #expect(machine.session(locked: false, idle: false, idleSince: .zero, now: .seconds(1700)) == Self.update(resume: [.idle]))
        // Idle reported long after it began: pause at once, no timer.
        #expect(machine.session(locked: false, idle: true, idleSince: .seconds(2000), now: .seconds(2700)) == Self.update(pause: [.idle]))
        // Active again before the timer: the timer goes too.
        var early = Machine(policy: .init(pauseWhen: [.idle], idleAfter: .seconds(600)))
        #expect(early.session(locked: false, idle: true, idleSince: .seconds(10), now: .seconds(20)) == Self.update(timer: .arm(.seconds(590))))
        #expect(early.session(locked: false, idle: false, idleSince: .zero, now: .seconds(30)) == Self.update(timer: .disarm))
        // An unknown IdleSinceHint (0) counts from when idle was first seen.
        var unknown = Machine(policy: .init(pauseWhen: [.idle], idleAfter: .seconds(60)))
        #expect(unknown.session(locked: false, idle: true, idleSince: .zero, now: .seconds(500)) == Self.update(timer: .arm(.seconds(60))))
        #expect(unknown.session(locked: false, idle: true, idleSince: .zero, now: .seconds(530)) == Self.update(timer: .arm(.seconds(30))))
        #expect(unknown.idleTimerFired(now: .seconds(560)) == Self.update(pause: [.idle]))
    }

    @Test("an early timer (the caller's wake-up for a reload) arms again for the rest; a late one after activity does nothing")
    func earlyTimer() {
        var machine = Machine(policy: .init(pauseWhen: [.idle], idleAfter: .seconds(60)))
        _ = machine.session(locked: false, idle: true, idleSince: .seconds(10), now: .seconds(20))
        #expect(machine.idleTimerFired(now: .seconds(30)) == Self.update(timer: .arm(.seconds(40))))
        _ = machine.session(locked: false, idle: false, idleSince: .zero, now: .seconds(40))
        #expect(machine.idleTimerFired(now: .seconds(70)) == .none)
    }

    @Test("unlocking into an idle session swaps the hold without opening in between")
    func lockThenIdle() {
        var machine = Machine(policy: .init(pauseWhen: [.locked, .idle], idleAfter: .seconds(60)))
        #expect(machine.session(locked: true, idle: true, idleSince: .seconds(10), now: .seconds(100)) == Self.update(pause: [.locked, .idle]))
        #expect(machine.session(locked: false, idle: true, idleSince: .seconds(10), now: .seconds(101)) == Self.update(resume: [.locked]))
        #expect(machine.paused == [.idle])
    }

    @Test("a reload that drops --pause-when resumes; losing logind resumes everything")
    func policyAndLoss() {
        var machine = Machine(policy: .init(pauseWhen: [.locked]))
        #expect(machine.session(locked: true, idle: false, idleSince: .zero, now: .seconds(1)) == Self.update(pause: [.locked]))
        #expect(machine.policyChanged(.init(), now: .seconds(2)) == Self.update(resume: [.locked]))
        #expect(machine.policyChanged(.init(pauseWhen: [.locked]), now: .seconds(3)) == Self.update(pause: [.locked]))
        _ = machine.prepareForSleep(true)
        #expect(machine.lost() == Self.update(resume: [.sleep, .locked]))
        #expect(machine.paused.isEmpty)
        #expect(machine.state == .awake(.init()))
    }

    @Test("a reload that adds idle decides at once against the time the session has been idle")
    func policyAddsIdle() {
        var machine = Machine(policy: .init())
        #expect(machine.session(locked: false, idle: true, idleSince: .seconds(10), now: .seconds(20)) == .none)
        #expect(machine.policyChanged(.init(pauseWhen: [.idle], idleAfter: .seconds(60)), now: .seconds(30)) == Self.update(timer: .arm(.seconds(40))))
        #expect(machine.policyChanged(.init(pauseWhen: [.idle], idleAfter: .seconds(15)), now: .seconds(31)) == Self.update(pause: [.idle], timer: .disarm))
        #expect(machine.policyChanged(.init(), now: .seconds(32)) == Self.update(resume: [.idle]))
    }

    @Test("losing logind while the idle timer runs disarms it")
    func lossWhileTiming() {
        var machine = Machine(policy: .init(pauseWhen: [.idle], idleAfter: .seconds(60)))
        _ = machine.session(locked: false, idle: true, idleSince: .seconds(10), now: .seconds(20))
        #expect(machine.lost() == Self.update(timer: .disarm))
        #expect(machine.lost() == .none)
    }
}
