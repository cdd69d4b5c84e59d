import Foundation
import TestSupport
import Testing

extension Integration {
    /// Every signal through the real binary and real ALSA, captured by the faulty test device
    /// restricted to one sample format at a time (it consumes at real time and records exactly
    /// what it was given).
    @Suite("signals captured in every sample format")
    struct SignalCaptureTests {
        static let formats = ["S16_LE", "S24_LE", "S32_LE", "FLOAT_LE"]

        /// A HOME whose .asoundrc defines `only-FORMAT` devices, one per sample format.
        final class Devices: @unchecked Sendable {
            let directory: URL
            init() throws {
                directory = try TestPaths.makeTemporaryDirectory("signals")
                let home = directory.appendingPathComponent("home")
                try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
                var config = "pcm_type.faulty { lib \"\(try FaultyDevice.pluginLibrary().path)\" }\n"
                for format in SignalCaptureTests.formats {
                    config += "pcm.only-\(format) { type faulty state \"\(directory.appendingPathComponent("state-\(format)").path)\" format \"\(format)\" rate 48000 channels 2 }\n"
                }
                try config.write(to: home.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
            }
            deinit { TestPaths.removeTemporaryDirectory(directory) }

            /// Runs keepalived on `format`'s device until `seconds` of audio were captured; returns
            /// the left channel as fractions of full scale.
            func capture(_ format: String, _ arguments: [String], seconds: Double) async throws -> [Double] {
                let state = directory.appendingPathComponent("state-\(format)")
                try? FileManager.default.removeItem(at: state.appendingPathComponent("capture.raw"))
                let daemon = try ChildProcess(TestPaths.keepalivedBinary.path,
                                              ["run", "-d", "only-\(format)", "--buffer", "0.2", "--socket", directory.appendingPathComponent("rt/c.sock").path] + arguments,
                                              environment: ["HOME": directory.appendingPathComponent("home").path], directory: directory, label: "keepalived")
                let bytesPerFrame = 2 * (format == "S16_LE" ? 2 : 4)
                let wanted = Int(seconds * 48000) * bytesPerFrame
                let capture = state.appendingPathComponent("capture.raw")
                try await waitUntil("\(seconds) s captured in \(format)", timeout: .seconds(seconds * 3 + 3)) {
                    guard daemon.isRunning else { throw DeadlineExceeded(what: "keepalived running; it exited: \(daemon.stderr)", timeout: .zero) }
                    return ((try? FileManager.default.attributesOfItem(atPath: capture.path)[.size] as? Int) ?? 0) >= wanted
                }
                // What is checked here is the capture; how soon a stop ends the process is
                // DaemonLifecycleTests' (2 s, as elsewhere: once beside two guests and a build, 1 s ran out).
                #expect(try await daemon.terminate(within: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
                #expect(logFields(daemon.stderr, line: "opened")?["format"] == format)
                let data = try FileContents.data(capture)
                let frames = Int(seconds * 48000)
                return data.withUnsafeBytes { raw -> [Double] in
                    (0..<min(frames, raw.count / (format == "S16_LE" ? 4 : 8))).map { frame in
                        switch format {
                        case "S16_LE": return Double(raw.loadUnaligned(fromByteOffset: frame * 4, as: Int16.self)) / 32768
                        case "S24_LE": return Double(raw.loadUnaligned(fromByteOffset: frame * 8, as: Int32.self)) / 8_388_608
                        case "S32_LE": return Double(raw.loadUnaligned(fromByteOffset: frame * 8, as: Int32.self)) / 2_147_483_648
                        default: return Double(Float(bitPattern: raw.loadUnaligned(fromByteOffset: frame * 8, as: UInt32.self)))
                        }
                    }
                }
            }
        }

        static func lsb(_ format: String) -> Double {
            switch format {
            case "S16_LE": 1.0 / 32768
            case "S32_LE": 1.0 / 2_147_483_648
            default: 1.0 / 8_388_608
            }
        }

        @Test("fluctuate: exactly ±1 LSB, 50 times a second, zeros between", arguments: formats)
        func fluctuate(_ format: String) async throws {
            let devices = try Devices()
            let samples = try await devices.capture(format, ["--signal", "fluctuate"], seconds: 1)
            let lsb = Self.lsb(format)
            let pulses = samples.enumerated().filter { $0.element != 0 }
            #expect(pulses.allSatisfy { abs(abs($0.element) - lsb) < lsb * 1e-6 }, "\(pulses.prefix(4))")
            #expect((48...51).contains(pulses.count), "\(pulses.count) pulses in 1 s")
            let gaps = zip(pulses.dropFirst(), pulses).map { $0.0.offset - $0.1.offset }
            #expect(gaps.allSatisfy { $0 == 960 }, "\(Set(gaps))")
            let signs = pulses.map { $0.element > 0 }
            #expect(zip(signs.dropFirst(), signs).allSatisfy { $0.0 != $0.1 }, "pulses do not alternate")
        }

        @Test("sine: frequency within 1 %, peak within 1 LSB of the volume", arguments: formats)
        func sine(_ format: String) async throws {
            let devices = try Devices()
            let samples = try await devices.capture(format, ["--signal", "sine", "--frequency", "1000", "--volume", "0.02"], seconds: 1)
            let crossings = zip(samples.dropFirst(), samples).filter { $0.1 < 0 && $0.0 >= 0 }.count
            #expect(abs(Double(crossings) - 1000) <= 10, "\(crossings) upward crossings in 1 s")
            let peak = samples.map(abs).max() ?? 0
            #expect(abs(peak - 0.02) <= Self.lsb(format) * 1.01, "peak \(peak)")
        }

        @Test("noise: peak under the volume, never above the ceiling", arguments: ["white", "pink", "brown"])
        func noise(_ kind: String) async throws {
            let devices = try Devices()
            for format in Self.formats {
                let samples = try await devices.capture(format, ["--signal", kind, "--volume", "0.03", "--max-level", "0.04"], seconds: 0.5)
                let peak = samples.map(abs).max() ?? 0
                #expect(peak > 0.001, "\(kind) in \(format) is (nearly) silent: peak \(peak)")
                #expect(peak <= 0.03 + Self.lsb(format), "\(kind) in \(format): peak \(peak) above the volume")
            }
        }

        @Test("noise spectrum slope as captured: near 0, -3 and -6 dB per octave", arguments: [("white", 0.0), ("pink", -3.0), ("brown", -6.0)])
        func noiseSlope(_ kind: String, _ slope: Double) async throws {
            let devices = try Devices()
            let samples = try await devices.capture("FLOAT_LE", ["--signal", kind, "--volume", "0.03"], seconds: 2)
            // Mean power at one frequency per octave from 200 Hz to 6.4 kHz, by Goertzel over
            // Hann-windowed blocks of 2048 samples, then a least-squares line through dB per octave.
            let block = 2048
            let window = (0..<block).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(block)) }
            let octaves = (0..<6).map { 200.0 * pow(2, Double($0)) }
            var power = [Double](repeating: 0, count: octaves.count)
            var start = 0
            while start + block <= samples.count {
                for (index, frequency) in octaves.enumerated() {
                    let coefficient = 2 * cos(2 * Double.pi * frequency / 48000)
                    var (s1, s2) = (0.0, 0.0)
                    for n in 0..<block {
                        let input: Double = samples[start + n] * window[n]
                        let s0: Double = input + coefficient * s1 - s2
                        s2 = s1
                        s1 = s0
                    }
                    let magnitude: Double = s1 * s1 + s2 * s2 - coefficient * s1 * s2
                    power[index] += magnitude
                }
                start += block / 2
            }
            let decibels = power.map { 10 * log10($0) }
            let xs = (0..<octaves.count).map(Double.init)
            let meanX = xs.reduce(0, +) / Double(xs.count)
            let meanY = decibels.reduce(0, +) / Double(decibels.count)
            var covariance = 0.0
            var variance = 0.0
            for (x, y) in zip(xs, decibels) {
                covariance += (x - meanX) * (y - meanY)
                variance += (x - meanX) * (x - meanX)
            }
            let fitted = covariance / variance
            #expect(abs(fitted - slope) < 1.0, "\(kind): \(fitted) dB/octave, wanted \(slope); per octave \(decibels)")
        }

        @Test("periodic: bursts of --play-for and digital silence of --pause-for, exact to the frame")
        func periodic() async throws {
            let devices = try Devices()
            let samples = try await devices.capture("S16_LE", ["--signal", "sine", "--frequency", "100", "--volume", "0.02",
                                                              "--play-for", "0.3", "--pause-for", "0.2", "--fade", "0.05"], seconds: 1.6)
            // Runs of silence between bursts: 0.2 s of exact zeros; the bursts between them 0.3 s,
            // to the frame (the spec allows a period). A sine has isolated zero samples inside a burst,
            // hence only runs longer than 50 ms count as silence.
            var silences: [Range<Int>] = []
            var runStart: Int?
            for (index, value) in samples.enumerated() {
                if value == 0 {
                    if runStart == nil { runStart = index }
                } else if let start = runStart {
                    if index - start > 2400 { silences.append(start..<index) }
                    runStart = nil
                }
            }
            #expect(silences.count >= 2, "silences: \(silences)")
            for silence in silences.dropFirst() { #expect(abs(silence.count - 9600) <= 48, "silence of \(silence.count) frames, wanted 9600") }
            for (previous, next) in zip(silences, silences.dropFirst()) {
                let burst = next.lowerBound - previous.upperBound
                #expect(abs(burst - 14400) <= 48, "burst of \(burst) frames, wanted 14400")
            }
            #expect(samples.map(abs).max() ?? 0 <= 0.0201)
        }
    }
}
