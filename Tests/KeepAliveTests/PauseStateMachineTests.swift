import Testing

@testable import KeepAlive

@Suite struct PauseStateMachineTests {
    @Test func sleepClosesBeforeTheLockGoesAndReopensAfterResume() {
        var machine = PauseStateMachine(pauseWhen: [])
        #expect(machine.prepareForSleep(true) == [.pause(.sleep), .releaseSleepLock])
        #expect(machine.cause == .sleep)
        #expect(machine.prepareForSleep(true) == [])
        #expect(machine.prepareForSleep(false) == [.takeSleepLock, .resume])
        #expect(machine.cause == nil)
        #expect(machine.prepareForSleep(false) == [])
    }

    @Test func lockAndIdleCountOnlyWhenAskedFor() {
        var machine = PauseStateMachine(pauseWhen: [.idle])
        #expect(machine.lockedChanged(true) == [])
        #expect(machine.cause == nil)
        #expect(machine.idleChanged(true) == [.pause(.idle)])
        #expect(machine.idleChanged(false) == [.resume])
    }

    @Test func lockOutranksIdleAndResumesOnlyWhenBothClear() {
        var machine = PauseStateMachine(pauseWhen: [.locked, .idle])
        #expect(machine.idleChanged(true) == [.pause(.idle)])
        #expect(machine.lockedChanged(true) == [.pause(.locked)])
        #expect(machine.lockedChanged(false) == [.pause(.idle)])
        #expect(machine.idleChanged(false) == [.resume])
    }

    @Test func aLockDuringSleepIsHeldUntilResume() {
        var machine = PauseStateMachine(pauseWhen: [.locked])
        _ = machine.prepareForSleep(true)
        #expect(machine.lockedChanged(true) == [])
        #expect(machine.prepareForSleep(false) == [.takeSleepLock, .pause(.locked)])
        #expect(machine.lockedChanged(false) == [.resume])
    }
}
