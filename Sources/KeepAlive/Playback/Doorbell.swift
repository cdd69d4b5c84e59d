import Glibc
import CSystem
import Synchronization

/// How other threads get a playback thread's attention: a one-shot stop, or a ring that only
/// wakes it (a new configuration is waiting). The thread polls ``descriptor`` alongside whatever
/// else it waits on, so either interrupts any wait at once, however long (a ring loop sleeps
/// for tens of seconds).
///
/// ```swift
/// let doorbell = Doorbell()
/// doorbell.ring()        // from the manager: look at the pending configuration
/// doorbell.raise()       // from the manager: stop
/// ```
///
/// Concurrency: raised or rung by any thread, read by the playback thread. The flag is an atomic
/// (release on raise, acquire on read) and the eventfd is only written, polled and drained,
/// all safe from any thread; the descriptor is closed in `deinit`, after the last user let go.
package final class Doorbell: Sendable {
    /// An eventfd: readable once signalled.
    package let descriptor: Int32
    private let raised = Atomic<Bool>(false)

    package init() {
        descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(descriptor >= 0, "eventfd failed: errno \(errno)")
    }

    deinit { close(descriptor) }

    package var isRaised: Bool { raised.load(ordering: .acquiring) }

    /// Asks the thread to stop; every later wait returns at once.
    package func raise() {
        raised.store(true, ordering: .releasing)
        ring()
    }

    /// Wakes the thread from its current wait without stopping it.
    package func ring() {
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    /// Clears the rings seen so far (never a stop), so the next wait sleeps again.
    package func drain() {
        guard !isRaised else { return }
        var count: UInt64 = 0
        _ = read(descriptor, &count, 8)
    }

    /// Sleeps `timeout` or until raised; returns whether it was raised. A ring does not end this
    /// wait: it is drained, and the thread sees the pending work through its own counter the
    /// next time round its loop.
    func wait(_ timeout: Duration) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !isRaised {
            let remaining = clock.now.duration(to: deadline)
            guard remaining > .zero else { break }
            var fd = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&fd, 1, Int32(clamping: remaining.milliseconds)) > 0 { drain() }
        }
        return isRaised
    }

    /// Why ``wait(_:orReadable:)`` returned.
    enum Wake: Equatable {
        case stopped
        case timedOut
        /// The other descriptor became readable.
        case readable
        /// Rung: something for the thread to look at (not a stop).
        case rung
    }

    /// Sleeps up to `timeout`, until raised or rung, or until `other` is readable (ignored when
    /// negative). A ring is drained before returning.
    func wait(_ timeout: Duration, orReadable other: Int32) -> Wake {
        var fds = (pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: other, events: Int16(POLLIN), revents: 0))
        let ready = withUnsafeMutablePointer(to: &fds) { pointer in
            pointer.withMemoryRebound(to: pollfd.self, capacity: 2) { poll($0, other >= 0 ? 2 : 1, Int32(clamping: timeout.milliseconds)) }
        }
        if isRaised { return .stopped }
        guard ready > 0 else { return .timedOut }
        if fds.0.revents != 0 {
            drain()
            return .rung
        }
        return fds.1.revents != 0 ? .readable : .timedOut
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so a short wait never becomes a busy loop of zero timeouts.
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 || seconds > 0 else { return 0 }
        return Int(seconds) * 1000 + Int((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
