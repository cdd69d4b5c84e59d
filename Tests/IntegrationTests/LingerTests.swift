import Foundation
import Testing

extension Integration {
    /// `--linger` against real servers: the private PulseAudio, and the private PipeWire through
    /// its PulseAudio protocol (pipewire-pulse). keepalived's own stream and the sink's state are
    /// read from the server with pactl, as any user would.
    @Suite("keepalived --linger on sound servers")
    struct LingerTests {
        static let linger = 3.0

        @Test("PulseAudio: awake while another client plays and for the linger time after, then the sink suspends; a new stream wakes it within 1 s",
              .enabled(if: PulseAudioServer.isInstalled))
        func pulseAudio() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1)
            defer { server.stop() }
            try await Self.scenario(device: "pulse", environment: server.environment, directory: server.directory,
                                    sink: server.sinkName, suspendsWithin: .seconds(4))
        }

        @Test("PipeWire (pipewire-pulse): the same, watched through PipeWire's PulseAudio protocol, keepalived on either plug-in",
              .enabled(if: PipeWireServer.isInstalled && PipeWireServer.hasPulseModule && PulseAudioServer.isInstalled),
              arguments: ["pulse", "pipewire"])
        func pipeWire(device: String) async throws {
            let server = try PipeWireServer()
            try await server.start()
            try await server.startPulseServer()
            defer { server.stop() }
            // WirePlumber suspends a node idle for 5 s.
            try await Self.scenario(device: device, environment: server.pulseEnvironment, directory: server.directory,
                                    sink: server.sinkName, suspendsWithin: .seconds(10))
        }

        @Test("a named hardware output alone is refused (64); a bad DURATION is refused (64)")
        func refusals() async throws {
            let hardware = try await runCommand(TestPaths.keepalivedBinary.path, ["run", "--device", "hw:0", "--linger", "3"])
            #expect(hardware.status == 64)
            #expect(hardware.stderr.contains("--linger needs a sound-server output (PulseAudio or PipeWire): hw:0 is a hardware output"),
                    "\(hardware.stderr)")
            #expect(hardware.stderr.contains("Keep awake only while it helps"))
            for bad in ["soon", "0", "-5", "2days"] {
                let result = try await runCommand(TestPaths.keepalivedBinary.path, ["run", "-d", "pulse", "--linger=\(bad)"])
                #expect(result.status == 64, "--linger \(bad)")
                #expect(result.stderr.contains("--linger"), "\(result.stderr)")
            }
        }

        @Test("with a hardware output beside a sound-server one: one warning, and the hardware output is kept awake")
        func mixedOutputs() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("linger-mixed")
            defer { try? FileManager.default.removeItem(at: directory) }
            // No server here: the pulse output waits, the warning comes at start all the same.
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path,
                                          ["run", "-d", "pulse", "-d", "hw:0", "--linger", "3", "--socket", directory.appendingPathComponent("k.sock").path],
                                          environment: ["PULSE_SERVER": "unix:\(directory.path)/none", "XDG_RUNTIME_DIR": directory.path],
                                          directory: directory, label: "keepalived")
            try await daemon.waitForLog("--linger is not supported here: hw:0 is a hardware output; it is kept awake all the time")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(2)) == 0, "\(daemon.stderr)")
            #expect(daemon.stderr.components(separatedBy: "is not supported here").count == 2, "one warning:\n\(daemon.stderr)")
        }

        // MARK: - The scenario

        static func scenario(device: String, environment: [String: String], directory: URL, sink: String, suspendsWithin suspend: Duration) async throws {
            let pulse = PulseClient(environment: environment, sink: sink)
            let clip = directory.appendingPathComponent("other.wav")
            try WAVFile.sine(seconds: 2, to: clip)
            let longClip = directory.appendingPathComponent("long.wav")
            try WAVFile.sine(seconds: 4, to: longClip)

            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path,
                                          ["run", "-d", device, "--linger", "\(linger)", "--socket", directory.appendingPathComponent("k.sock").path],
                                          environment: environment, directory: directory, label: "keepalived")
            defer { daemon.signal(SIGKILL) }
            try await daemon.waitForLog("playing")
            try await waitUntil("keepalived's stream on the server", timeout: .seconds(5)) { pulse.hasStream(of: daemon.pid) }

            // Another client plays 2 s: the sink runs, keepalived stays.
            let other = try ChildProcess("paplay", [clip.path], environment: environment, directory: directory, label: "paplay")
            try await waitUntil("the other client's stream", timeout: .seconds(5)) { pulse.hasStream(of: other.pid) }
            while other.isRunning {
                #expect(pulse.sinkState() == "RUNNING")
                #expect(pulse.hasStream(of: daemon.pid), "keepalived left while another client played:\n\(daemon.stderr)")
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(other.terminationStatus == 0, "paplay: \(other.stderr)")
            let ended = ContinuousClock.now

            // For the linger time after it stopped, keepalived keeps the sink running.
            let keptFor = Duration.milliseconds(Int64((linger - 0.5) * 1000))
            while ended.duration(to: .now) < keptFor {
                #expect(pulse.hasStream(of: daemon.pid), "keepalived left \(ended.duration(to: .now)) after the other client:\n\(daemon.stderr)")
                #expect(pulse.sinkState() == "RUNNING")
                try await Task.sleep(for: .milliseconds(200))
            }
            // Then it lets go, and the sink suspends.
            try await waitUntil("keepalived to let the sink sleep", timeout: .seconds(3)) { !pulse.hasStream(of: daemon.pid) }
            let pausedAfter = ended.duration(to: .now)
            #expect(pausedAfter >= keptFor && pausedAfter <= .seconds(linger + 1.5).underSanitizer, "paused \(pausedAfter) after the other client")
            try await daemon.waitForLog("letting it sleep (--linger)")
            try await waitUntil("the sink to suspend", timeout: suspend) { pulse.sinkState() == "SUSPENDED" }
            #expect(daemon.isRunning)

            // A new stream brings keepalived back within 1 s.
            let again = try ChildProcess("paplay", [longClip.path], environment: environment, directory: directory, label: "paplay")
            defer { again.signal(SIGKILL) }
            try await waitUntil("the new stream", timeout: .seconds(5), every: .milliseconds(10)) { pulse.hasStream(of: again.pid) }
            let back = try await waitUntil("keepalived back on the sink", timeout: .seconds(3), every: .milliseconds(10)) {
                pulse.hasStream(of: daemon.pid)
            }
            #expect(back < .seconds(1).underSanitizer, "keepalived came back \(back) after the new stream")
            try await daemon.waitForLog("another stream plays on sink \(sink): keeping it awake")

            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }
    }
}

/// `pactl` against one server: the sink's state and whose streams play.
struct PulseClient {
    let environment: [String: String]
    let sink: String

    /// RUNNING, IDLE or SUSPENDED.
    func sinkState() -> String? {
        guard let text = commandOutput("pactl", ["list", "short", "sinks"], environment: environment) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "\t")
            if fields.count >= 5, fields[1] == sink { return String(fields[4]) }
        }
        return nil
    }

    /// Whether a sink input of process `pid` exists: its own application.process.id (PulseAudio
    /// copies it onto streams) or its client's (PipeWire's native clients keep it there).
    func hasStream(of pid: pid_t) -> Bool {
        guard let inputs = commandOutput("pactl", ["list", "sink-inputs"], environment: environment) else { return false }
        if inputs.contains("application.process.id = \"\(pid)\"") { return true }
        guard let clients = commandOutput("pactl", ["list", "clients"], environment: environment) else { return false }
        let owned = clients.components(separatedBy: "Client #").dropFirst().compactMap { block -> String? in
            guard block.contains("application.process.id = \"\(pid)\"") else { return nil }
            return block.prefix { $0.isNumber }.description
        }
        return owned.contains { inputs.contains("Client: \($0)\n") }
    }
}

/// A 16-bit stereo 44.1 kHz sine WAV at a quiet level, for the "other client".
enum WAVFile {
    static func sine(seconds: Double, to url: URL) throws {
        let frames = Int(seconds * 44100)
        var data = Data()
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8))
        append(UInt32(36 + frames * 4))
        data.append(contentsOf: Array("WAVEfmt ".utf8))
        append(UInt32(16)); append(UInt16(1)); append(UInt16(2)); append(UInt32(44100)); append(UInt32(44100 * 4))
        append(UInt16(4)); append(UInt16(16))
        data.append(contentsOf: Array("data".utf8))
        append(UInt32(frames * 4))
        for frame in 0..<frames {
            let sample = Int16(300 * sin(2 * Double.pi * 440 * Double(frame) / 44100))
            append(sample); append(sample)
        }
        try data.write(to: url)
    }
}
