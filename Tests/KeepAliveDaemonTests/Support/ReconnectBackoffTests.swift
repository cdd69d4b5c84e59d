import Testing
@testable import KeepAliveDaemon

@Suite("Reconnect backoff")
struct ReconnectBackoffTests {
    @Test("connected: nothing is due")
    func connected() {
        let backoff = ReconnectBackoff(connectedAt: .seconds(100))
        #expect(backoff.due == nil)
        #expect(!backoff.isDue(at: .seconds(10_000)))
    }

    @Test("after a loss: 1 s, then waits doubling up to a minute, never sooner")
    func doubling() throws {
        var backoff = ReconnectBackoff(connectedAt: .seconds(100))
        var now: Duration = .seconds(110)
        backoff.lost(at: now)
        var waits: [Duration] = []
        for _ in 0..<9 {
            let due = try #require(backoff.due)
            #expect(!backoff.isDue(at: due - .milliseconds(1)))
            #expect(backoff.isDue(at: due))
            waits.append(due - now)
            now = due
            backoff.failed(at: now)
        }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
    }

    @Test("a connection that lasted a minute starts afresh; one lost sooner goes on doubling")
    func lasting() {
        var backoff = ReconnectBackoff(connectedAt: .zero)
        backoff.lost(at: .seconds(1))
        backoff.failed(at: .seconds(2))           // the next wait: 4 s
        backoff.connected(at: .seconds(6))
        #expect(backoff.due == nil)
        backoff.lost(at: .seconds(10))             // 4 s after connecting: no fresh start
        #expect(backoff.due == .seconds(14))
        backoff.connected(at: .seconds(14))
        backoff.lost(at: .seconds(74))             // a minute connected: 1 s again
        #expect(backoff.due == .seconds(75))
    }
}
