import Glibc
import TestSupport
import Testing
@testable import KeepAlive

/// ``PlaybackLoop``'s claim on its thread: what only the playback thread may touch is checked.
@Suite("Playback loop: its thread's owner")
struct PlaybackLoopOwnerTests {
    @Test("the thread claims the loop before its first report; the thread that made and started it does not own it")
    func threadClaims() throws {
        let made = Locked<PlaybackLoop?>(nil)
        // Whether each report came from the loop's owner.
        let onOwner = Locked<[Bool]>([])
        var configuration = OutputConfiguration()
        configuration.retry = RetryPolicy(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(200))
        let loop = PlaybackLoop(device: "keepalived-test-no-such-pcm", configuration: configuration) { _ in
            let owned = made.withLock { $0 }?.owner.isOwnedByCurrentThread ?? false
            onOwner.withLock { $0.append(owned) }
        }
        made.withLock { $0 = loop }
        loop.start()
        // A deadline that says "it never reported", not how fast (CONTRIBUTING, "What a test may bound in time").
        let deadline = ContinuousClock.now + Duration.seconds(10).underSanitizer
        while onOwner.withLock({ $0.count }) < 2, ContinuousClock.now < deadline { usleep(10_000) }
        #expect(!loop.owner.isOwnedByCurrentThread)
        loop.stopAndJoin()
        made.withLock { $0 = nil }
        let seen = onOwner.withLock { $0 }
        #expect(seen.count >= 2 && seen.allSatisfy { $0 }, "\(seen)")
    }

    @Test("a way of playing's call about a fault off the playback thread stops the process, in every build")
    func faultOffTheThreadStops() async {
        await #expect(processExitsWith: .failure) {
            let loop = PlaybackLoop(device: "null", configuration: OutputConfiguration()) { _ in }
            _ = loop.ringNotReplayed("off the playback thread")
        }
    }

    @Test("a per-period call off the playback thread stops a debug or test build")
    func periodOffTheThreadStops() async {
        await #expect(processExitsWith: .failure) {
            let loop = PlaybackLoop(device: "null", configuration: OutputConfiguration()) { _ in }
            loop.flowing()
        }
    }
}
