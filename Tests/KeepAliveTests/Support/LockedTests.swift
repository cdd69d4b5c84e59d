import Dispatch
import TestSupport
import Testing

@testable import KeepAlive

/// Regression for a ThreadSanitizer report (`scripts/sanitize thread`, EventObserverTests, about
/// one run in three): two threads taking a `Synchronization.Mutex` in turn were reported as a
/// data race whenever the lock was contended, because the mutex's contended path runs inside
/// the uninstrumented Synchronization library. The engine's shared state now sits in `Locked`
/// (a pthread mutex, which the sanitizers intercept). Under `--sanitize=thread` this test, with
/// every iteration contended, reports a race for a `Mutex` and none for `Locked`.
@Suite("Locked")
struct LockedTests {
    @Test("four threads contending for one lock: every update counted, none lost")
    func contended() {
        let counter = Locked(0)
        let perThread = 50_000
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<perThread { counter.withLock { $0 += 1 } }
        }
        #expect(counter.withLock { $0 } == 4 * perThread)
    }

    @Test("a throwing body releases the lock and rethrows its own error")
    func throwingBody() {
        struct Refused: Error, Equatable {}
        let value = Locked([1, 2])
        #expect(throws: Refused.self) { try value.withLock { (_: inout [Int]) throws(Refused) in throw Refused() } }
        #expect(value.withLock { $0.count } == 2)
    }
}
