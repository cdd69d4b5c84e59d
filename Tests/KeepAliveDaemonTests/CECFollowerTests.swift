import Glibc
import Logging
import Testing

@testable import KeepAliveDaemon

/// ``CECFollower``, the daemon's side of `--cec`, without an adapter: what it queues, and its
/// thread's start, report and stop around a node that does not exist.
@Suite("CEC follower")
struct CECFollowerTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    @Test("without --cec nothing is queued, however often the box changes; the box itself is kept")
    func nothingQueuedWithoutCEC() {
        let follower = CECFollower(settings: .init(), logger: Self.logger)
        for _ in 0..<1000 {
            follower.boxChanged(active: true)
            follower.boxChanged(active: false)
        }
        follower.boxChanged(active: true)
        let inbox = follower.take()
        #expect(inbox.box.isEmpty && inbox.active && !inbox.running)
        #expect(follower.report == nil)
        follower.stop()
    }

    @Test("--cec added on a reload starts the thread, which waits for a missing node and stops on request")
    func missingNode() {
        let follower = CECFollower(settings: .init(), logger: Self.logger)
        follower.boxChanged(active: true)
        follower.apply(.init(device: "/nonexistent-keepalived-test/cec9"))
        let deadline = ContinuousClock.now + .seconds(5)
        while follower.report?.state != "waiting for the adapter", ContinuousClock.now < deadline { sleep(for: .milliseconds(10)) }
        #expect(follower.report == .init(device: "/nonexistent-keepalived-test/cec9", state: "waiting for the adapter"))
        // Taken away again: the report goes, the thread sleeps until the stop.
        follower.apply(.init())
        #expect(follower.report == nil)
        follower.stop()
    }
}
