import TestSupport
import Testing

@testable import KeepAliveDaemon

/// Commands from the network, without a broker: exactly the payloads the entities send, a
/// bounded rate, one journal line per topic, nothing retained obeyed, and ten thousand fuzzed
/// messages (seeded, so a failure replays) of which none is applied.
@Suite("MQTT command filter")
struct MQTTCommandFilterTests {
    static let t0 = ContinuousClock.now
    static func at(_ seconds: Double) -> ContinuousClock.Instant { t0 + .milliseconds(Int64(seconds * 1000)) }
    static let prefix = "keepalived/box"

    static func send(_ filter: inout MQTTCommandFilter, _ name: String, _ payload: String, retained: Bool = false,
                     at seconds: Double = 0) -> MQTTCommandFilter.Verdict {
        filter.received(topic: "\(prefix)/command/\(name)", payload: Array(payload.utf8), retained: retained, at: at(seconds))
    }

    @Test("the switch's ON and OFF and the buttons' PRESS, exactly; everything else ignored with one line per topic")
    func parsing() {
        var filter = MQTTCommandFilter(prefix: Self.prefix)
        #expect(Self.send(&filter, "keepalive", "OFF", at: 0) == .apply(.keepAlive(on: false)))
        #expect(Self.send(&filter, "keepalive", "ON", at: 1) == .apply(.keepAlive(on: true)))
        #expect(Self.send(&filter, "power-on", "PRESS", at: 2) == .apply(.powerOn))
        #expect(Self.send(&filter, "standby", "PRESS", at: 3) == .apply(.standby))
        #expect(Self.send(&filter, "test-tone", "PRESS", at: 3.5) == .apply(.testTone))
        for (name, payload) in [("keepalive", "on"), ("keepalive", "ON "), ("keepalive", ""), ("power-on", "press"), ("standby", "PRESS\n"),
                                ("test-tone", "ON"), ("test-tone", "PRESS PRESS")] {
            var fresh = MQTTCommandFilter(prefix: Self.prefix)
            guard case .ignore(let log?) = Self.send(&fresh, name, payload) else {
                Issue.record("\(name) \(payload.debugDescription) was not refused with a line")
                continue
            }
            #expect(log.contains("not a payload it takes") && log.contains("\(Self.prefix)/command/\(name)"), "\(log)")
            // The same topic again: nothing more in the journal.
            #expect(Self.send(&fresh, name, payload, at: 1) == .ignore(log: nil))
        }
        guard case .ignore(let log?) = Self.send(&filter, "reboot", "PRESS", at: 4) else {
            Issue.record("an unknown topic was not refused")
            return
        }
        #expect(log.contains("not a command topic"), "\(log)")
        #expect(Self.send(&filter, "reboot", "PRESS", at: 5) == .ignore(log: nil))
        #expect(filter.subscription == "\(Self.prefix)/command/+")
    }

    @Test("a retained command is never obeyed: it would act again at every reconnect")
    func retained() {
        var filter = MQTTCommandFilter(prefix: Self.prefix)
        guard case .ignore(let log?) = Self.send(&filter, "keepalive", "OFF", retained: true) else {
            Issue.record("obeyed a retained command")
            return
        }
        #expect(log.contains("retained"), "\(log)")
        #expect(Self.send(&filter, "keepalive", "OFF", retained: true, at: 1) == .ignore(log: nil))
        #expect(Self.send(&filter, "keepalive", "OFF", at: 2) == .apply(.keepAlive(on: false)))
    }

    @Test("a flood: ten at once, then five a second; one line when it starts and one when it ends, with the count dropped")
    func rate() {
        var filter = MQTTCommandFilter(prefix: Self.prefix)
        var verdicts: [MQTTCommandFilter.Verdict] = []
        for _ in 0..<100 { verdicts.append(Self.send(&filter, "power-on", "PRESS", at: 0)) }
        #expect(verdicts.prefix(10).allSatisfy { $0 == .apply(.powerOn) })
        guard case .ignore(let start?) = verdicts[10] else {
            Issue.record("no line when the flood began: \(verdicts[10])")
            return
        }
        #expect(start.contains("faster"), "\(start)")
        #expect(verdicts.dropFirst(11).allSatisfy { $0 == .ignore(log: nil) })
        // A second later: five tokens back; the first command carries the flood's count.
        guard case .ignore(let end?) = Self.send(&filter, "keepalive", "bad", at: 1) else {
            Issue.record("no line at the flood's end")
            return
        }
        #expect(end.contains("90 dropped") && end.contains("not a payload"), "\(end)")
        #expect(Self.send(&filter, "power-on", "PRESS", at: 1) == .apply(.powerOn))
        // Sustained: 5 a second get through, the rest is dropped.
        var applied = 0
        for step in 0..<100 { if case .apply = Self.send(&filter, "power-on", "PRESS", at: 10 + Double(step) * 0.05) { applied += 1 } }
        #expect(applied >= 25 && applied <= 36, "\(applied) of 100 in 5 s")
    }

    @Test("topics not logged beyond a bound: a flood of random topics cannot fill the journal or memory")
    func loggedTopicsBound() {
        var filter = MQTTCommandFilter(prefix: Self.prefix)
        var lines = 0
        for index in 0..<1000 {
            if case .ignore(let log?) = filter.received(topic: "\(Self.prefix)/command/x\(index)", payload: [], retained: false, at: Self.at(Double(index))) {
                lines += 1
                if lines == MQTTCommandFilter.loggedTopicsLimit { #expect(log.contains("further topics are not logged")) }
            }
        }
        #expect(lines == MQTTCommandFilter.loggedTopicsLimit)
    }

    @Test("ten thousand fuzzed messages (seeded): none applied, each journal line quoted printable ASCII")
    func fuzz() {
        var random = SplitMix(seed: 0x6b61_2d6d_7174_7401)
        var filter = MQTTCommandFilter(prefix: Self.prefix)
        let names = ["keepalive", "power-on", "standby", "test-tone", "keepalive/x", "", "+", "#", "KEEPALIVE"]
        let near = ["ON", "OFF", "PRESS"]
        for index in 0..<10_000 {
            let name = names[Int(random.next() % UInt64(names.count))]
            var payload: [UInt8]
            switch random.next() % 4 {
            case 0: payload = (0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            case 1:
                // A near miss: a real payload with one byte changed, added or dropped.
                payload = Array(near[Int(random.next() % 3)].utf8)
                let at = Int(random.next() % UInt64(payload.count))
                switch random.next() % 3 {
                case 0: payload[at] ^= UInt8(1 << (random.next() % 8))
                case 1: payload.insert(UInt8(truncatingIfNeeded: random.next()), at: at)
                default: payload.remove(at: at)
                }
            case 2: payload = Array(repeating: UInt8(ascii: "A"), count: Int(random.next() % 100_000))
            default: payload = Array("{\"state\":\"OFF\"}".utf8)
            }
            let verdict = filter.received(topic: "\(Self.prefix)/command/\(name)", payload: payload, retained: random.next() % 5 == 0,
                                          at: Self.at(Double(index)))
            switch verdict {
            case .apply(let command):
                Issue.record("message \(index) applied \(command): \(payload.prefix(16))")
            case .ignore(let log?):
                #expect(log.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 || $0 == "…" }, "\(log)")
                #expect(log.utf8.count < 600, "\(log.utf8.count) bytes")
            case .ignore(nil):
                break
            }
        }
    }

    @Test("the journal's quoting: printable ASCII kept, quotes and backslashes escaped, the rest as \\xNN, 64 bytes at most")
    func quoting() {
        #expect(MQTTCommandFilter.quoted("ON") == "\"ON\"")
        #expect(MQTTCommandFilter.quoted([0x41, 0x00, 0x22, 0x5c, 0xff, 0x0a]) == #""A\x00\"\\\xff\x0a""#)
        #expect(MQTTCommandFilter.quoted(Array(repeating: 0x41, count: 100)) == "\"" + String(repeating: "A", count: 64) + "\"…")
    }
}

