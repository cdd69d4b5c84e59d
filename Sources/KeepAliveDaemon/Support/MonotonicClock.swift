import Glibc
import KeepAlive

/// CLOCK_MONOTONIC now, the clock of logind's `…Monotonic` hints and sd-bus's timeouts, which
/// the reconnect backoffs of the system bus's clients (logind, device reservations) count on
/// too. Not `ContinuousClock`: on Linux that is CLOCK_BOOTTIME, which goes on through a suspend.
func monotonicNow() -> Duration {
    .reading(of: CLOCK_MONOTONIC)
}

/// A `poll` timeout that ends no earlier than `deadline`, a CLOCK_MONOTONIC reading (sd-bus's
/// timeouts, a backoff's next try).
func monotonicPollTimeout(until deadline: Duration) -> Int32 {
    (deadline - monotonicNow()).pollTimeout
}

/// Sleeps the calling thread: the shell commands wait without Swift concurrency (nothing else
/// runs while they wait, and the daemon they start must not inherit a dispatch runtime).
func sleep(for duration: Duration) {
    var request = duration.timespec
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0, errno == EINTR { request = remaining }
}
