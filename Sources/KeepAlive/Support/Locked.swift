import Glibc

/// A value behind a pthread mutex: the engine's shared state (manager, output records, event
/// subscribers, pending configurations) lives in these, and the daemon's that two threads take
/// in turn (its reload queue).
///
/// Not `Synchronization.Mutex`: its contended path (a priority-inheritance futex) runs inside
/// the prebuilt Synchronization library, which no sanitizer instruments, so ThreadSanitizer sees
/// two threads that took the lock in turn as a data race (seen in `scripts/sanitize thread`). A
/// pthread mutex is intercepted by the sanitizers, and uncontended it costs about the same two
/// atomic operations. Created once per owner; taking it never allocates.
///
/// ```swift
/// let counter = Locked(0)                                  // a leaf: nothing taken inside
/// counter.withLock { $0 += 1 }
/// let loans = Locked([String](), order: .playerLoans)      // nests outside later locks
/// ```
package final class Locked<Value: ~Copyable> {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value
    /// Where it nests among the process's locks (``LockOrder``, checked in debug builds).
    package let order: LockOrder

    package init(_ value: consuming Value, order: LockOrder = .leaf) {
        self.value = value
        self.order = order
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock; never call back into the same lock, take
    /// only locks that come later in ``LockOrder`` in it, and do no I/O there.
    package func withLock<Result: ~Copyable, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        #if DEBUG
        order.entering(file: file, line: line)
        defer { order.leaving() }
        #endif
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// Shared between threads only when what it guards may be: the lock orders the accesses, it
/// does not make a non-`Sendable` value safe to hand from one thread to another.
extension Locked: @unchecked Sendable where Value: Sendable & ~Copyable {}
