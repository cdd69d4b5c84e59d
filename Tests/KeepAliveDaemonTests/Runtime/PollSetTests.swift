import CKeepAliveLinux
import Glibc
import KeepAlive
import Testing
import TestSupport

@testable import KeepAliveDaemon

@Suite("The main loop's poll set, keyed by what it waits for")
struct PollSetTests {
    @Test("every source has a pollfd of its own, none polled until watched")
    func mapping() {
        var set = PollSet()
        #expect(set.descriptors.count == Wakeup.allCases.count)
        #expect(Wakeup.allCases.allSatisfy { set.descriptor(of: $0) == -1 })
        set.watch(.reloads, 7)
        set.watch(.logind, 9, events: Int16(POLLIN | POLLOUT))
        #expect(set.descriptor(of: .reloads) == 7)
        #expect(set.descriptors[Wakeup.logind.rawValue].events == Int16(POLLIN | POLLOUT))
        #expect(Wakeup.allCases.filter { set.descriptor(of: $0) != -1 } == [.reloads, .logind])
        set.watch(.logind, -1, events: 0)
        #expect(set.descriptor(of: .logind) == -1)
    }

    @Test("a wait names what is ready, in the order a turn handles it; a ready source stays ready until drained")
    func ready() throws {
        let (signals, reloads, rescan) = (TestEventSource(), TestEventSource(), TestEventSource())
        var set = PollSet()
        set.watch(.signals, signals.descriptor)
        set.watch(.reloads, reloads.descriptor)
        set.watch(.rescanTimer, rescan.descriptor)
        #expect(try set.wait(timeout: 0))
        #expect(set.ready.isEmpty)
        rescan.ring()
        reloads.ring()
        #expect(try set.wait(timeout: 1000))
        #expect(set.ready == [.reloads, .rescanTimer])
        #expect(set.isReady(.reloads) && !set.isReady(.signals))
        var count: UInt64 = 0
        _ = read(rescan.descriptor, &count, 8)
        _ = read(reloads.descriptor, &count, 8)
        #expect(try set.wait(timeout: 0))
        #expect(set.ready.isEmpty, "the last wait's readiness is cleared")
    }

    @Test("the handling order: a stop before a reload, a reload before the rescan that plans from it")
    func order() {
        let all = Wakeup.allCases
        #expect(all.firstIndex(of: .signals)! < all.firstIndex(of: .reloads)!)
        #expect(all.firstIndex(of: .doorbell)! < all.firstIndex(of: .reloads)!)
        #expect(all.firstIndex(of: .reloads)! < all.firstIndex(of: .rescanTimer)!)
        #expect(all.map(\.rawValue) == Array(0..<all.count))
    }

    @Test("timeouts: durations round up to whole ms, the earliest of two wins, -1 is none")
    func timeouts() {
        #expect(Duration.zero.pollTimeout == 0)
        #expect(Duration.nanoseconds(-5).pollTimeout == 0)
        #expect(Duration.nanoseconds(1).pollTimeout == 1)
        #expect(Duration.microseconds(999).pollTimeout == 1)
        #expect(Duration.milliseconds(250).pollTimeout == 250)
        #expect((Duration.seconds(4) + .microseconds(1)).pollTimeout == 4001)
        #expect(Duration.milliseconds(1234).wholeMilliseconds == 1234)
        #expect((Duration.milliseconds(7) + .microseconds(999)).wholeMilliseconds == 7)
        #expect(Duration.milliseconds(-3).microseconds == 0)
        #expect((Duration.seconds(2) + .microseconds(5)).microseconds == 2_000_005)
        #expect(Duration.seconds(Int64.max / 2).pollTimeout == Int32.max)
        #expect(earliestPollTimeout(-1, -1) == -1)
        #expect(earliestPollTimeout(-1, 30) == 30)
        #expect(earliestPollTimeout(20, -1) == 20)
        #expect(earliestPollTimeout(20, 30) == 20)
        #expect(earliestPollTimeout(0, 30) == 0)
    }

    @Test("system calls' structures: a timespec and a timeval round down to their unit; an absolute deadline is whole")
    func structures() {
        let span = Duration.seconds(3) + .nanoseconds(123_456_789) + Duration(secondsComponent: 0, attosecondsComponent: 5)
        #expect(span.timespec.tv_sec == 3 && span.timespec.tv_nsec == 123_456_789)
        #expect(span.timeval.tv_sec == 3 && span.timeval.tv_usec == 123_456)
        // An absolute deadline carries whole seconds over from the nanoseconds.
        let before = Duration.reading(of: CLOCK_MONOTONIC)
        let deadline = Duration(Duration.milliseconds(1500).fromNow(on: CLOCK_MONOTONIC)!)
        let after = Duration.reading(of: CLOCK_MONOTONIC)
        #expect(deadline >= before + .milliseconds(1500) && deadline <= after + .milliseconds(1500))
        #expect(Duration.milliseconds(1500).fromNow(on: CLOCK_MONOTONIC)!.tv_nsec < 1_000_000_000)
    }
}
