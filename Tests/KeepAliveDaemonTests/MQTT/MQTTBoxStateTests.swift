import _KeepalivedControlProtocol
import Foundation
import Testing

@testable import KeepAliveDaemon

/// The state's JSON and Home Assistant's configs, without a broker: what changes them and what
/// does not, and the entities with and without commands.
@Suite("MQTT state and discovery")
struct MQTTBoxStateTests {
    static func output(_ device: String, _ activity: String, program: String? = nil, framesPlayed: Int = 0) -> OutputReport {
        var report = OutputReport(device: device, state: "playing", reason: nil, mode: "stream", format: "S16_LE", rate: 48000, channels: 2,
                                  bufferFrames: 4096, periodFrames: 1024, volume: 0.01, ceiling: 0.05, framesPlayed: framesPlayed,
                                  recoveriesByReason: [:], lastError: nil)
        report.activity = ActivityReport(state: activity, sinceSeconds: Double(framesPlayed) / 48000, program: program)
        return report
    }

    static func status(uptime: Double, _ outputs: [OutputReport]) -> DaemonStatus {
        DaemonStatus(state: "playing", pid: 42, uptimeSeconds: uptime, socket: "/run/k.sock", outputs: outputs)
    }

    static func event(_ event: String, _ output: String, _ time: Double, program: String = "mpd") -> ActivityEvent {
        ActivityEvent(event: event, output: output, program: program, time: time)
    }

    @Test("the box is active since its first output still playing began, with the programs playing, sorted and once each")
    func boxActivity() {
        let events = ["hdmi": Self.event("active", "hdmi", 100), "dac": Self.event("active", "dac", 90, program: "squeezelite"),
                      "usb": Self.event("idle", "usb", 50)]
        let state = MQTTBoxState(status: Self.status(uptime: 10, [Self.output("hdmi", "active", program: "mpd"),
                                                                   Self.output("dac", "active", program: "squeezelite"),
                                                                   Self.output("usb", "idle")]),
                                 version: "0.2.0", events: events)
        #expect(state.activity == .init(state: "active", since: 90, programs: ["mpd", "squeezelite"]))
        #expect(state.outputs.map(\.activity?.since) == [100, 90, 50])
        let idle = MQTTBoxState(status: Self.status(uptime: 10, [Self.output("hdmi", "idle"), Self.output("dac", "idle")]),
                                version: "0.2.0", events: ["hdmi": Self.event("idle", "hdmi", 120), "dac": Self.event("idle", "dac", 130)])
        #expect(idle.activity == .init(state: "idle", since: 130, programs: []))
        // Idle since keepalived started: no time.
        #expect(MQTTBoxState(status: Self.status(uptime: 1, [Self.output("hdmi", "idle")]), version: "0.2.0", events: [:]).activity.since == nil)
    }

    @Test("what moves by itself (uptime, frames played, seconds since) never changes the payload: it is published on change only")
    func stable() {
        let events = ["hdmi": Self.event("active", "hdmi", 100)]
        let first = MQTTBoxState(status: Self.status(uptime: 10, [Self.output("hdmi", "active", program: "mpd", framesPlayed: 48000)]),
                                 version: "0.2.0", events: events)
        let later = MQTTBoxState(status: Self.status(uptime: 70, [Self.output("hdmi", "active", program: "mpd", framesPlayed: 48000 * 61)]),
                                 version: "0.2.0", events: events)
        #expect(ControlJSON.encode(first) == ControlJSON.encode(later))
        let off = MQTTBoxState(status: Self.status(uptime: 70, [Self.output("hdmi", "active", program: "mpd")]), version: "0.2.0",
                               events: events, switchedOff: true)
        #expect(ControlJSON.encode(off) != ControlJSON.encode(later) && off.keepAlive == "off" && later.keepAlive == "on")
    }

    static func settings(commands: Bool) throws -> MQTTSettings {
        var settings = try MQTTSettings(url: "mqtt://broker", host: "living")
        settings.commands = commands
        return settings
    }

    static func configs(_ discovery: HomeAssistantDiscovery) -> [String: [String: Any]] {
        var configs: [String: [String: Any]] = [:]
        for entity in discovery.entities {
            configs[entity.topic] = try? JSONSerialization.jsonObject(with: Data(entity.payload.utf8)) as? [String: Any]
        }
        return configs
    }

    @Test("three read-only entities; with commands a switch and three buttons too, else their configs withdrawn; one device, stable ids, each with availability")
    func discovery() throws {
        let plain = HomeAssistantDiscovery(settings: try Self.settings(commands: false), version: "0.2.0", host: "living", deviceID: "0123456789ab")
        let commanded = HomeAssistantDiscovery(settings: try Self.settings(commands: true), version: "0.2.0", host: "living", deviceID: "0123456789ab")
        let node = "homeassistant/%@/keepalived_0123456789ab/%@/config"
        let readOnly = [("binary_sensor", "playing"), ("sensor", "player"), ("sensor", "keepalive")].map { String(format: node, $0.0, $0.1) }
        let commands = [("switch", "keepalive_switch"), ("button", "power_on"), ("button", "standby"), ("button", "test_tone")].map { String(format: node, $0.0, $0.1) }
        #expect(Set(plain.entities.map(\.topic)) == Set(readOnly) && Set(plain.withdrawn) == Set(commands))
        #expect(Set(commanded.entities.map(\.topic)) == Set(readOnly + commands) && commanded.withdrawn.isEmpty)
        for (topic, config) in Self.configs(commanded) {
            #expect(config["availability_topic"] as? String == "keepalived/living/availability", "\(topic)")
            #expect((config["device"] as? [String: Any])?["identifiers"] as? [String] == ["keepalived_0123456789ab"], "\(topic)")
            #expect((config["unique_id"] as? String)?.hasPrefix("keepalived_0123456789ab_") == true, "\(topic)")
            if topic.contains("/button/") || topic.contains("/switch/") {
                #expect((config["command_topic"] as? String)?.hasPrefix("keepalived/living/command/") == true, "\(topic)")
            }
            if !topic.contains("/button/") { #expect(config["state_topic"] as? String == "keepalived/living/state", "\(topic)") }
        }
        // The same box, the same ids.
        let again = HomeAssistantDiscovery(settings: try Self.settings(commands: true), version: "0.3.0", host: "living", deviceID: "0123456789ab")
        #expect(again.entities.map(\.topic) == commanded.entities.map(\.topic))
    }

    @Test("the device id: 12 hex digits from the machine id hashed for keepalived, the same each time")
    func deviceID() {
        let id = HomeAssistantDiscovery.deviceID(host: "living")
        #expect(id == HomeAssistantDiscovery.deviceID(host: "living"))
        if access("/etc/machine-id", R_OK) == 0 {
            #expect(id.count == 12 && id.allSatisfy(\.isHexDigit), "\(id)")
            let machine = ((try? String(contentsOfFile: "/etc/machine-id", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!machine.hasPrefix(id), "the machine id itself is never published")
        }
    }
}
