import Glibc

/// The one place a `Duration` becomes a number or a structure for a system call or a log, and a
/// clock's reading becomes a `Duration`, each with its rounding stated once: a `poll` timeout
/// rounds up (a wait never ends before its deadline, which would only turn a loop once more for
/// nothing), a figure for a log rounds down, a timer that counts in microseconds (libpulse's,
/// sd-bus's) rounds down and never goes below zero, a `timespec` or `timeval` rounds down to its
/// unit (what `nanosleep`, timerfd, a timed wait and a socket's timeouts take). A `timespec`
/// back to a `Duration` is Glibc's own `Duration(_:)`. The library and the daemon both convert
/// here (`package`), so no file writes `tv_nsec` arithmetic of its own.
///
/// ```swift
/// poll(&fds, 1, ContinuousClock.now.duration(to: deadline).pollTimeout)
/// logger.info("released", metadata: ["ms": "\(took.wholeMilliseconds)"])
/// let limit = Duration.seconds(2).timeval   // a socket's SO_RCVTIMEO
/// ```
extension Duration {
    /// Whole milliseconds rounded up, as `poll` takes them: 0 for a duration that is not
    /// positive, `Int32.max` at most.
    package var pollTimeout: Int32 {
        guard self > .zero else { return 0 }
        let (seconds, attoseconds) = components
        guard seconds < Int64(Int32.max / 1000) else { return Int32.max }
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    /// Whole milliseconds rounded down (toward zero): what logs and reports carry (`ms=`).
    package var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// Whole microseconds rounded down, none when negative: libpulse's and sd-bus's timers.
    package var microseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds / 1_000_000_000_000))
    }

    /// Seconds with their fraction: reports (`sinceSeconds`) and arithmetic with rates.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Whole nanoseconds rounded down, as `nanosleep`, timerfd and `pthread_cond_timedwait`
    /// take them.
    package var timespec: Glibc.timespec {
        let (seconds, attoseconds) = components
        return Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    }

    /// Whole microseconds rounded down, as a socket's `SO_RCVTIMEO` and `SO_SNDTIMEO` take them.
    package var timeval: Glibc.timeval {
        let (seconds, attoseconds) = components
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }

    /// `clock`'s reading now (`clock_gettime`), as the time since its epoch.
    package static func reading(of clock: clockid_t) -> Duration {
        var now = Glibc.timespec()
        clock_gettime(clock, &now)
        return Duration(now)
    }

    /// `clock`'s reading this long from now, as an absolute `timespec`: what an absolute timerfd
    /// or a timed wait on a condition of that clock takes. Nil when the clock cannot be read.
    package func fromNow(on clock: clockid_t) -> Glibc.timespec? {
        var now = Glibc.timespec()
        guard clock_gettime(clock, &now) == 0 else { return nil }
        return (Duration(now) + self).timespec
    }
}

/// The shorter of two `poll` timeouts in milliseconds, -1 meaning none.
package func earliestPollTimeout(_ a: Int32, _ b: Int32) -> Int32 {
    if a < 0 { return b }
    if b < 0 { return a }
    return min(a, b)
}
