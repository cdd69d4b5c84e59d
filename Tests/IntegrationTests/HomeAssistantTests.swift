import Foundation
import TestSupport
import Testing

extension Integration {
    /// Home Assistant itself: PyPI's core (2026.2.3, on Debian 13's Python in a root of its own:
    /// Tests/HomeAssistant) with its MQTT integration on Debian's broker, where keepalived
    /// publishes. The entities come by discovery; their states through a play/idle cycle on a real
    /// PulseAudio and the commands' round trip are read from Home Assistant's own REST API.
    @Suite("Home Assistant itself: the box's entities by MQTT discovery", .serialized,
           .enabled(if: MosquittoBroker.isInstalled && PulseAudioServer.isInstalled && HomeAssistantHarness.isPrepared))
    struct HomeAssistantTests {
        let binary = TestPaths.keepalivedBinary.path

        @Test("discovered entities; a play/idle cycle; the switch off and on, the power button and the test tone, each from Home Assistant's API and seen there")
        func entitiesThroughACycle() async throws {
            let broker = try MosquittoBroker()
            try await broker.start()
            defer { broker.stop() }
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: [SoundServerSinksTests.tv])
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(binary, ["run", "--all", "--socket", socket, "--on-idle-after", "2s",
                                                   "--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--mqtt-prefix", "keepalived/test", "--mqtt-commands"],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            try await daemon.waitForLog("MQTT: connected to the broker", timeout: .seconds(10).underSanitizer)
            let config = server.directory.appendingPathComponent("home-assistant").path
            try HomeAssistantHarness.run(["start", "--broker", "127.0.0.1:\(broker.port)", "--config-dir", config])
            defer { _ = try? HomeAssistantHarness.run(["stop", "--config-dir", config], allowFailure: true) }
            let host = HomeAssistantEntities(host: ProcessInfo.processInfo.hostName)
            try HomeAssistantHarness.wait(config, host.playing, "off")
            try HomeAssistantHarness.wait(config, host.player, "none")
            try HomeAssistantHarness.wait(config, host.keepAlive, "playing")
            try HomeAssistantHarness.wait(config, host.keepAliveSwitch, "on")
            let discovered = try HomeAssistantHarness.states(config)
            #expect(Set(discovered.keys) == Set(host.all), "\(discovered)")

            let track = server.directory.appendingPathComponent("track.wav").path
            #expect(commandOutput("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", track, "synth", "3", "sine", "440", "vol", "0.1"]) != nil)
            let player = try ChildProcess("paplay", ["--device=tv", track], environment: server.environment, directory: server.directory)
            try HomeAssistantHarness.wait(config, host.playing, "on")
            try HomeAssistantHarness.wait(config, host.player, "paplay")
            let playing = try HomeAssistantHarness.states(config)
            #expect(try await player.waitForExit(timeout: .seconds(10)) == 0)
            try HomeAssistantHarness.wait(config, host.playing, "off")
            try HomeAssistantHarness.wait(config, host.player, "none")

            try HomeAssistantHarness.run(["--config-dir", config, "call", "switch", "turn_off", host.keepAliveSwitch])
            try HomeAssistantHarness.wait(config, host.keepAlive, "paused")
            try HomeAssistantHarness.wait(config, host.keepAliveSwitch, "off")
            let status = commandOutput(binary, ["status", "--socket", socket], environment: server.environment) ?? ""
            #expect(status.contains("state: paused (switched-off)"), "\(status)")
            try HomeAssistantHarness.run(["--config-dir", config, "call", "switch", "turn_on", host.keepAliveSwitch])
            try HomeAssistantHarness.wait(config, host.keepAlive, "playing")
            try HomeAssistantHarness.run(["--config-dir", config, "call", "button", "press", host.powerOn])
            try HomeAssistantHarness.wait(config, host.playing, "on")
            try HomeAssistantHarness.wait(config, host.player, "home-automation")
            let woken = try HomeAssistantHarness.states(config)
            // The test tone from Home Assistant's button: the daemon sounds it on the sink and
            // gives it the keep-alive back.
            try HomeAssistantHarness.run(["--config-dir", config, "call", "button", "press", host.testTone])
            try await daemon.waitForLog("test tone (440 Hz sine at 0.0316 (-30 dBFS) peak, 1 s), asked by home automation (MQTT)",
                                        timeout: .seconds(10).underSanitizer)
            try await daemon.waitForLog("test tone over: the keep-alive plays again", timeout: .seconds(10).underSanitizer)
            #expect(daemon.stderr.contains("outputs=pulse:DEVICE=tv"), "\(daemon.stderr)")
            let toned = try HomeAssistantHarness.states(config)
            #expect(toned[host.testTone] != "unknown" && toned[host.testTone] != nil, "\(toned)")

            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
            try HomeAssistantHarness.wait(config, host.playing, "unavailable")
            let log = (try? FileContents.text("\(config)/home-assistant.log")) ?? ""
            let complaints = log.split(separator: "\n").filter { ($0.contains(" WARNING ") || $0.contains(" ERROR ")) && $0.contains("mqtt") }
            #expect(complaints.isEmpty, "Home Assistant's MQTT warnings: \(complaints.prefix(5))")
            print("Home Assistant: discovered \(discovered.sorted { $0.key < $1.key }); playing \(playing.sorted { $0.key < $1.key }); "
                  + "after power on now \(woken.sorted { $0.key < $1.key }); after the test tone \(toned.sorted { $0.key < $1.key })")
        }
    }

    /// The harness's command line (Tests/HomeAssistant/homeassistant.py), run to its end.
enum HomeAssistantHarness {
        static let script = TestPaths.repositoryRoot.appendingPathComponent("Tests/HomeAssistant/homeassistant.py").path
        static var cache: String {
            ProcessInfo.processInfo.environment["HA_HARNESS_CACHE"]
                ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/keepalived-test/home-assistant").path
        }
        /// `homeassistant.py prepare` made the root and its venv (scripts/test does, beside the builds).
        static var isPrepared: Bool {
            getuid() == 0 && FileManager.default.fileExists(atPath: "\(cache)/debian-trixie-root/opt/homeassistant/.ha-harness-venv")
        }

        @discardableResult
        static func run(_ arguments: [String], allowFailure: Bool = false) throws -> String {
            try runTool("/usr/bin/python3", [script] + arguments, allowFailure: allowFailure)
        }

        static func states(_ config: String) throws -> [String: String] {
            let text = try run(["--config-dir", config, "states", "--match", "keepalived"])
            let list = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [[String: Any]] ?? []
            var states: [String: String] = [:]
            for entity in list { states[entity["entity_id"] as? String ?? ""] = entity["state"] as? String }
            return states
        }

        /// Until Home Assistant says `entity` is `value` (its own bounded poll).
        static func wait(_ config: String, _ entity: String, _ value: String, seconds: Int = 20) throws {
            try run(["--config-dir", config, "wait-state", entity, value, "--timeout", "\(seconds)"])
        }
    }

    /// The box's entity ids as its discovery names them (`default_entity_id`).
    struct HomeAssistantEntities {
        let playing: String, player: String, keepAlive: String, keepAliveSwitch: String, powerOn: String, standby: String, testTone: String
        var all: [String] { [playing, player, keepAlive, keepAliveSwitch, powerOn, standby, testTone] }

        init(host: String) {
            let first = host.split(separator: ".").first.map(String.init) ?? "box"
            let word = "keepalived_" + String(first.lowercased().map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
            playing = "binary_sensor.\(word)_playing"
            player = "sensor.\(word)_player"
            keepAlive = "sensor.\(word)_keepalive"
            keepAliveSwitch = "switch.\(word)_keepalive_switch"
            powerOn = "button.\(word)_power_on"
            standby = "button.\(word)_standby"
            testTone = "button.\(word)_test_tone"
        }
    }
}
