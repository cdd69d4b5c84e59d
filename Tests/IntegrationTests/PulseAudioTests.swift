import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("keepalived on a PulseAudio null sink", .enabled(if: PulseAudioServer.isInstalled))
    struct PulseAudioTests {
        @Test("keeps the sink RUNNING with a quiet, non-silent signal; SIGTERM lets it suspend")
        func keepsSinkAwake() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1)
            defer { server.stop() }
            try await waitUntil("the idle sink to suspend", timeout: .seconds(5)) { server.sinkStateNow() == "SUSPENDED" }

            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", "pulse"],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            try await waitUntil("the sink to run", timeout: .seconds(5)) { server.sinkStateNow() == "RUNNING" }
            try await daemon.waitForLog("playing")

            let samples = try await server.recordMonitor(seconds: 1)
            let peak = samples.map { abs(Int($0)) }.max() ?? 0
            #expect(peak > 0, "the monitor is digital silence")
            #expect(Double(peak) <= 0.05 * 32768, "peak \(peak) exceeds the ceiling")
            #expect(server.sinkStateNow() == "RUNNING")

            daemon.signal(SIGTERM)
            let stoppedIn = ContinuousClock.now
            // The stop requirement: `keepalived stop` waits at most 2 s before SIGKILL
            // (docs/usage.md), so SIGTERM must end the process inside it; stretched under a
            // sanitizer (it was 1 s, a quiet machine's figure).
            #expect(try await daemon.waitForExit(timeout: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
            #expect(stoppedIn.duration(to: .now) < .seconds(2).underSanitizer)
            try await waitUntil("the sink to suspend after stop", timeout: .seconds(5)) { server.sinkStateNow() == "SUSPENDED" }
        }
    }
}
