import CKeepAliveLinux
import Glibc
import KeepAlive

/// A timerfd the main loop polls: periodic (the watchdog) or one-shot (a rescan after a burst of
/// configuration changes settles).
///
/// ```swift
/// let watchdog = try IntervalTimer()
/// watchdog.arm(after: .seconds(30), every: .seconds(30))
/// ```
///
/// Sendable: it holds only its descriptor, and timerfd calls may come from any thread.
final class IntervalTimer: Sendable {
    let descriptor: Int32

    init() throws(Errno) {
        descriptor = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC | TFD_NONBLOCK))
        guard descriptor >= 0 else { throw Errno(errno) }
    }

    deinit { close(descriptor) }

    /// Fires after `delay`, then every `interval` (nil: once).
    func arm(after delay: Duration, every interval: Duration? = nil) {
        var spec = itimerspec(it_interval: (interval ?? .zero).timespec, it_value: max(delay, .nanoseconds(1)).timespec)
        timerfd_settime(descriptor, 0, &spec, nil)
    }

    /// Stops a pending or periodic timer.
    func disarm() {
        var spec = itimerspec()
        timerfd_settime(descriptor, 0, &spec, nil)
        acknowledge()
    }

    /// Clears what fired; returns how many times it did.
    @discardableResult
    func acknowledge() -> UInt64 {
        var count: UInt64 = 0
        return read(descriptor, &count, 8) == 8 ? count : 0
    }}
