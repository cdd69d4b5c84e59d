import Testing

@testable import KeepAlive

@Suite("Pause state machine")
struct PauseStateMachineTests {
    typealias Machine = PauseStateMachine

    @Test("sleep closes first and then releases the lock; resume takes a new lock before playing")
    func sleep() {
        var machine = Machine(policy: .init())
        #expect(machine.prepareForSleep(true) == [.pause(.sleep), .releaseSleepLock])
        #expect(machine.prepareForSleep(true) == [], "a repeated signal changes nothing")
        #expect(machine.prepareForSleep(false) == [.takeSleepLock, .resume(.sleep)])
        #expect(machine.paused.isEmpty)
    }

    @Test("a lock pauses only with --pause-when locked; unlocking resumes")
    func locked() {
        var ignoring = Machine(policy: .init())
        #expect(ignoring.session(locked: true, idle: false, idleSince: .zero, now: .seconds(100)) == [])

        var machine = Machine(policy: .init(pauseWhen: [.locked]))
        #expect(machine.session(locked: true, idle: false, idleSince: .zero, now: .seconds(100)) == [.pause(.locked)])
        #expect(machine.session(locked: true, idle: false, idleSince: .zero, now: .seconds(101)) == [])
        // Sleeping while locked: both hold; waking keeps the lock's pause.
        #expect(machine.prepareForSleep(true) == [.pause(.sleep), .releaseSleepLock])
        #expect(machine.prepareForSleep(false) == [.takeSleepLock, .resume(.sleep)])
        #expect(machine.paused == [.locked])
        #expect(machine.session(locked: false, idle: false, idleSince: .zero, now: .seconds(200)) == [.resume(.locked)])
    }

    @Test("idle counts from the session's last activity, with a timer for the rest of --idle-after")
    func idle() {
        var machine = Machine(policy: .init(pauseWhen: [.idle], idleAfter: .seconds(600)))
        // The desktop reports idle after 300 s of inactivity that began at t = 1000.
        #expect(machine.session(locked: false, idle: true, idleSince: .seconds(1000), now: .seconds(1300)) == [.armIdleTimer(.seconds(300))])
        #expect(machine.idleTimerFired(now: .seconds(1600)) == [.pause(.idle)])
        // Activity: resume at once.
        #expect(machine.session(locked: false, idle: false, idleSince: .zero, now: .seconds(1700)) == [.resume(.idle)])
        // Idle reported long after it began: pause at once, no timer.
        #expect(machine.session(locked: false, idle: true, idleSince: .seconds(2000), now: .seconds(2700)) == [.pause(.idle)])
        // Active again before the timer: the timer goes too.
        var early = Machine(policy: .init(pauseWhen: [.idle], idleAfter: .seconds(600)))
        #expect(early.session(locked: false, idle: true, idleSince: .seconds(10), now: .seconds(20)) == [.armIdleTimer(.seconds(590))])
        #expect(early.session(locked: false, idle: false, idleSince: .zero, now: .seconds(30)) == [.disarmIdleTimer])
        // An unknown IdleSinceHint (0) counts from when idle was first seen.
        var unknown = Machine(policy: .init(pauseWhen: [.idle], idleAfter: .seconds(60)))
        #expect(unknown.session(locked: false, idle: true, idleSince: .zero, now: .seconds(500)) == [.armIdleTimer(.seconds(60))])
        #expect(unknown.idleTimerFired(now: .seconds(560)) == [.pause(.idle)])
    }

    @Test("unlocking into an idle session swaps the hold without opening in between")
    func lockThenIdle() {
        var machine = Machine(policy: .init(pauseWhen: [.locked, .idle], idleAfter: .seconds(60)))
        #expect(machine.session(locked: true, idle: true, idleSince: .seconds(10), now: .seconds(100)) == [.pause(.locked), .pause(.idle)])
        #expect(machine.session(locked: false, idle: true, idleSince: .seconds(10), now: .seconds(101)) == [.resume(.locked)])
        #expect(machine.paused == [.idle])
    }

    @Test("a reload that drops --pause-when resumes; losing logind resumes everything")
    func policyAndLoss() {
        var machine = Machine(policy: .init(pauseWhen: [.locked]))
        #expect(machine.session(locked: true, idle: false, idleSince: .zero, now: .seconds(1)) == [.pause(.locked)])
        #expect(machine.policyChanged(.init(), now: .seconds(2)) == [.resume(.locked)])
        #expect(machine.policyChanged(.init(pauseWhen: [.locked]), now: .seconds(3)) == [.pause(.locked)])
        _ = machine.prepareForSleep(true)
        #expect(Set(machine.lost()) == [.resume(.sleep), .resume(.locked)])
        #expect(machine.paused.isEmpty)
    }
}
