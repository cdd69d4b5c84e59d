import Foundation
import Glibc
import KeepAlive
import Logging
import TestSupport
import Testing

extension Integration {
    /// An embedder keeps a sound server's sink awake through the library's own stream
    /// (`OutputSettings.serverSink`), in this process: the library's public API only, against a
    /// private PulseAudio. (This target is in the package, so `package` symbols would compile
    /// here too; `Examples/AnnouncerDaemon`, another package, sets `serverSink` as well.)
    @Suite("an embedder keeps a sink awake through its own stream")
    struct EmbeddedSinkTests {
        @Test("a KeepAliveManager with serverSink plays keepalived's own stream into the sink, which runs; stop() ends the stream",
              .enabled(if: PulseAudioServer.isInstalled))
        func managerPlaysIntoSink() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1)
            defer { server.stop() }
            try await waitUntil("the idle sink to suspend", timeout: .seconds(5)) { server.sinkStateNow() == "SUSPENDED" }

            // libpulse finds the server through the environment, read when the stream's context
            // is made: this process's, for the length of the test (the integration tests run one
            // at a time; the unit tests reach no sound server). The cookie is the server's own,
            // so that libpulse writes none into this user's home.
            let device = "pulse:DEVICE=\(server.sinkName)"
            var configuration = KeepAliveConfiguration(devices: [device])
            configuration.outputSettings[device] = OutputSettings(bufferDuration: .seconds(8), serverSink: server.sinkName)
            try configuration.validate()
            #expect(configuration.configuration(for: device).serverSink == server.sinkName)
            let manager = try KeepAliveManager(configuration: configuration, logger: Logger(label: "embedded-sink"))
            try await Self.withEnvironment([
                "PULSE_SERVER": server.environment["PULSE_SERVER"]!,
                "PULSE_COOKIE": server.directory.appendingPathComponent(".config/pulse/cookie").path,
            ]) {
                manager.start()
                defer { manager.stop() }
                try await waitUntil("the sink to run", timeout: .seconds(5)) {
                    server.sinkStateNow() == "RUNNING" && manager.outputs.first?.state == .playing
                }
                // The library's own stream, not ALSA's pulse plug-in ("ALSA plug-in [xctest]",
                // "ALSA Playback"), which the device name would have opened.
                let streams = server.streamNames()
                #expect(streams.count == 1 && streams.allSatisfy { $0.application == "keepalived" && $0.media == "keep-alive" }, "\(streams)")
                #expect(Array(server.streamSinks().values) == [server.sinkName])
                let output = try #require(manager.outputs.first)
                #expect(output.device == device)
                #expect(output.mode == .stream, "a stream into the server, never a ring loop")
                #expect(output.lastError == nil, "\(output)")
                // 8 s asked for, at the sink's rate.
                let format = try #require(output.format)
                #expect(abs(Double(format.bufferFrames) / Double(format.sampleRate) - 8) < 0.5, "\(format)")

                manager.stop()
                try await waitUntil("the stream to be gone", timeout: .seconds(2)) { server.sinkInputCount() == 0 }
                #expect(manager.outputs.first?.state == .stopped)
            }
        }

        /// Runs `body` with `variables` set in this process's environment, then restores it.
        static func withEnvironment(_ variables: [String: String], _ body: () async throws -> Void) async throws {
            let saved = variables.keys.map { ($0, getenv($0).map { String(cString: $0) }) }
            for (name, value) in variables { setenv(name, value, 1) }
            defer {
                for (name, value) in saved {
                    if let value { setenv(name, value, 1) } else { unsetenv(name) }
                }
            }
            try await body()
        }
    }
}
