import Foundation
import TestSupport
import Testing
@testable import KeepAlive

/// The one place the engine and the daemon start threads.
@Suite("Threads")
struct ThreadTests {
    /// What a body saw of the thread it ran on.
    struct Observed: Sendable {
        var thread: UInt
        var inTask: Bool
        var name: String
        var blocksSIGTERM: Bool
    }

    static func observe() -> Observed {
        // pthread_getname_np is hidden behind _GNU_SOURCE; the kernel shows the same name here.
        let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        var mask = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &mask)
        return Observed(thread: UInt(pthread_self()), inTask: withUnsafeCurrentTask { $0 != nil },
                        name: name.trimmingCharacters(in: .newlines),
                        blocksSIGTERM: sigismember(&mask, SIGTERM) == 1)
    }

    @Test("a joinable thread runs outside any task, named, with signals blocked; join waits for its body")
    func joinable() async throws {
        let seen = Locked<Observed?>(nil)
        let thread = try startThread(named: "keepalive-test") {
            usleep(20_000)  // join must wait for this
            seen.withLock { $0 = Self.observe() }
        }
        thread.join()
        let observed = try #require(seen.withLock { $0 })
        #expect(observed.thread != UInt(pthread_self()))
        #expect(!observed.inTask)
        #expect(observed.name == "keepalive-test")
        #expect(observed.blocksSIGTERM)
    }

    @Test("a detached thread runs its body the same way")
    func detached() async throws {
        let seen = Locked<Observed?>(nil)
        try startDetachedThread(named: "keepalive-det") { seen.withLock { $0 = Self.observe() } }
        try await waitUntil("the detached body to run") { seen.withLock { $0 != nil } }
        let observed = try #require(seen.withLock { $0 })
        #expect(!observed.inTask)
        #expect(observed.name == "keepalive-det")
        #expect(observed.blocksSIGTERM)
    }

    @Test("when pthread_create fails: a described error, the body never runs, and nothing it captured leaks")
    func creationFails() throws {
        final class Captured: Sendable {}
        weak var weakCaptured: Captured?
        let ran = Locked(false)
        do {
            let captured = Captured()
            weakCaptured = captured
            #expect(throws: ThreadStartError(name: "keepalive-ctl", code: EAGAIN)) {
                _ = try spawnThread(named: "keepalive-ctl", { _ = captured; ran.withLock { $0 = true } }, create: { _, _, _ in EAGAIN })
            }
        }
        #expect(weakCaptured == nil, "the job box was not released")
        #expect(!ran.withLock { $0 })
        #expect(ThreadStartError(name: "keepalive-ctl", code: EAGAIN).description.contains("keepalive-ctl"))
    }
}
