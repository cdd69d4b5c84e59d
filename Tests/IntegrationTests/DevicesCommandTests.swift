import Foundation
import Testing

extension Integration {
    @Suite("keepalived devices")
    struct DevicesCommandTests {
        @Test("lists the PCMs from ALSA's device-name hints, digital ones marked")
        func listsHintedDevices() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("devices")
            defer { try? FileManager.default.removeItem(at: directory) }
            // Two PCMs with hints, as cards' configurations declare them: one HDMI, one analog.
            let config = """
                pcm.test-hdmi { type null hint { show on description "Test Card, HDMI 0\\nHDMI Audio Output" } }
                pcm.test-speakers { type null hint { show on description "Test Card, Analog\\nFront speakers" } }

                """
            try config.write(to: directory.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["devices", "--json"], environment: ["HOME": directory.path])
            #expect(result.status == 0, "\(result.stderr)")
            let list = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]], "\(result.stdout)")
            let byName = Dictionary(uniqueKeysWithValues: list.compactMap { entry in (entry["name"] as? String).map { ($0, entry) } })
            let hdmi = try #require(byName["test-hdmi"], "\(byName.keys.sorted())")
            #expect(hdmi["digital"] as? Bool == true)
            #expect((hdmi["description"] as? String)?.contains("HDMI Audio Output") == true)
            let speakers = try #require(byName["test-speakers"])
            #expect(speakers["digital"] as? Bool == false)

            let human = try await runCommand(TestPaths.keepalivedBinary.path, ["devices"], environment: ["HOME": directory.path])
            #expect(human.stdout.contains("digital  test-hdmi"), "\(human.stdout)")
            #expect(human.stdout.contains("analog   test-speakers"), "\(human.stdout)")
        }
    }
}
