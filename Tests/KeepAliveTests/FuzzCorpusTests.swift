import Foundation
import TestSupport
import _KeepalivedControlProtocol
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
        let seeds = try Self.inputs("FuzzBase64Clip")
        #expect(seeds.count >= 50)
        for (name, bytes) in seeds {
            let text = String(decoding: bytes, as: UTF8.self)
            do {
                _ = try Clip(base64: text)
                #expect(name.hasPrefix("ok-"), "\(name) decoded")
            } catch {
                #expect(name.hasPrefix("bad-"), "\(name): \(error)")
                #expect(!error.description.isEmpty)
            }
        }
    }

    @Test("every level seed parses into (0, 1], or fails with words")
    func levelSeeds() throws {
        let seeds = try Self.inputs("FuzzLevel")
        #expect(seeds.count >= 20)
        for (name, bytes) in seeds {
            let text = String(decoding: bytes, as: UTF8.self)
            do {
                let level = try Level(parsing: text)
                #expect(level.linear > 0 && level.linear <= 1, "\(name): '\(text)'")
            } catch {
                #expect(!error.description.isEmpty, "\(name): '\(text)'")
            }
        }
    }

    @Test("every control-request seed, read in its chunk size: one outcome per line, refusals that read back")
    func controlRequestSeeds() throws {
        let seeds = try Self.inputs("FuzzControlRequest")
        #expect(seeds.count >= 10)
        var requests = 0
        for (name, bytes) in seeds {
            // As FuzzControlRequest reads them: the first byte is the read size minus one.
            guard let first = bytes.first else { continue }
            let readSize = Int(first) + 1
            let stream = bytes.dropFirst()
            for limit in [64 * 1024, 64] {
                var reader = ControlRequestReader(limit: limit)
                var offset = stream.startIndex
                var lines = 0
                var closed = false
                while offset < stream.endIndex, !closed {
                    let end = min(offset + readSize, stream.endIndex)
                    reader.append(contentsOf: stream[offset..<end])
                    offset = end
                    while !closed, let next = reader.next() {
                        lines += 1
                        switch next {
                        case .request:
                            requests += 1
                        case .invalid(let error):
                            try Self.expectRefusalReadsBack(error, name)
                        case .overLimit(let error):
                            try Self.expectRefusalReadsBack(error, name)
                            closed = true
                        }
                    }
                    #expect(closed || reader.bufferedByteCount <= limit, "\(name): kept \(reader.bufferedByteCount) bytes")
                }
                let newlines = stream[..<offset].count { $0 == UInt8(ascii: "\n") }
                #expect(closed || lines == newlines, "\(name) at limit \(limit): \(newlines) lines, \(lines) outcomes")
            }
        }
        #expect(requests > 0, "no seed holds a well-formed request")
    }

    /// A refusal goes back to the client as one line of JSON that reads back with the same words.
    static func expectRefusalReadsBack(_ error: ControlRequestError, _ name: String) throws {
        let encoded = ControlJSON.encode(ControlReply.failure("\(error)"))
        #expect(!encoded.contains("\n"), "\(name): \(encoded)")
        let decoded = try ControlJSON.decode(ControlReply.self, from: Array(encoded.utf8))
        #expect(decoded.ok == false && decoded.error == "\(error)", "\(name): \(encoded)")
    }
}
