import Foundation
import Testing

extension Integration {
    /// Real sound servers killed under a running keepalived: a private PulseAudio, and a private
    /// PipeWire with WirePlumber, each SIGKILLed and restarted five times in a row.
    @Suite("keepalived through sound-server crashes")
    struct ServerRestartTests {
        static let rounds = 5

        @Test("PulseAudio SIGKILLed and restarted 5 times: back on the sink within 1 s each time, never exits",
              .enabled(if: PulseAudioServer.isInstalled))
        func pulseAudio() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1)
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("keepalived.sock")
            var environment = server.environment
            environment["KEEPALIVED_SOCKET"] = socket.path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", "pulse"],
                                          environment: environment, directory: server.directory, label: "keepalived")
            func onSink() -> Bool { server.sinkInputCount() == 1 && server.sinkStateNow() == "RUNNING" }
            try await daemon.waitForLog("playing")
            try await waitUntil("keepalived's stream on the sink", timeout: .seconds(5)) { onSink() }

            var delays: [Duration] = []
            for round in 1...Self.rounds {
                try await server.kill()
                #expect(server.sinkInputCount() == nil)
                // start() returns once pactl gets an answer: the server accepts clients.
                try await server.start(suspendTimeout: 1)
                let delay = try await waitUntil("the stream back on the sink after restart \(round)", timeout: .seconds(5)) { onSink() }
                delays.append(delay)
                #expect(delay < .seconds(1).underSanitizer, "round \(round): back \(delay) after the server accepted clients")
                #expect(daemon.isRunning, "keepalived exited:\n\(daemon.stderr)")
            }
            try await expectRecoveries(daemon, reason: "server-gone", socket: socket, environment: environment)
            print("PulseAudio restarts: stream back after \(delays.map { "\($0.wholeMilliseconds) ms" })")
        }

        @Test("PipeWire SIGKILLed and restarted 5 times: back on the sink within 1 s each time, never exits",
              .enabled(if: PipeWireServer.isInstalled))
        func pipeWire() async throws {
            let server = try PipeWireServer()
            try await server.start()
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("keepalived.sock")
            var environment = server.environment
            environment["KEEPALIVED_SOCKET"] = socket.path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", "pipewire"],
                                          environment: environment, directory: server.directory, label: "keepalived")
            try await daemon.waitForLog("playing")
            try await waitUntil("keepalived's stream into the sink", timeout: .seconds(5)) {
                server.streamPlaysIntoSink(application: "keepalived")
            }

            var delays: [Duration] = []
            for round in 1...Self.rounds {
                try await server.kill()
                // start() returns once PipeWire accepts clients, WirePlumber runs and the sink
                // exists again: the earliest a stream can be back on it.
                try await server.start()
                let delay = try await waitUntil("the stream back on the sink after restart \(round)", timeout: .seconds(5)) {
                    server.streamPlaysIntoSink(application: "keepalived")
                }
                delays.append(delay)
                #expect(delay < .seconds(1).underSanitizer, "round \(round): back \(delay) after the server was up")
                #expect(daemon.isRunning, "keepalived exited:\n\(daemon.stderr)")
            }
            try await expectRecoveries(daemon, reason: "server-gone", socket: socket, environment: environment)
            print("PipeWire restarts: stream back after \(delays.map { "\($0.wholeMilliseconds) ms" })")
        }

        @Test("PulseAudio not running at start: waits, then plays as soon as the server's socket appears, not at the next backoff step",
              .enabled(if: PulseAudioServer.isInstalled))
        func serverStartsLate() async throws {
            let server = try PulseAudioServer()
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("keepalived.sock")
            var environment = server.environment
            environment["KEEPALIVED_SOCKET"] = socket.path
            // A long cap, so the backoff alone would leave a gap of seconds by the time the
            // server starts: retries at about 0, 0.05, 0.15, 0.35, 0.75, 1.55, 3.15 s, then
            // about 3 s later.
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", "pulse", "--retry-max", "30"],
                                          environment: environment, directory: server.directory, label: "keepalived")
            try await daemon.waitForLog("waiting for device")
            try await Task.sleep(for: .seconds(3.3))  // the length of the scenario: let the backoff grow
            #expect(daemon.isRunning)
            try await server.start(suspendTimeout: 1)
            let delay = try await waitUntil("the stream on the sink", timeout: .seconds(5)) {
                server.sinkInputCount() == 1 && server.sinkStateNow() == "RUNNING"
            }
            // The next backoff step is at least 1.7 s away here; inotify on the socket makes it
            // immediate.
            #expect(delay < .milliseconds(700).underSanitizer, "on the sink \(delay) after the server accepted clients")
            let lines = recoveryLines(daemon.stderr)
            #expect(lines.count == 1, "log:\n\(daemon.stderr)")
            #expect(daemon.stderr.components(separatedBy: "waiting for device").count == 2, "logged per retry:\n\(daemon.stderr)")
            print("PulseAudio started late: stream on the sink \(delay.wholeMilliseconds) ms after it accepted clients")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }

        /// Exactly one recovery per crash, all for `reason`, counted 1…5 by the manager; the same
        /// count through `keepalived status --json` when this build has it; then a clean stop.
        func expectRecoveries(_ daemon: ChildProcess, reason: String, socket: URL, environment: [String: String]) async throws {
            try await waitUntil("\(Self.rounds) recoveries in the log", timeout: .seconds(3)) {
                recoveryLines(daemon.stderr).count >= Self.rounds
            }
            let lines = recoveryLines(daemon.stderr)
            #expect(lines.count == Self.rounds, "log:\n\(daemon.stderr)")
            #expect(lines.map(\.reason) == Array(repeating: reason, count: Self.rounds), "log:\n\(daemon.stderr)")
            #expect(lines.map(\.count) == Array(1...Self.rounds))
            if let counts = try await statusRecoveries(socket: socket, environment: environment) {
                #expect(counts == [reason: Self.rounds], "status --json says \(counts)")
            }
            #expect(daemon.isRunning)
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }
    }
}

extension Duration {
    var wholeMilliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}
