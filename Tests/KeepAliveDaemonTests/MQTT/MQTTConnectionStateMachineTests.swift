import Testing

@testable import KeepAliveDaemon

/// The MQTT connection's decisions without a broker: the backoff, the broker that never answers,
/// one journal line per change, the stop.
@Suite("MQTT connection state machine")
struct MQTTConnectionStateMachineTests {
    static let t0 = ContinuousClock.now
    static func at(_ seconds: Double) -> ContinuousClock.Instant { t0 + .milliseconds(Int64(seconds * 1000)) }

    @Test("the waits double from 1 s to 60 s and stay there")
    func backoff() {
        let waits = (1...9).map { MQTTConnectionStateMachine.wait(afterFailures: $0) }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
    }

    @Test("a broker refusing the same way a hundred times is one journal line; another reason is another")
    func oneLinePerChange() {
        var machine = MQTTConnectionStateMachine()
        #expect(machine.start(at: Self.at(0)) == .connect(deadline: Self.at(10), log: nil))
        var now = 0.0
        var lines: [String] = []
        for attempt in 1...100 {
            guard case .retry(let until, let log) = machine.refused("not authorised", at: Self.at(now)) else {
                Issue.record("attempt \(attempt): no retry")
                return
            }
            if let log { lines.append(log) }
            now = Double((until - Self.t0).components.seconds)
            guard case .connect = machine.retryDue(at: until) else {
                Issue.record("attempt \(attempt): no connect at the retry")
                return
            }
        }
        #expect(lines.count == 1 && lines[0].contains("not authorised"), "\(lines)")
        guard case .retry(_, let log?) = machine.refused("Connection refused", at: Self.at(now)) else {
            Issue.record("another reason: no line")
            return
        }
        #expect(log.contains("connection refused"), "\(log)")
    }

    @Test("a broker that accepts TCP and never answers is given up at the deadline, not before")
    func silentBroker() {
        var machine = MQTTConnectionStateMachine()
        _ = machine.start(at: Self.at(0))
        #expect(machine.answerTimedOut(at: Self.at(9.9)) == .none)
        guard case .retry(let until, let log?) = machine.answerTimedOut(at: Self.at(10)) else {
            Issue.record("no retry at the deadline")
            return
        }
        #expect(until == Self.at(11))
        #expect(log.contains("did not answer"))
        // A stale retry timer before the wait is over does nothing.
        #expect(machine.retryDue(at: Self.at(10.5)) == .none)
    }

    @Test("accepted: everything published; lost: the first wait again, whatever the failures before")
    func acceptedThenLost() {
        var machine = MQTTConnectionStateMachine()
        _ = machine.start(at: Self.at(0))
        _ = machine.refused("Connection refused", at: Self.at(0))   // 1 s
        _ = machine.retryDue(at: Self.at(1))
        _ = machine.refused("Connection refused", at: Self.at(1))   // 2 s
        _ = machine.retryDue(at: Self.at(3))
        #expect(machine.accepted(at: Self.at(3.1)) == .publishEverything(log: "MQTT: connected to the broker; publishing the box's state"))
        #expect(machine.isConnected)
        guard case .retry(let until, let log?) = machine.lost("the connection was lost", at: Self.at(100)) else {
            Issue.record("no retry after a loss")
            return
        }
        #expect(until == Self.at(101) && log.contains("lost"))
        #expect(!machine.isConnected)
    }

    @Test("stop: disconnect from any live state; after it, late callbacks change nothing")
    func stop() {
        var machine = MQTTConnectionStateMachine()
        _ = machine.start(at: Self.at(0))
        #expect(machine.stop() == .disconnect)
        #expect(machine.accepted(at: Self.at(1)) == .none)
        #expect(machine.refused("x", at: Self.at(1)) == .none)
        #expect(machine.lost("x", at: Self.at(1)) == .none)
        #expect(machine.stop() == .none)
        var never = MQTTConnectionStateMachine()
        #expect(never.stop() == .none)
    }

    @Test("failures in a row: counted while connecting and waiting, back to 0 once accepted (the publisher's notice-then-warning)")
    func failuresInARow() {
        var machine = MQTTConnectionStateMachine()
        _ = machine.start(at: Self.at(0))
        #expect(machine.failuresInARow == 0 && machine.lastFailure == nil)
        var now = 0.0
        for expected in 1...5 {
            _ = machine.refused("Connection refused.", at: Self.at(now))
            #expect(machine.failuresInARow == expected && machine.lastFailure == "connection refused")
            now += MQTTConnectionStateMachine.wait(afterFailures: expected).seconds
            _ = machine.retryDue(at: Self.at(now))
            #expect(machine.failuresInARow == expected)
        }
        _ = machine.accepted(at: Self.at(now + 1))
        #expect(machine.failuresInARow == 0 && machine.lastFailure == nil && machine.isConnected)
    }
}
