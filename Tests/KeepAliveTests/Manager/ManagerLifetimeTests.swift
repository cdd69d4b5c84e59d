import Logging
import TestSupport
import Testing

@testable import KeepAlive

/// Regression for two LeakSanitizer findings in the daemon (`scripts/sanitize address`: the
/// process tests failed 2 runs in 3, the daemon exiting 1 with "32 byte(s) leaked"). Playback
/// loops reported through a `[weak self]` closure, and each event stream's termination handler
/// held its broadcaster `weak`: both gave the object a weak-reference side table. Once the loops
/// or the subscription were gone, only the object's refcount field pointed at that table, in an
/// encoding LeakSanitizer cannot follow, so a manager still alive at exit (as in the daemon) was
/// reported. This test failed the same way under the sanitizer before the fix, every time.
@Suite("Manager lifetime")
struct ManagerLifetimeTests {
    /// Kept until the test process exits, like the daemon's manager: LeakSanitizer checks it then.
    static let keptUntilExit = Locked<[KeepAliveManager]>([])

    @Test("a started and stopped manager kept until exit holds nothing LeakSanitizer cannot reach; its loops are gone")
    func stoppedManagerKeptUntilExit() async throws {
        let manager = try KeepAliveManager(
            configuration: KeepAliveConfiguration(devices: ["null"]),
            logger: .quiet)
        // A subscriber that comes and goes, as `keepalived status` observers and tests do.
        let observer = Task { for await _ in manager.events {} }
        manager.start()
        try await waitUntil("the output to play") { manager.state == .playing }
        observer.cancel()
        await observer.value
        try await waitUntil("the subscription to end") { manager.eventBroadcaster.subscriberCount == 0 }
        manager.stop()
        #expect(manager.state == .stopped)
        #expect(manager.outputs.allSatisfy { $0.state == .stopped })
        Self.keptUntilExit.withLock { $0.append(manager) }
    }
}
