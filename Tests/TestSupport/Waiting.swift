import Glibc

/// A condition that did not come true before its deadline.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public let what: String
    public let timeout: Duration
    public init(what: String, timeout: Duration) {
        self.what = what
        self.timeout = timeout
    }
    public var description: String { "timed out after \(timeout) waiting for \(what)" }
}

/// Polls `condition` until it holds or `timeout` passes (stretched under a sanitizer). Tests
/// wait for observable states this way, never for a fixed time (CONTRIBUTING, "What a test may
/// bound in time"): the deadline says "it never happened", far beyond any requirement.
@discardableResult
public func waitUntil(_ what: String, timeout: Duration = .seconds(5), every interval: Duration = .milliseconds(20),
                      _ condition: () throws -> Bool) async throws -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    let timeout = timeout.underSanitizer
    while true {
        if try condition() { return start.duration(to: clock.now) }
        if start.duration(to: clock.now) > timeout { throw DeadlineExceeded(what: what, timeout: timeout) }
        try await Task.sleep(for: interval)
    }
}

/// Like `waitUntil` but yields the first non-nil value.
public func waitFor<T>(_ what: String, timeout: Duration = .seconds(5), every interval: Duration = .milliseconds(20),
                       _ produce: () throws -> T?) async throws -> T {
    var value: T?
    try await waitUntil(what, timeout: timeout, every: interval) {
        value = try produce()
        return value != nil
    }
    return value!
}

/// `waitUntil` for a test that may not suspend (it drives a main loop by hand, or its subject
/// runs on threads of its own): sleeps the calling thread between tries. Whether `condition`
/// held before `timeout` (stretched under a sanitizer) passed; the test expects on that.
@discardableResult
public func pollUntil(timeout: Duration = .seconds(5), every interval: Duration = .milliseconds(5),
                      _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout.underSanitizer
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        let (seconds, attoseconds) = interval.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        nanosleep(&request, nil)
    }
}
