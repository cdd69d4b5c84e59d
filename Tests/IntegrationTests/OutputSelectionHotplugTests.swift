import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("outputs picked up and dropped on the fly")
    struct OutputSelectionHotplugTests {
        @Test("--digital plays the digital hinted PCMs, picks up one added to the ALSA configuration and drops one removed, within 2 s")
        func hotplug() async throws {
            let device = try FaultyDevice()
            let library = try FaultyDevice.pluginLibrary().path
            let rc = device.home.appendingPathComponent(".asoundrc")
            func write(_ names: [(String, String)]) throws {
                var text = "pcm_type.faulty { lib \"\(library)\" }\n"
                for (name, description) in names {
                    text += "pcm.\(name) { type faulty state \"\(device.stateDirectory(name).path)\" hint { show on description \"\(description)\" } }\n"
                }
                try text.write(to: rc, atomically: true, encoding: .utf8)
            }
            try write([("tv", "Living room TV, HDMI"), ("speakers", "Desk speakers, analog")])
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--digital", "--buffer", "0.2"],
                                          environment: device.environment, directory: device.directory, label: "keepalived")
            func outputs() async throws -> [String: String] {
                let result = try await runCommand(TestPaths.keepalivedBinary.path, ["status", "--json"], environment: device.environment)
                let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                let list = object?["outputs"] as? [[String: Any]] ?? []
                return Dictionary(uniqueKeysWithValues: list.map { ($0["device"] as? String ?? "", $0["state"] as? String ?? "") })
            }
            /// The status settles a moment after the device sees the write or the close.
            func settledOutputs(_ expected: [String: String]) async throws -> [String: String] {
                let deadline = ContinuousClock.now + .seconds(1)
                var current = try await outputs()
                while current != expected, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                    current = try await outputs()
                }
                return current
            }
            try await waitUntil("the TV playing", timeout: .seconds(3)) { device.capturedBytes(device: "tv") > 0 }
            #expect(try await settledOutputs(["tv": "playing"]) == ["tv": "playing"])
            #expect(device.capturedBytes(device: "speakers") == 0)

            // A receiver is switched on: it appears in the configuration's hints.
            try write([("tv", "Living room TV, HDMI"), ("speakers", "Desk speakers, analog"), ("receiver", "AV receiver, S/PDIF")])
            let added = ContinuousClock.now
            try await waitUntil("the receiver picked up", timeout: .seconds(2)) { device.capturedBytes(device: "receiver") > 0 }
            // Requirement: outputs that appear or vanish are picked up or dropped within 2 s
            // (README, docs/usage.md, the man page); margin: the sanitizer's stretch.
            #expect(added.duration(to: .now) < .seconds(2).underSanitizer)
            #expect(try await settledOutputs(["tv": "playing", "receiver": "playing"]) == ["tv": "playing", "receiver": "playing"])

            // The TV goes away: it is dropped (closed), the receiver plays on.
            let tvEvents = device.eventCount("close", device: "tv")
            try write([("speakers", "Desk speakers, analog"), ("receiver", "AV receiver, S/PDIF")])
            let removed = ContinuousClock.now
            try await waitUntil("the TV dropped", timeout: .seconds(2)) { device.eventCount("close", device: "tv") > tvEvents }
            #expect(removed.duration(to: .now) < .seconds(2).underSanitizer)  // the same 2 s requirement
            #expect(try await settledOutputs(["receiver": "playing"]) == ["receiver": "playing"])
            let before = device.capturedBytes(device: "receiver")
            try await waitUntil("the receiver still playing", timeout: .seconds(2)) { device.capturedBytes(device: "receiver") > before }
            #expect(daemon.stderr.contains("outputs changed"))
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
        }
    }
}
