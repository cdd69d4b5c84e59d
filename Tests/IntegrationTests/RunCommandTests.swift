import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("keepalived run")
    struct RunCommandTests {
        let directory: URL

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("run")
        }

        func launch(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
            try ChildProcess(TestPaths.keepalivedBinary.path, arguments, environment: environment, directory: directory, label: "keepalived")
        }

        @Test("plays exactly -1 into ALSA's file device, paced to real time, at near-zero CPU")
        func fileDeviceCapture() async throws {
            let capture = directory.appendingPathComponent("capture.raw")
            let daemon = try launch(["run", "-d", "file:'\(capture.path)',raw"])
            try await daemon.waitForLog("playing")
            // The steady state's CPU, from the first write on: a debug build's argument parsing
            // (ArgumentParser's own checks run in debug only) is not what this measures.
            let cpuAtStart = try daemon.cpuSeconds()
            let steadyFrom = ContinuousClock.now
            try await Task.sleep(for: .seconds(2))  // the length of the scenario, not a wait for a state
            let cpu = try daemon.cpuSeconds() - cpuAtStart
            let steady = steadyFrom.duration(to: .now).secondsValue
            let runTime = daemon.launchedAt.duration(to: .now)
            daemon.signal(SIGTERM)
            let status = try await daemon.waitForExit(timeout: .seconds(1))
            #expect(status == 0, "exit status; log:\n\(daemon.stderr)")

            let opened = try #require(logFields(daemon.stderr, line: "opened"))
            #expect(opened["format"] == "S16_LE")
            #expect(opened["rate"] == "44100")
            #expect(opened["channels"] == "1")
            let bufferFrames = try #require(Int(opened["buffer"] ?? ""))

            let bytes = try FileContents.data(capture)
            #expect(bytes.count % 2 == 0)
            let samples = bytes.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
            #expect(!samples.isEmpty)
            #expect(samples.allSatisfy { $0 == -1 }, "found \(Set(samples).sorted().prefix(5))")
            let seconds = Double(samples.count) / 44100
            let run = runTime.secondsValue
            let buffer = Double(bufferFrames) / 44100
            // Paced to real time: never more than the run and one buffer ahead of it (an unpaced
            // writer fills the file at disk speed). At least its first buffer, which a stream fills
            // whole before it starts; how much more depends on how soon a busy machine started it,
            // so no share of the run is bounded (stress, issue 50: 4.0 s in a 6.3 s run under
            // ThreadSanitizer beside two busy loops, its start 2.3 s of that).
            #expect(seconds >= buffer, "captured \(seconds) s, less than its \(buffer) s buffer, in a \(run) s run")
            #expect(seconds <= run + buffer, "captured \(seconds) s in a \(run) s run with a \(bufferFrames)-frame buffer")
            #expect(cpu / steady < 0.05 * Sanitizer.timeScale, "used \(cpu) s of CPU in \(steady) s of playing")
        }

        @Test("a clip file is decoded and played in its own format when the device takes it")
        func clipFileInItsOwnFormat() async throws {
            // 24-bit stereo 96 kHz, WAVE_FORMAT_EXTENSIBLE, one frame of ±half scale.
            var wav = Data("RIFF".utf8) + le32(4 + 8 + 40 + 8 + 6) + Data("WAVE".utf8)
            wav += Data("fmt ".utf8) + le32(40) + le16(0xFFFE) + le16(2)
            wav += le32(96000) + le32(96000 * 6) + le16(6) + le16(24)
            wav += le16(22) + le16(24) + le32(3) + le16(1) + Data([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71])
            wav += Data("data".utf8) + le32(6) + Data([0x00, 0x00, 0xC0, 0x00, 0x00, 0x40])
            let clip = directory.appendingPathComponent("clip.wav")
            try wav.write(to: clip)
            let capture = directory.appendingPathComponent("capture24.raw")
            let daemon = try launch(["run", "-d", "file:'\(capture.path)',raw", "--clip", clip.path, "--volume", "0.05"])
            try await daemon.waitForLog("playing")
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
            let opened = try #require(logFields(daemon.stderr, line: "opened"))
            #expect(opened["format"] == "S24_LE")
            #expect(opened["rate"] == "96000")
            #expect(opened["channels"] == "2")
            let samples = try FileContents.data(capture).withUnsafeBytes { Array($0.bindMemory(to: Int32.self)) }
            #expect(samples.count >= 2)
            // -0.5 and +0.5 at gain 0.05: ∓0.025 of 2^23.
            #expect(samples[0] == -209_715)
            #expect(samples[1] == 209_715)
            #expect(samples.allSatisfy { abs(Double($0)) <= 0.05 * 8_388_608 })
        }

        @Test("levels in decibels are taken as separate words, minus sign and all (--volume -46dB)")
        func decibelsAsSeparateWords() async throws {
            let daemon = try launch(["run", "-d", "null", "--volume", "-46dB", "--max-level", "-30dB"])
            try await daemon.waitForLog("playing")
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
            let starting = try #require(daemon.stderr.split(separator: "\n").first { $0.contains("starting") }, "log:\n\(daemon.stderr)")
            #expect(starting.contains("volume=0.00501") && starting.contains("(-46.0 dBFS)"), "\(starting)")
            #expect(starting.contains("ceiling=0.0316") && starting.contains("(-30.0 dBFS)"), "\(starting)")
        }

        @Test("a clip ffmpeg wrote to a pipe (RIFF and data sizes 0xFFFFFFFF, a partial last frame) plays what is there")
        func streamedClip() async throws {
            // 16-bit stereo 48 kHz with ffmpeg's LIST chunk; two frames of ±half scale, then a
            // byte of a third.
            var wav = Data("RIFF".utf8) + le32(0xFFFF_FFFF) + Data("WAVE".utf8)
            wav += Data("fmt ".utf8) + le32(16) + le16(1) + le16(2)
            wav += le32(48000) + le32(48000 * 4) + le16(4) + le16(16)
            wav += Data("LIST".utf8) + le32(26) + Data("INFOISFT".utf8) + le32(14) + Data("Lavf60.16.100\u{0}".utf8)
            wav += Data("data".utf8) + le32(0xFFFF_FFFF) + Data([0x00, 0xC0, 0x00, 0x40, 0x00, 0x40, 0x00, 0xC0, 0x55])
            let clip = directory.appendingPathComponent("streamed.wav")
            try wav.write(to: clip)
            let capture = directory.appendingPathComponent("capture-streamed.raw")
            let daemon = try launch(["run", "-d", "file:'\(capture.path)',raw", "--clip", clip.path, "--volume", "0.05"])
            try await daemon.waitForLog("playing")
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
            let opened = try #require(logFields(daemon.stderr, line: "opened"))
            #expect(opened["rate"] == "48000")
            #expect(opened["channels"] == "2")
            let samples = try FileContents.data(capture).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
            #expect(samples.count >= 4)
            // -0.5, +0.5, +0.5, -0.5 at gain 0.05: ∓0.025 of 2^15, and the loop goes on.
            #expect(Array(samples.prefix(4)) == [-819, 819, 819, -819])
        }

        @Test("a volume above the ceiling is refused with exit 64, naming the ceiling")
        func volumeAboveCeiling() async throws {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["run", "-d", "null", "--volume", "0.5"])
            #expect(result.status == 64)
            #expect(result.stderr.contains("ceiling"), "\(result.stderr)")
            #expect(result.stderr.contains("0.05"))
        }

        @Test("a bad level is refused with exit 64", arguments: [["--volume", "loud"], ["--max-level", "2"], ["--retry-max", "0"]])
        func badOption(_ arguments: [String]) async throws {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["run", "-d", "null"] + arguments)
            #expect(result.status == 64, "\(result.stderr)")
            #expect(result.stderr.contains(arguments[0]), "\(result.stderr)")
        }

        @Test("a clip that is not base64 is refused with exit 65, naming the problem")
        func badBase64() async throws {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["run", "-d", "null", "--clip-base64", "not base64!"])
            #expect(result.status == 65)
            #expect(result.stderr.contains("not base64: invalid character '!'"), "\(result.stderr)")
        }

        @Test("a WAV that is not RIFF is refused with exit 65")
        func notRIFF() async throws {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["run", "-d", "null", "--clip-base64", "AAAAAAAAAAAAAAAA"])
            #expect(result.status == 65)
            #expect(result.stderr.contains("not a RIFF/WAVE file"), "\(result.stderr)")
        }

        @Test("a clip file that cannot be read is refused with exit 66")
        func unreadableClip() async throws {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["run", "-d", "null", "--clip", "/nonexistent/x.wav"])
            #expect(result.status == 66)
            #expect(result.stderr.contains("/nonexistent/x.wav"), "\(result.stderr)")
        }

        @Test("with no such device it waits, logs that once, and stops cleanly")
        func waitsForMissingDevice() async throws {
            let daemon = try launch(["run", "-d", "hw:CARD=NoSuchCard,DEV=0", "--retry-max", "0.1"])
            try await daemon.waitForLog("waiting for device")
            try await Task.sleep(for: .seconds(1))  // about ten retries at --retry-max 0.1
            #expect(daemon.isRunning)
            daemon.signal(SIGINT)
            #expect(try await daemon.waitForExit(timeout: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
            let waits = daemon.stderr.split(separator: "\n").filter { $0.contains("waiting for device") }
            #expect(waits.count == 1, "logged per retry:\n\(daemon.stderr)")
        }
    }
}

func le16(_ value: UInt16) -> Data { Data([UInt8(value & 0xFF), UInt8(value >> 8)]) }
func le32(_ value: UInt32) -> Data { Data((0..<4).map { UInt8((value >> (8 * $0)) & 0xFF) }) }

extension Duration {
    var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
