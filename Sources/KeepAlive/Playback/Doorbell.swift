import Glibc
import CKeepAliveLinux
import Synchronization

/// How other threads get a playback thread's attention: a one-shot stop, or a ring that only
/// wakes it (a new configuration is waiting). The thread polls ``descriptor`` alongside whatever
/// else it waits on, so either interrupts any wait at once, however long (a ring loop sleeps
/// for tens of seconds).
///
/// ```swift
/// let doorbell = try Doorbell()
/// doorbell.ring()        // from the manager: look at the pending configuration
/// doorbell.raise()       // from the manager: stop
/// ```
///
/// Waits end at a deadline on a timer of the kernel's, not after a poll timeout: a timeout is
/// counted from the moment the thread enters the poll, so a process stopped (SIGSTOP, a frozen
/// cgroup) after it computed one but before it slept would sleep the whole timeout again once
/// continued, and a buffer that ran dry meanwhile would stay dry that much longer. A deadline
/// that passed while the process was stopped has simply passed.
///
/// Concurrency: raised or rung by any thread, read by the playback thread. The flag is an atomic
/// (release on raise, acquire on read) and the eventfd is only written, polled and drained,
/// all safe from any thread; only the playback thread waits, so only it arms the timer. The
/// descriptors are closed in `deinit`, after the last user let go.
///
/// Made only where its owner can say so when it cannot be (``DoorbellError``): a process out of
/// descriptors is a fault to report, never a reason for the library to stop the program that
/// embeds it.
package final class Doorbell: Sendable {
    /// An eventfd: readable once signalled.
    package let descriptor: Int32
    /// A timerfd on CLOCK_BOOTTIME, the clock behind `ContinuousClock` on Linux (it runs on
    /// through a system sleep, so a deadline is the same instant for both).
    private let timer: Int32
    private let raised = Atomic<Bool>(false)

    package init() throws(DoorbellError) {
        descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard descriptor >= 0 else { throw DoorbellError(call: "eventfd", code: errno) }
        timer = timerfd_create(CLOCK_BOOTTIME, Int32(TFD_CLOEXEC | TFD_NONBLOCK))
        guard timer >= 0 else {
            let code = errno
            close(descriptor)
            throw DoorbellError(call: "timerfd_create", code: code)
        }
    }

    deinit {
        close(descriptor)
        close(timer)
    }

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
        let deadline = ContinuousClock.now + timeout
        while true {
            switch wait(until: deadline, orReadable: -1) {
            case .stopped: return true
            case .timedOut: return false
            case .rung, .readable: continue
            }
        }
    }

    /// Why ``wait(until:orReadable:)`` returned.
    enum Wake: Equatable {
        case stopped
        case timedOut
        /// The other descriptor became readable.
        case readable
        /// Rung: something for the thread to look at (not a stop).
        case rung
    }

    /// Sleeps up to `timeout` from now; see ``wait(until:orReadable:)``.
    func wait(_ timeout: Duration, orReadable other: Int32) -> Wake {
        wait(until: ContinuousClock.now + timeout, orReadable: other)
    }

    /// Sleeps until `deadline` (at once if it has passed), until raised or rung, or until `other`
    /// is readable (ignored when negative). A ring is drained before returning.
    func wait(until deadline: ContinuousClock.Instant, orReadable other: Int32) -> Wake {
        // Arming again clears an expiry the last wait left unread, so the timer never needs a read.
        let armed = arm(at: deadline)
        var fds = (pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: timer, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: other, events: Int16(POLLIN), revents: 0))
        // Should the timer ever refuse, the poll's own timeout keeps the wait bounded.
        let timeout = armed ? -1 : ContinuousClock.now.duration(to: deadline).pollTimeout
        var ready: Int32
        repeat {
            ready = withUnsafeMutablePointer(to: &fds) { pointer in
                pointer.withMemoryRebound(to: pollfd.self, capacity: 3) { poll($0, other >= 0 ? 3 : 2, timeout) }
            }
        } while ready < 0 && errno == EINTR
        if isRaised { return .stopped }
        guard ready > 0 else { return .timedOut }
        if fds.0.revents != 0 {
            drain()
            return .rung
        }
        return fds.2.revents != 0 ? .readable : .timedOut
    }

    /// Sets the timer to expire at `deadline`. The instant is carried over as the time left on
    /// the continuous clock added to CLOCK_BOOTTIME's reading: the two are read one after the
    /// other, so only a stop between those two reads could still shift it.
    private func arm(at deadline: ContinuousClock.Instant) -> Bool {
        // A deadline already past still arms the timer, a nanosecond ahead: a zero value disarms it.
        let left = max(ContinuousClock.now.duration(to: deadline), .nanoseconds(1))
        guard let expiry = left.fromNow(on: CLOCK_BOOTTIME) else { return false }
        var value = itimerspec()
        value.it_value = expiry
        return timerfd_settime(timer, Int32(TFD_TIMER_ABSTIME), &value, nil) == 0
    }
}

/// A ``Doorbell`` could not be made: the kernel refused one of its descriptors (`EMFILE` when
/// the process is out of descriptors, `ENFILE` when the system is, `ENOMEM`).
///
/// ```swift
/// do { _ = try Doorbell() } catch { logger.error("\(error)") }
/// ```
package struct DoorbellError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The call that failed: `eventfd` or `timerfd_create`.
    package let call: String
    /// Its `errno`.
    package let code: Int32

    package var description: String { "cannot create a doorbell: \(call): \(String(cString: strerror(code))) (errno \(code))" }
}
