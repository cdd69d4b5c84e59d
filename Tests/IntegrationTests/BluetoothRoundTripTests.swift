import Foundation
import TestSupport
import Testing

/// Whether BlueZ's SBC tools are installed (Debian's sbc-tools; scripts/setup --test installs them).
private var hasSBC: Bool { ["sbcenc", "sbcdec"].allSatisfy { FileManager.default.isExecutableFile(atPath: ChildProcess.which($0)) } }

extension Integration {
    /// keepalived's own output for a Bluetooth sink, recorded from a real PulseAudio sink's
    /// monitor and sent through the SBC codec at A2DP's usual settings (BlueZ's `sbcenc` and
    /// `sbcdec`, Debian's sbc-tools): what the speaker's idle detector would hear.
    @Suite("Bluetooth: the keep-alive signal survives SBC", .enabled(if: PulseAudioServer.isInstalled && hasSBC))
    struct BluetoothRoundTripTests {
        static let speaker = (name: "flip", properties: ["device.class": "sound", "device.api": "bluez5", "device.bus": "bluetooth"])

        /// Stereo S16 samples → Sun .au (big-endian linear PCM), SBC at bitpool 53, 8 subbands,
        /// 16 blocks, joint stereo, and back; the decoded samples, interleaved.
        static func roundTrip(_ samples: [Int16], in directory: URL) async throws -> [Int16] {
            var au = Data(".snd".utf8)
            for word: UInt32 in [24, UInt32(samples.count * 2), 3, 44100, 2] { withUnsafeBytes(of: word.bigEndian) { au.append(contentsOf: $0) } }
            for sample in samples { withUnsafeBytes(of: sample.bigEndian) { au.append(contentsOf: $0) } }
            let input = directory.appendingPathComponent("in.au"), sbc = directory.appendingPathComponent("out.sbc")
            let output = directory.appendingPathComponent("out.au")
            try au.write(to: input)
            let encoded = try await runCommand("/bin/sh", ["-c", "sbcenc -b 53 -s 8 -B 16 -j '\(input.path)' > '\(sbc.path)'"])
            #expect(encoded.status == 0, "\(encoded.stderr)")
            let decoded = try await runCommand(ChildProcess.which("sbcdec"), ["-f", output.path, sbc.path])
            #expect(decoded.status == 0, "\(decoded.stderr)")
            let bytes = try Data(contentsOf: output)
            let offset = Int(bytes[4]) << 24 | Int(bytes[5]) << 16 | Int(bytes[6]) << 8 | Int(bytes[7])
            return stride(from: offset, to: bytes.count - 1, by: 2).map { Int16(bitPattern: UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1])) }
        }

        static func rms(_ samples: ArraySlice<Int16>) -> Double {
            (samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(samples.count, 1))).squareRoot()
        }

        /// What keepalived plays to the speaker with `arguments` added to its output: 1 s of it,
        /// stereo, from the sink's monitor.
        static func recordKeepalived(_ arguments: String, server: PulseAudioServer) async throws -> [Int16] {
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--bluetooth", "--output", "pulse:DEVICE=flip \(arguments)",
                                                                            "--socket", server.directory.appendingPathComponent("k.sock").path],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            try await daemon.waitForLog("playing")
            try await waitUntil("the speaker's sink to run", timeout: .seconds(5)) { server.sinkStates()["flip"] == "RUNNING" }
            let samples = try await server.recordMonitor(seconds: 1.5, sink: "flip", channels: 2)
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
            return samples
        }

        @Test("the Bluetooth default (a 30 Hz sine at −50 dBFS) comes back from SBC within 3 dB; fluctuate's pulses come back as silence")
        func sbcRoundTrip() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: [Self.speaker])
            defer { server.stop() }
            // The default's signal and level, without its 28 s pauses (a burst is what is measured).
            let sine = try await Self.recordKeepalived("--play-for 600 --pause-for 1", server: server)
            let played = Self.rms(sine[(sine.count / 3)...])
            let back = try await Self.roundTrip(sine, in: server.directory)
            // SBC's filter bank delays the signal; the middle is compared.
            let heard = Self.rms(back[back.count / 3 ..< back.count * 2 / 3])
            let peak = back.map { abs(Int($0)) }.max() ?? 0
            print("sine:30 at -50 dBFS: played RMS \(played), after SBC \(heard), peak \(peak)")
            #expect(played > 50, "the default plays about 103 LSB peak, not \(played) RMS")
            #expect(peak > 0)
            #expect(abs(20 * log10(heard / played)) <= 3, "played RMS \(played), after SBC \(heard)")
            #expect(Double(sine.map { abs(Int($0)) }.max() ?? 0) <= 0.05 * 32768)

            // The control: the signal the default replaces does not survive. Without the
            // default's pauses too: its 2 s burst can be in the monitor before the recorder is.
            let pulses = try await Self.recordKeepalived("--signal fluctuate --play-for 600 --pause-for 1", server: server)
            #expect(pulses.contains { $0 != 0 }, "fluctuate plays ±1 LSB pulses into the sink")
            let pulsesBack = try await Self.roundTrip(pulses, in: server.directory)
            let pulsesPeak = pulsesBack.map { abs(Int($0)) }.max() ?? 0
            print("fluctuate after SBC: peak \(pulsesPeak)")
            #expect(pulsesPeak <= 1, "fluctuate came back at \(pulsesPeak) LSB")
        }

        @Test("a Bluetooth sink picked by --bluetooth plays the Bluetooth default, shown in status")
        func defaultInStatus() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: [Self.speaker])
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--bluetooth", "--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            try await waitUntil("the speaker's sink to run", timeout: .seconds(5)) { server.sinkStates()["flip"] == "RUNNING" }
            let output = SoundServerSinksTests.outputs(SoundServerSinksTests.status(socket, server.environment))["pulse:DEVICE=flip"]
            #expect(output?["signal"] as? String == "sine:30", "\(String(describing: output))")
            #expect(abs((output?["volume"] as? Double ?? 0) - 0.0031623) < 1e-4)
            #expect(output?["sinkKind"] as? String == "Bluetooth")
            // Rendered at the sink's own rate (its module's 44.1 kHz, not the 48 kHz of a card),
            // so the server neither resamples it nor moves its sink to 48 kHz for it.
            #expect(output?["rate"] as? Int == 44100, "\(String(describing: output))")
            #expect(server.sinkSampleRates()["flip"] == 44100)
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }
    }
}
