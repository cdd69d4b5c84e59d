import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("--exclude")
    struct ExclusionTests {
        @Test("--all --exclude plays every output but the excluded ones; status and devices say which pattern left each out")
        func excludedOutputsStaySilent() async throws {
            let device = try FaultyDevice()
            let library = try FaultyDevice.pluginLibrary().path
            var text = "pcm_type.faulty { lib \"\(library)\" }\n"
            for (name, description) in [("tv", "Living room TV, HDMI"), ("speakers", "Desk speakers, analog"), ("headset", "Headset (bluez), Bluetooth")] {
                text += "pcm.\(name) { type faulty state \"\(device.stateDirectory(name).path)\" hint { show on description \"\(description)\" } }\n"
            }
            try text.write(to: device.home.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--exclude", "*bluez*", "--exclude", "Desk*", "--buffer", "0.2"],
                                          environment: device.environment, directory: device.directory, label: "keepalived")
            try await waitUntil("the TV playing", timeout: .seconds(3)) { device.capturedBytes(device: "tv") > 0 }

            let status = try await runCommand(TestPaths.keepalivedBinary.path, ["status", "--json"], environment: device.environment)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any], "\(status.stdout)")
            let outputs = (object["outputs"] as? [[String: Any]] ?? []).compactMap { $0["device"] as? String }
            #expect(outputs == ["tv"], "\(status.stdout)")
            #expect(object["exclude"] as? [String] == ["*bluez*", "Desk*"], "\(status.stdout)")
            // Once the TV has a second of audio, the others would have had theirs too.
            let tvBytes = device.capturedBytes(device: "tv")
            try await waitUntil("the TV playing on", timeout: .seconds(3)) { device.capturedBytes(device: "tv") > tvBytes }
            #expect(device.eventCount("open", device: "speakers") == 0 && device.capturedBytes(device: "speakers") == 0)
            #expect(device.eventCount("open", device: "headset") == 0 && device.capturedBytes(device: "headset") == 0)

            // `devices` shows the running daemon's exclusions without being told them.
            let listed = try await runCommand(TestPaths.keepalivedBinary.path, ["devices", "--json"], environment: device.environment)
            #expect(listed.status == 0, "\(listed.stderr)")
            let listing = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any], "\(listed.stdout)")
            let configured = (listing["configured"] as? [[String: Any]] ?? []).reduce(into: [String: [String: Any]]()) { $0[$1["name"] as? String ?? ""] = $1 }
            #expect(configured["headset"]?["excludedBy"] as? String == "*bluez*", "\(listed.stdout)")
            #expect(configured["speakers"]?["excludedBy"] as? String == "Desk*", "\(listed.stdout)")
            #expect((configured["speakers"]?["pickedBy"] as? [String])?.isEmpty == true, "\(listed.stdout)")
            #expect(configured["tv"]?["excludedBy"] == nil && configured["tv"]?["pickedBy"] as? [String] == ["--all", "--digital"], "\(listed.stdout)")
            let human = try await runCommand(TestPaths.keepalivedBinary.path, ["devices"], environment: device.environment)
            #expect(human.stdout.contains("headset   [excluded by --exclude '*bluez*']"), "\(human.stdout)")

            #expect(try await daemon.terminate(within: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("devices --exclude previews a pattern without a daemon")
        func preview() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("exclude")
            defer { TestPaths.removeTemporaryDirectory(directory) }
            try "pcm.usb-dac { type null hint { show on description \"USB DAC, USB Audio\" } }\n"
                .write(to: directory.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
            let environment = ["HOME": directory.path, "KEEPALIVED_SOCKET": directory.appendingPathComponent("none.sock").path]
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["devices", "--json", "--exclude", "USB*"], environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains(#""excludedBy":"USB*""#), "\(result.stdout)")
            #expect(result.stdout.contains(#""pickedBy":[]"#), "\(result.stdout)")
        }

        @Test("a bad --exclude is a usage error (64) naming it, before anything plays")
        func badPatterns() async throws {
            let binary = TestPaths.keepalivedBinary.path
            let empty = try await runCommand(binary, ["run", "--all", "--exclude", ""])
            #expect(empty.status == 64)
            #expect(empty.stderr.contains("The value '' is invalid for '--exclude <pattern>': an empty pattern would exclude nothing"), "\(empty.stderr)")
            let named = try await runCommand(binary, ["run", "-d", "null", "--exclude", "USB*"])
            #expect(named.status == 64)
            #expect(named.stderr.contains("--exclude applies to --all, --digital, --analog and --bluetooth"), "\(named.stderr)")
            let devices = try await runCommand(binary, ["devices", "--exclude", " "])
            #expect(devices.status == 64, "\(devices.stderr)")
        }
    }
}
