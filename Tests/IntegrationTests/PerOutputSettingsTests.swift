import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("--output: settings of one output")
    struct PerOutputSettingsTests {
        let binary = TestPaths.keepalivedBinary.path

        func raw(_ url: URL) -> [Int16] {
            ((try? FileContents.data(url)) ?? Data()).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        }

        @Test("each output gets exactly its own signal and level, and status --json says which")
        func ownSignalAndLevel() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("outputs")
            let (a, b, c) = (directory.appendingPathComponent("a.raw"), directory.appendingPathComponent("b.raw"), directory.appendingPathComponent("c.raw"))
            let socket = directory.appendingPathComponent("rt/control.sock").path
            let daemon = try ChildProcess(binary, [
                "run", "--clip-base64", ReloadTests.halfScaleClip, "--volume", "0.01", "--buffer", "0.2", "--socket", socket,
                "-d", "file:'\(b.path)',raw",
                "--output", "\"file:'\(a.path)',raw\" --volume 0.02",
                "--output", "\"file:'\(c.path)',raw\" --signal fluctuate --volume -40dB",
            ], directory: directory, label: "keepalived")
            try await waitUntil("a second on each output", timeout: .seconds(5)) {
                guard daemon.isRunning else { throw DeadlineExceeded(what: "keepalived running: \(daemon.stderr)", timeout: .zero) }
                return [a, b, c].allSatisfy { raw($0).count >= 44100 }
            }
            // The clip's half-scale sample at each output's own gain; fluctuate's ±1 LSB pulses.
            #expect(Set(raw(a)) == [-328], "\(Set(raw(a)))")
            #expect(Set(raw(b)) == [-164], "\(Set(raw(b)))")
            #expect(Set(raw(c)) == [-1, 0, 1], "\(Set(raw(c)).sorted().prefix(8))")

            let status = try UnixClient(connectingTo: socket).request("status")
            let outputs = try #require((status["status"] as? [String: Any])?["outputs"] as? [[String: Any]], "\(status)")
            let byDevice = Dictionary(uniqueKeysWithValues: outputs.map { ($0["device"] as? String ?? "", $0) })
            let reportA = try #require(byDevice["file:'\(a.path)',raw"], "\(byDevice.keys)")
            let reportB = try #require(byDevice["file:'\(b.path)',raw"])
            let reportC = try #require(byDevice["file:'\(c.path)',raw"])
            #expect(reportA["signal"] as? String == "clip" && reportA["volume"] as? Double == 0.02 && reportA["ceiling"] as? Double == 0.05)
            #expect(reportB["signal"] as? String == "clip" && reportB["volume"] as? Double == 0.01)
            #expect(reportC["signal"] as? String == "fluctuate:50" && abs((reportC["volume"] as? Double ?? 0) - 0.01) < 1e-9, "\(reportC)")
            let text = try await runCommand(binary, ["status", "--socket", socket])
            #expect(text.stdout.contains("signal: fluctuate:50, level: 0.01 (-40.0 dBFS) (ceiling 0.05 (-26.0 dBFS))"), "\(text.stdout)")
            #expect(try await daemon.terminate(within: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("a reload that changes one output's settings in the options file changes that output only; the others are not touched")
        func reloadOneOutput() async throws {
            let device = try FaultyDevice()
            let options = device.directory.appendingPathComponent("keepalived.conf")
            func write(_ level: String) throws {
                try "KEEPALIVED_OPTIONS=\"--buffer 0.2 --clip-base64 \(ReloadTests.halfScaleClip) -d faulty-noresume --output 'faulty --volume \(level)'\"\n"
                    .write(to: options, atomically: true, encoding: .utf8)
            }
            try write("0.02")
            let daemon = try ChildProcess(binary, ["run", "--config", options.path], environment: device.environment, directory: device.directory, label: "keepalived")
            try await waitUntil("both outputs at their levels", timeout: .seconds(5)) {
                (try? device.capturedSamples(device: "faulty"))?.contains(-328) == true && (try? device.capturedSamples(device: "faulty-noresume"))?.contains(-164) == true
            }
            let opensBefore = device.eventCount("open", device: "faulty-noresume")
            let closesBefore = device.eventCount("close", device: "faulty-noresume")

            try write("0.03")
            daemon.signal(SIGHUP)
            try await daemon.waitForLog("reloaded")
            try await waitUntil("the new level on faulty", timeout: .seconds(3)) { (try? device.capturedSamples(device: "faulty"))?.last == -492 }
            let other = device.capturedBytes(device: "faulty-noresume")
            try await waitUntil("the other output playing on", timeout: .seconds(3)) { device.capturedBytes(device: "faulty-noresume") > other + 8820 }
            #expect(Set(try device.capturedSamples(device: "faulty-noresume")) == [-164])
            #expect(device.eventCount("open", device: "faulty-noresume") == opensBefore && device.eventCount("close", device: "faulty-noresume") == closesBefore)
            let reloaded = try #require(daemon.stderr.split(separator: "\n").first { $0.contains("reloaded") }, "\(daemon.stderr)")
            #expect(reloaded.contains("updated in place faulty") && !reloaded.contains("faulty-noresume"), "\(reloaded)")
            // In place for the changed one too: the level switched once, never reopened.
            let values = try device.capturedSamples(device: "faulty")
            #expect(Set(values) == [-328, -492], "\(Set(values))")
            #expect(device.eventCount("open", device: "faulty") == 1)

            // No output may go above the global ceiling: the reload is refused, both play on.
            try write("0.9")
            let refused = try UnixClient(connectingTo: device.socket.path).request("reload")
            #expect(refused["ok"] as? Bool == false)
            #expect((refused["error"] as? String)?.contains("output 'faulty': volume 0.9 is above its ceiling") == true, "\(refused)")
            #expect(daemon.isRunning)
            #expect(try await daemon.terminate(within: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("a bad --output is a usage error (64) that names it")
        func badOutputs() async throws {
            for (arguments, message) in [
                (["--output", "--volume 0.02"], "give the output's PCM name first"),
                (["--output", "null --bogus"], "--output 'null': Unknown option '--bogus'"),
                (["--output", "null --volume 0.9"], "output 'null': volume 0.9 is above its ceiling"),
                (["--output", "null --max-level 0.1"], "output 'null': its max level 0.1 is above the global max level 0.05"),
                (["--output", "null", "--output", "null --volume 0.02"], "--output 'null' is given twice"),
                (["--output", "null --signal hum"], "--output 'null': The value 'hum' is invalid for '--signal <kind>': unknown signal 'hum'"),
                (["--output", "null --clip /nonexistent.wav"], "--output 'null': clip:"),
                (["--output", "null --on-active ''"], "--output 'null': --on-active '': give a command"),
                (["--output", "null --on-idle-after 0s"], "--output 'null': --on-idle-after must be at least 1s"),
                (["--output", "null --on-idle"], "--output 'null': Missing value for '--on-idle <command>'"),
            ] {
                let result = try await runCommand(binary, ["run"] + arguments)
                let expectedCode: Int32 = arguments.contains("null --clip /nonexistent.wav") ? 66 : 64
                #expect(result.status == expectedCode, "\(arguments): \(result.status) \(result.stderr)")
                #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            }
        }
    }
}
