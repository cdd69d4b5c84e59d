import Glibc
import TestSupport
import Testing
@testable import KeepAlive

/// The playback thread's waits, on the kernel's own eventfd and timerfd.
@Suite("Doorbell")
struct DoorbellTests {
    let clock = ContinuousClock()

    /// A thread stopped between computing when to look again and going to sleep (SIGSTOP, a frozen
    /// cgroup) must not sleep again once continued: the device may have run dry meanwhile. The
    /// stop is stood in for by the thread being busy past the deadline before it waits.
    @Test("a deadline that passed before the wait began ends it at once")
    func pastDeadline() {
        let doorbell = Doorbell()
        let deadline = clock.now + .milliseconds(200)
        usleep(400_000)
        let began = clock.now
        #expect(doorbell.wait(until: deadline, orReadable: -1) == .timedOut)
        // A wait that missed its past deadline would block for good (nothing rings): a deadline
        // that means "it never returned", not how fast it returned (CONTRIBUTING, "What a test
        // may bound in time"; a busy machine can hold one call for most of a second).
        #expect(began.duration(to: clock.now) < Duration.seconds(5).underSanitizer)
    }

    @Test("a deadline ahead is slept to, not before; the expiry of the last wait does not end the next")
    func deadlineAhead() {
        let doorbell = Doorbell()
        // Leaves the timer expired and unread.
        #expect(doorbell.wait(until: clock.now - .seconds(1), orReadable: -1) == .timedOut)
        let deadline = clock.now + .milliseconds(150)
        #expect(doorbell.wait(until: deadline, orReadable: -1) == .timedOut)
        #expect(clock.now >= deadline)
        #expect(!doorbell.wait(.milliseconds(50)))
    }

    @Test("a ring ends a deadline wait and is drained; a raise ends every later wait")
    func ringAndRaise() {
        let doorbell = Doorbell()
        doorbell.ring()
        #expect(doorbell.wait(until: clock.now + .seconds(30), orReadable: -1) == .rung)
        let began = clock.now
        #expect(doorbell.wait(until: clock.now + .milliseconds(50), orReadable: -1) == .timedOut)
        #expect(began.duration(to: clock.now) >= .milliseconds(50))
        doorbell.raise()
        #expect(doorbell.wait(until: clock.now + .seconds(30), orReadable: -1) == .stopped)
        #expect(doorbell.wait(.seconds(30)))
    }

    @Test("another descriptor becoming readable ends the wait")
    func otherDescriptor() throws {
        let doorbell = Doorbell()
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        var byte: UInt8 = 1
        #expect(write(ends[1], &byte, 1) == 1)
        #expect(doorbell.wait(until: clock.now + .seconds(30), orReadable: ends[0]) == .readable)
    }
}
