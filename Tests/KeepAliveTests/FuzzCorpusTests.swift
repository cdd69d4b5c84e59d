import Foundation
import Testing

@testable import KeepAlive

/// The fuzzers' committed seeds (Tests/Fuzz/corpus), and any reproducer added there, replayed in
/// the ordinary suite with the fuzz targets' own checks, so a fixed crash stays fixed without
/// building the fuzzers.
@Suite("Fuzz seeds as regression inputs")
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus")

    static func inputs(_ target: String) throws -> [(name: String, bytes: [UInt8])] {
        let folder = corpus.appendingPathComponent(target)
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().map {
            ($0, try FileContents.bytes(folder.appendingPathComponent($0)))
        }
    }

    @Test("every WAV seed decodes, or fails with words; what decodes renders under the ceiling")
    func wavSeeds() throws {
        let seeds = try Self.inputs("FuzzWAV")
        #expect(seeds.count >= 70)
        var decoded = 0
        for (name, bytes) in seeds {
            do {
                let clip = try Clip(wavBytes: bytes)
                decoded += 1
                #expect(name.hasPrefix("ok-"), "\(name) decoded")
                let format = OutputFormat(sampleFormat: .s16, sampleRate: 48_000, channels: 2, bufferFrames: 96_000, periodFrames: 48_000)
                let loop = RenderedLoop(clip: clip, format: format, gain: .defaultVolume, ceiling: .defaultCeiling, minimumFrames: 4800)
                #expect(loop.peak(format: .s16) <= Level.defaultCeiling.linear, "\(name)")
            } catch {
                #expect(name.hasPrefix("bad-"), "\(name): \(error)")
                #expect(!error.description.isEmpty)
            }
        }
        #expect(decoded == seeds.filter { $0.name.hasPrefix("ok-") }.count)
    }

    @Test("every base64 seed decodes to a clip, or fails with words")
    func base64Seeds() throws {
        for (name, bytes) in try Self.inputs("FuzzBase64Clip") {
            let text = String(decoding: bytes, as: UTF8.self)
            do {
                _ = try Clip(base64: text)
                #expect(name.hasPrefix("ok-"), "\(name) decoded")
            } catch {
                #expect(name.hasPrefix("bad-"), "\(name): \(error)")
            }
        }
    }

    @Test("every level seed parses into (0, 1], or fails with words")
    func levelSeeds() throws {
        for (name, bytes) in try Self.inputs("FuzzLevel") {
            let text = String(decoding: bytes, as: UTF8.self)
            if let level = try? Level(parsing: text) {
                #expect(level.linear > 0 && level.linear <= 1, "\(name): '\(text)'")
            } else {
                #expect(throws: LevelError.self, "\(name)") { try Level(parsing: text) }
            }
        }
    }
}
