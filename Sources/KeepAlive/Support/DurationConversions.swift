/// The one place a `Duration` becomes a number for an API or a log, each with its rounding
/// stated once: a `poll` timeout rounds up (a wait never ends before its deadline, which would
/// only turn a loop once more for nothing), a figure for a log rounds down, a timer that counts
/// in microseconds (libpulse's, sd-bus's) rounds down and never goes below zero.
///
/// ```swift
/// poll(&fds, 1, ContinuousClock.now.duration(to: deadline).pollTimeout)
/// logger.info("released", metadata: ["ms": "\(took.wholeMilliseconds)"])
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
}
