import Foundation
import TestSupport
import Testing

/// Guards the sanitizer runs' one allowance: time bounds stretch only when the test binary
/// really runs under the sanitizer that `scripts/test` or `scripts/sanitize` asked for.
@Suite("the test build")
struct TestBuildTests {
    static let requested = ProcessInfo.processInfo.environment["KEEPALIVED_SANITIZER"]

    @Test("the sanitizer probe finds the sanitizer the scripts asked for", .enabled(if: requested != nil))
    func sanitizerProbe() {
        let found = switch Sanitizer.active {
        case .address: "address"
        case .thread: "thread"
        case nil: "none"
        }
        #expect(found == Self.requested, "built for \(Self.requested ?? "?"), probe found \(found)")
        #expect((found == "none") == (Sanitizer.timeScale == Sanitizer.emulationSlowdown))
    }
}
