#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CALSA
import Synchronization

/// A one-shot stop request a playback thread can poll alongside its PCM descriptors, so that
/// stop interrupts any wait at once instead of at the next period.
///
/// Concurrency: raised by any thread, read by the playback thread. The flag is an atomic
/// (release on raise, acquire on read) and the eventfd is only written and polled, both safe
/// from any thread; the descriptor is closed in `deinit`, after the last user let go.
final class StopSignal: Sendable {
    /// An eventfd: readable once signalled.
    let descriptor: Int32
    private let raised = Atomic<Bool>(false)

    init() {
        descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(descriptor >= 0, "eventfd failed: errno \(errno)")
    }

    deinit { close(descriptor) }

    var isRaised: Bool { raised.load(ordering: .acquiring) }

    func raise() {
        raised.store(true, ordering: .releasing)
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    /// Sleeps up to `timeout` or until raised; returns whether it was raised.
    func wait(_ timeout: Duration) -> Bool {
        var fd = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        _ = poll(&fd, 1, Int32(clamping: timeout.milliseconds))
        return isRaised
    }

    /// Why ``wait(_:orReadable:)`` returned.
    enum Wake: Equatable {
        case stopped
        case timedOut
        /// The other descriptor became readable.
        case readable
    }

    /// Sleeps up to `timeout`, until raised, or until `other` is readable (ignored when negative).
    func wait(_ timeout: Duration, orReadable other: Int32) -> Wake {
        guard other >= 0 else { return wait(timeout) ? .stopped : .timedOut }
        var fds = (pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: other, events: Int16(POLLIN), revents: 0))
        let ready = withUnsafeMutablePointer(to: &fds) { pointer in
            pointer.withMemoryRebound(to: pollfd.self, capacity: 2) { poll($0, 2, Int32(clamping: timeout.milliseconds)) }
        }
        if isRaised { return .stopped }
        return ready > 0 && fds.1.revents != 0 ? .readable : .timedOut
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
