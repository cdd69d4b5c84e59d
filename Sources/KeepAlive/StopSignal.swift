#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CALSA
import Synchronization

/// A one-shot stop request a playback thread can poll alongside its PCM descriptors, so that
/// stop interrupts any wait at once instead of at the next period.
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
