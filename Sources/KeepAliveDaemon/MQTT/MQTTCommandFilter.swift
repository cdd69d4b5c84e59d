/// Home automation's commands as they arrive from the network (`--mqtt-commands`), without I/O:
/// strict parsing (the exact topics and payloads the box's Home Assistant entities send), a
/// bounded rate, and one journal line per topic for what is not a command, quoted and
/// sanitised. Nothing a broker client sends gets further than ``Verdict/apply(_:)``.
///
/// ```swift
/// var filter = MQTTCommandFilter(prefix: "keepalived/box")
/// filter.received(topic: "keepalived/box/command/keepalive", payload: Array("OFF".utf8), retained: false, at: now)
/// // .apply(.keepAlive(on: false))
/// ```
struct MQTTCommandFilter: Sendable {
    /// The sustained rate: a token a fifth of a second, at most ``burst`` saved.
    static let refill = Duration.milliseconds(200)
    static let burst = 10
    /// Topics already logged as not commands; beyond this many, the rest are counted only.
    static let loggedTopicsLimit = 64

    enum Verdict: Equatable, Sendable {
        case apply(RemoteCommand)
        /// Not applied; `log`: a journal line when this is news (once per topic, once per flood).
        case ignore(log: String?)
    }

    /// Where the commands come: `PREFIX/command/NAME`.
    let prefix: String
    private var tokens = Double(MQTTCommandFilter.burst)
    private var lastRefill: ContinuousClock.Instant?
    /// Commands dropped since the flood began; nil when none is under way.
    private var flood: Int?
    private var loggedTopics: Set<String> = []

    init(prefix: String) {
        self.prefix = prefix
    }

    /// The topics the box subscribes to.
    var subscription: String { "\(prefix)/command/+" }

    /// The command topics: the switch's and the buttons'.
    var keepAliveTopic: String { "\(prefix)/command/keepalive" }
    var powerOnTopic: String { "\(prefix)/command/power-on" }
    var standbyTopic: String { "\(prefix)/command/standby" }
    var testToneTopic: String { "\(prefix)/command/test-tone" }

    mutating func received(topic: String, payload: [UInt8], retained: Bool, at now: ContinuousClock.Instant) -> Verdict {
        guard admit(at: now) else {
            defer { flood = (flood ?? 0) + 1 }
            return .ignore(log: flood == nil ? "MQTT: commands arrive faster than \(Self.burst) at once or 5 a second: dropping them until they slow down" : nil)
        }
        var prelude: String?
        if let dropped = flood {
            flood = nil
            prelude = "MQTT: commands slowed down; \(dropped) dropped"
        }
        let verdict = parse(topic: topic, payload: payload, retained: retained)
        guard let prelude else { return verdict }
        switch verdict {
        case .apply: return verdict
        case .ignore(let log): return .ignore(log: log.map { "\(prelude); then \($0)" } ?? prelude)
        }
    }

    private func command(topic: String, payload: [UInt8]) -> RemoteCommand?? {
        switch topic {
        case keepAliveTopic:
            if payload == Array("ON".utf8) { return .keepAlive(on: true) }
            if payload == Array("OFF".utf8) { return .keepAlive(on: false) }
            return .some(nil)
        case powerOnTopic: return payload == Array("PRESS".utf8) ? .powerOn : .some(nil)
        case standbyTopic: return payload == Array("PRESS".utf8) ? .standby : .some(nil)
        case testToneTopic: return payload == Array("PRESS".utf8) ? .testTone : .some(nil)
        default: return nil
        }
    }

    private mutating func parse(topic: String, payload: [UInt8], retained: Bool) -> Verdict {
        guard let known = command(topic: topic, payload: payload) else {
            return .ignore(log: once(topic, "MQTT: ignored a message on \(Self.quoted(topic)): not a command topic (\(keepAliveTopic), \(powerOnTopic), \(standbyTopic), \(testToneTopic))"))
        }
        guard let command = known else {
            return .ignore(log: once(topic, "MQTT: ignored \(Self.quoted(payload)) on \(Self.quoted(topic)): not a payload it takes"))
        }
        // A stored command would act again at each reconnect: commands act when sent.
        guard !retained else {
            return .ignore(log: once("retained " + topic, "MQTT: ignored a retained command on \(Self.quoted(topic)): commands act when sent, never from the broker's store"))
        }
        return .apply(command)
    }

    private mutating func once(_ key: String, _ line: String) -> String? {
        guard !loggedTopics.contains(key) else { return nil }
        guard loggedTopics.count < Self.loggedTopicsLimit else { return nil }
        loggedTopics.insert(key)
        return loggedTopics.count == Self.loggedTopicsLimit ? "\(line) (the last such line: further topics are not logged)" : line
    }

    private mutating func admit(at now: ContinuousClock.Instant) -> Bool {
        if let lastRefill {
            let elapsed = lastRefill.duration(to: now)
            tokens = min(Double(Self.burst), tokens + elapsed / Self.refill)
        }
        lastRefill = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Text from the network as the journal shows it: printable ASCII kept, the rest as `\xNN`,
    /// at most 64 bytes, in quotes.
    static func quoted(_ bytes: [UInt8]) -> String {
        var text = ""
        for byte in bytes.prefix(64) {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): text += "\\" + String(UnicodeScalar(byte))
            case 0x20..<0x7f: text.append(Character(UnicodeScalar(byte)))
            default:
                let hex = Array("0123456789abcdef")
                text += "\\x\(hex[Int(byte >> 4)])\(hex[Int(byte & 15)])"
            }
        }
        return "\"\(text)\"" + (bytes.count > 64 ? "…" : "")
    }

    static func quoted(_ text: String) -> String { quoted(Array(text.utf8)) }
}
