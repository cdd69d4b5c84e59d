import Foundation
import TestSupport

/// A condition that did not come true before its deadline.
struct DeadlineExceeded: Error, CustomStringConvertible {
    let what: String
    let timeout: Duration
    var description: String { "timed out after \(timeout) waiting for \(what)" }
}

/// Polls `condition` until it holds or `timeout` passes (stretched under a sanitizer). Tests
/// wait for observable states this way, never for a fixed time.
@discardableResult
func waitUntil(_ what: String, timeout: Duration, every interval: Duration = .milliseconds(20),
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
func waitFor<T>(_ what: String, timeout: Duration, every interval: Duration = .milliseconds(20),
                _ produce: () throws -> T?) async throws -> T {
    var value: T?
    try await waitUntil(what, timeout: timeout, every: interval) {
        value = try produce()
        return value != nil
    }
    return value!
}
