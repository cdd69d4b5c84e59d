import Foundation
import Testing

extension Integration {
    @Suite("keepalived devices")
    struct DevicesCommandTests {
        @Test("without cards: the configuration's own outputs with their picks; --verbose adds every PCM by role")
        func listsHintedDevices() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("devices")
            defer { TestPaths.removeTemporaryDirectory(directory) }
            // Two PCMs with hints, as cards' configurations declare them: one HDMI, one analog.
            let config = """
                pcm.test-hdmi { type null hint { show on description "Test Card, HDMI 0\\nHDMI Audio Output" } }
                pcm.test-speakers { type null hint { show on description "Test Card, Analog\\nFront speakers" } }

                """
            try config.write(to: directory.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["devices", "--json", "--verbose"], environment: ["HOME": directory.path])
            #expect(result.status == 0, "\(result.stderr)")
            let listing = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
            // This machine has no sound card: no card blocks, and the configuration's own outputs.
            #expect((listing["outputs"] as? [Any])?.isEmpty == true, "\(result.stdout)")
            let configured = try #require(listing["configured"] as? [[String: Any]], "\(result.stdout)")
            let byName = Dictionary(uniqueKeysWithValues: configured.compactMap { entry in (entry["name"] as? String).map { ($0, entry) } })
            let hdmi = try #require(byName["test-hdmi"], "\(byName.keys.sorted())")
            #expect(hdmi["digital"] as? Bool == true)
            #expect(hdmi["pickedBy"] as? [String] == ["--all", "--digital"])
            #expect((hdmi["description"] as? String)?.contains("HDMI Audio Output") == true)
            let speakers = try #require(byName["test-speakers"])
            #expect(speakers["digital"] as? Bool == false)
            #expect(speakers["pickedBy"] as? [String] == ["--all", "--analog"])
            // --verbose: every PCM with its role; plug-ins are never called analog or digital.
            let pcms = try #require(listing["pcms"] as? [[String: Any]], "\(result.stdout)")
            let roles = Dictionary(uniqueKeysWithValues: pcms.compactMap { entry in (entry["name"] as? String).map { ($0, entry["role"] as? String) } })
            #expect(roles["null"] == "plug-in")
            #expect(roles["test-hdmi"] == "configured")
            #expect(byName["null"] == nil, "a plug-in is not an output")

            let human = try await runCommand(TestPaths.keepalivedBinary.path, ["devices"], environment: ["HOME": directory.path])
            #expect(human.stdout.contains("no sound card found"), "\(human.stdout)")
            #expect(human.stdout.contains("digital  test-hdmi   [--all, --digital]"), "\(human.stdout)")
            #expect(human.stdout.contains("analog   test-speakers   [--all, --analog]"), "\(human.stdout)")
            #expect(!human.stdout.contains("Every PCM"), "plug-ins and aliases only with --verbose")
        }
    }
}
