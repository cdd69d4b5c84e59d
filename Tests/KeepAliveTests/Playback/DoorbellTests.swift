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
    func pastDeadline() throws {
        let doorbell = try Doorbell()
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
    func deadlineAhead() throws {
        let doorbell = try Doorbell()
        // Leaves the timer expired and unread.
        #expect(doorbell.wait(until: clock.now - .seconds(1), orReadable: -1) == .timedOut)
        let deadline = clock.now + .milliseconds(150)
        #expect(doorbell.wait(until: deadline, orReadable: -1) == .timedOut)
        #expect(clock.now >= deadline)
        #expect(!doorbell.wait(.milliseconds(50)))
    }

    @Test("a ring ends a deadline wait and is drained; a raise ends every later wait")
    func ringAndRaise() throws {
        let doorbell = try Doorbell()
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
        let doorbell = try Doorbell()
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        var byte: UInt8 = 1
        #expect(write(ends[1], &byte, 1) == 1)
        #expect(doorbell.wait(until: clock.now + .seconds(30), orReadable: ends[0]) == .readable)
    }
}

/// A process out of descriptors: the library says so, and never stops the program embedding it.
/// Each runs in a child process (an exit test), whose descriptor limit is lowered around the
/// call: in the runner's own process every test beside it would be refused too.
@Suite("Doorbell without descriptors")
struct DoorbellDescriptorTests {
    @Test("its eventfd refused: an error naming it, with errno")
    func eventfdRefused() async {
        await #expect(processExitsWith: .success) {
            let limit = leaveDescriptors(0)
            defer { restoreDescriptorLimit(limit) }
            do {
                _ = try Doorbell()
                preconditionFailure("a doorbell was made with no descriptor left")
            } catch let error as DoorbellError {
                precondition(error == DoorbellError(call: "eventfd", code: EMFILE), "\(error)")
                precondition(error.description == "cannot create a doorbell: eventfd: Too many open files (errno 24)", error.description)
            } catch {
                preconditionFailure("\(error)")
            }
        }
    }

    @Test("its timer refused: an error naming it, and the eventfd made before it closed again")
    func timerRefused() async {
        await #expect(processExitsWith: .success) {
            let limit = leaveDescriptors(1)
            defer { restoreDescriptorLimit(limit) }
            do {
                _ = try Doorbell()
                preconditionFailure("a doorbell was made with one descriptor left")
            } catch let error as DoorbellError {
                precondition(error == DoorbellError(call: "timerfd_create", code: EMFILE), "\(error)")
            } catch {
                preconditionFailure("\(error)")
            }
            // The one descriptor left is free again.
            let again = open("/dev/null", O_RDONLY | O_CLOEXEC)
            precondition(again >= 0, "the eventfd was not closed")
            close(again)
        }
    }

    @Test("a playback loop without its doorbell reports the output's fault at its start and starts no thread")
    func playbackLoopReports() async {
        await #expect(processExitsWith: .success) {
            let reports = Locked<[String]>([])
            let limit = leaveDescriptors(0)
            let loop = PlaybackLoop(device: "null", configuration: OutputConfiguration()) { report in
                if case .fault(let reason, let message) = report { reports.withLock { $0.append("\(reason): \(message)") } }
            }
            restoreDescriptorLimit(limit)
            loop.start()
            loop.apply(OutputConfiguration())
            loop.stopAndJoin()
            let faults = reports.withLock { $0 }
            precondition(faults == ["unknown: cannot create a doorbell: eventfd: Too many open files (errno 24)"], "\(faults)")
        }
    }
}
