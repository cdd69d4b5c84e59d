import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("reloading the options")
    struct ReloadTests {
        let directory: URL
        let binary = TestPaths.keepalivedBinary.path

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("reload")
        }

        /// A 16-bit mono 44.1 kHz WAV of one sample at half scale, negative.
        static let halfScaleClip: String = {
            var wav = Data("RIFF".utf8) + le32(38) + Data("WAVEfmt ".utf8) + le32(16)
            wav += le16(1) + le16(1) + le32(44100) + le32(88200) + le16(2) + le16(16)
            wav += Data("data".utf8) + le32(2) + le16(UInt16(bitPattern: -16384))
            return wav.base64EncodedString()
        }()

        func writeOptions(_ options: String, to file: URL) throws {
            try "# test options\nKEEPALIVED_OPTIONS=\"\(options)\"\n".write(to: file, atomically: true, encoding: .utf8)
        }

        @Test("SIGHUP rereads --config: a new level takes over in place, outputs come and go, a bad file is refused")
        func reloadInPlace() async throws {
            let capture = directory.appendingPathComponent("capture.raw")
            let second = directory.appendingPathComponent("second.raw")
            let options = directory.appendingPathComponent("keepalived.conf")
            let socket = directory.appendingPathComponent("rt/control.sock").path
            let device = "file:'\(capture.path)',raw"
            try writeOptions("--clip-base64 \(Self.halfScaleClip) --volume 0.01 --buffer 0.2", to: options)
            let daemon = try ChildProcess(binary, ["run", "-d", device, "--config", options.path, "--socket", socket],
                                          directory: directory, label: "keepalived")
            try await daemon.waitForLog("playing")
            try await waitUntil("samples at the first level", timeout: .seconds(3)) { (try? samples(capture))?.contains(-164) == true }

            try writeOptions("--clip-base64 \(Self.halfScaleClip) --volume 0.02 --buffer 0.2 -d \"file:'\(second.path)',raw\"", to: options)
            daemon.signal(SIGHUP)
            try await daemon.waitForLog("reloaded")
            try await waitUntil("samples at the new level", timeout: .seconds(3)) { (try? samples(capture))?.last == -328 }
            try await waitUntil("the added output to play", timeout: .seconds(3)) { (try? samples(second))?.contains(-328) == true }
            let values = try samples(capture)
            #expect(Set(values) == [-164, -328], "\(Set(values))")
            // In place: the level changes once, from old to new, and the device was never reopened.
            let switchAt = try #require(values.firstIndex(of: -328))
            #expect(values[switchAt...].allSatisfy { $0 == -328 })
            #expect(daemon.stderr.components(separatedBy: "opened").count - 1 == 2, "\(daemon.stderr)")

            try writeOptions("--volume 0.9", to: options)
            let reply = try UnixClient(connectingTo: socket).request("reload")
            #expect(reply["ok"] as? Bool == false)
            #expect((reply["error"] as? String)?.contains("ceiling") == true, "\(reply)")
            #expect(daemon.isRunning)

            try writeOptions("--clip-base64 \(Self.halfScaleClip) --volume 0.02 --buffer 0.2", to: options)
            let removed = try UnixClient(connectingTo: socket).request("reload")
            #expect(removed["ok"] as? Bool == true)
            let status = try UnixClient(connectingTo: socket).request("status")
            let outputs = (status["status"] as? [String: Any])?["outputs"] as? [[String: Any]]
            #expect(outputs?.map { $0["device"] as? String } == [device])

            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
        }

        func samples(_ url: URL) throws -> [Int16] {
            try FileContents.data(url).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        }
    }
}
