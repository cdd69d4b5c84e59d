import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("several outputs at once")
    struct MultipleOutputsTests {
        @Test("each output has its own loop and recovery: one vanishing leaves the other playing")
        func oneFailsTheOtherPlays() async throws {
            let device = try FaultyDevice()
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path,
                                          ["run", "-d", "faulty", "-d", "faulty-noresume", "--buffer", "0.2", "--retry-max", "0.2"],
                                          environment: device.environment, directory: device.directory, label: "keepalived")
            try await waitUntil("both outputs playing", timeout: .seconds(3)) {
                daemon.stderr.split(separator: "\n").filter { $0.contains("info: playing") }.count >= 2
            }
            try device.control("vanish", device: "faulty")
            try await daemon.waitForLog("unplugged", timeout: .seconds(3))
            // While one output is gone, the other keeps receiving audio at real time.
            let before = device.capturedBytes(device: "faulty-noresume")
            try await waitUntil("the other output to keep playing", timeout: .seconds(2)) {
                device.capturedBytes(device: "faulty-noresume") >= before + 44100 * 2 / 2
            }
            let status = try #require(try await statusJSON(device))
            let states = Dictionary(uniqueKeysWithValues: status.map { ($0["device"] as? String ?? "", $0["state"] as? String ?? "") })
            #expect(states["faulty-noresume"] == "playing", "\(states)")
            #expect(states["faulty"] == "waiting" || states["faulty"] == "recovering", "\(states)")

            try FileManager.default.removeItem(at: device.stateDirectory("faulty").appendingPathComponent("vanished"))
            try await daemon.waitForLog("recovered", timeout: .seconds(3))
            #expect(try device.capturedSamples(device: "faulty").allSatisfy { $0 == -1 })
            #expect(try device.capturedSamples(device: "faulty-noresume").allSatisfy { $0 == -1 })
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
        }

        func statusJSON(_ device: FaultyDevice) async throws -> [[String: Any]]? {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["status", "--json"], environment: device.environment)
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            return object?["outputs"] as? [[String: Any]]
        }
    }
}
