import Testing
@testable import KeepAlive

@Suite("WAV decoding")
struct WAVDecoderTests {
    @Test("the seed's embedded clip: 44.1 kHz mono 16-bit, one sample of -4")
    func embeddedClip() throws {
        let clip = try Clip(base64: Clip.embeddedBase64)
        #expect(clip.sampleRate == 44100)
        #expect(clip.channels == 1)
        #expect(clip.encoding == .integer(bits: 16))
        #expect(clip.frameCount == 1)
        #expect(clip.sample(frame: 0, channel: 0) == -4.0 / 32768)
        #expect(Clip.embedded == clip)
    }

    struct Good: CustomTestStringConvertible, Sendable {
        let name: String
        let bytes: [UInt8]
        let rate: Int
        let channels: Int
        let encoding: Clip.Encoding
        let frames: Int
        let firstSample: Double
        var testDescription: String { name }
    }

    static let goodFiles: [Good] = {
        var cases: [Good] = []
        var wav = WAVBuilder()
        wav.bitsPerSample = 8
        wav.sampleRate = 8000
        wav.data = [0x80 - 2, 0x80, 0x80 + 3]
        cases.append(Good(name: "8-bit unsigned mono 8 kHz, odd data size padded", bytes: wav.bytes, rate: 8000, channels: 1, encoding: .integer(bits: 8), frames: 3, firstSample: -2.0 / 128))

        wav = WAVBuilder()
        wav.extensible = true
        wav.channels = 2
        wav.sampleRate = 96000
        wav.bitsPerSample = 24
        wav.chunksBeforeData = [("LIST", Array("INFOISFT\u{5}\u{0}\u{0}\u{0}test\u{0}".utf8))]
        wav.data = [0x00, 0x00, 0xC0, 0xFF, 0xFF, 0x7F, 0x01, 0x00, 0x00, 0x00, 0x00, 0x80]
        cases.append(Good(name: "24-bit stereo 96 kHz WAVE_FORMAT_EXTENSIBLE with a LIST chunk", bytes: wav.bytes, rate: 96000, channels: 2, encoding: .integer(bits: 24), frames: 2, firstSample: -0.5))

        wav = WAVBuilder()
        wav.bitsPerSample = 32
        wav.data = WAVBuilder.le32(UInt32(bitPattern: Int32.min / 4))
        cases.append(Good(name: "32-bit integer", bytes: wav.bytes, rate: 44100, channels: 1, encoding: .integer(bits: 32), frames: 1, firstSample: -0.25))

        wav = WAVBuilder()
        wav.formatTag = 3
        wav.bitsPerSample = 32
        wav.sampleRate = 48000
        wav.data = WAVBuilder.le32(Float(0.125).bitPattern)
        wav.chunksBeforeData = [("fact", WAVBuilder.le32(1))]
        cases.append(Good(name: "32-bit float with a fact chunk", bytes: wav.bytes, rate: 48000, channels: 1, encoding: .float(bits: 32), frames: 1, firstSample: 0.125))

        wav = WAVBuilder()
        wav.formatTag = 3
        wav.bitsPerSample = 64
        wav.data = (0..<8).map { UInt8((Double(-0.75).bitPattern >> (8 * UInt64($0))) & 0xFF) }
        cases.append(Good(name: "64-bit float", bytes: wav.bytes, rate: 44100, channels: 1, encoding: .float(bits: 64), frames: 1, firstSample: -0.75))

        wav = WAVBuilder()
        wav.extensible = true
        wav.extensibleSubformat = 3
        wav.bitsPerSample = 32
        wav.channels = 8
        wav.sampleRate = 384000
        wav.data = [UInt8](repeating: 0, count: 32)
        cases.append(Good(name: "float 8 channels 384 kHz, extensible", bytes: wav.bytes, rate: 384000, channels: 8, encoding: .float(bits: 32), frames: 1, firstSample: 0))

        wav = WAVBuilder()
        wav.chunksBeforeFormat = [("junk", [1, 2, 3])]
        wav.chunksAfterData = [("LIST", [0x41])]
        cases.append(Good(name: "odd-sized unknown chunks before fmt and after data", bytes: wav.bytes, rate: 44100, channels: 1, encoding: .integer(bits: 16), frames: 1, firstSample: -4.0 / 32768))

        var unpadded = WAVBuilder()
        unpadded.bitsPerSample = 8
        unpadded.data = [0x81]
        let missingPad = WAVBuilder.fixRIFFSize(Array(unpadded.bytes.dropLast()))
        cases.append(Good(name: "odd final chunk without its pad byte", bytes: missingPad, rate: 44100, channels: 1, encoding: .integer(bits: 8), frames: 1, firstSample: 1.0 / 128))
        return cases
    }()

    @Test("decodes every supported layout", arguments: goodFiles)
    func decodesGoodFile(_ good: Good) throws {
        let clip = try Clip(wavBytes: good.bytes)
        #expect(clip.sampleRate == good.rate)
        #expect(clip.channels == good.channels)
        #expect(clip.encoding == good.encoding)
        #expect(clip.frameCount == good.frames)
        #expect(abs(clip.sample(frame: 0, channel: 0) - good.firstSample) < 1e-9)
        #expect(try Clip(base64: base64(good.bytes)) == clip)
    }

    @Test("the 24-bit extensible file's samples are all decoded in order")
    func extensibleSamples() throws {
        let clip = try Clip(wavBytes: Self.goodFiles[1].bytes)
        #expect(clip.sample(frame: 0, channel: 1) == 8_388_607.0 / 8_388_608)
        #expect(clip.sample(frame: 1, channel: 0) == 1.0 / 8_388_608)
        #expect(clip.sample(frame: 1, channel: 1) == -1)
    }

    struct Bad: CustomTestStringConvertible, Sendable {
        let name: String
        let bytes: [UInt8]
        let error: ClipError
        var testDescription: String { name }
    }

    static let badFiles: [Bad] = {
        var cases: [Bad] = []
        func with(_ edit: (inout WAVBuilder) -> Void) -> [UInt8] {
            var wav = WAVBuilder()
            edit(&wav)
            return wav.bytes
        }
        cases.append(Bad(name: "empty input", bytes: [], error: .notRIFFWAVE))
        cases.append(Bad(name: "RIFX byte order", bytes: Array("RIFX".utf8) + Array(WAVBuilder().bytes.dropFirst(4)), error: .notRIFFWAVE))
        cases.append(Bad(name: "RIFF of form AVI", bytes: Array(WAVBuilder().bytes.prefix(8)) + Array("AVI ".utf8) + Array(WAVBuilder().bytes.dropFirst(12)), error: .notRIFFWAVE))
        cases.append(Bad(name: "no fmt chunk", bytes: with { $0.includeFormat = false }, error: .missingFormatChunk))
        cases.append(Bad(name: "data before fmt", bytes: WAVBuilder.fixRIFFSize(Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WAVE".utf8) + WAVBuilder.chunk("data", [0, 0]) + WAVBuilder.chunk("fmt ", WAVBuilder().formatBody)), error: .missingFormatChunk))
        cases.append(Bad(name: "no data chunk", bytes: with { $0.includeData = false; $0.chunksAfterData = [("LIST", [1, 2])] }, error: .missingDataChunk))
        cases.append(Bad(name: "Microsoft ADPCM", bytes: with { $0.formatTag = 2; $0.bitsPerSample = 4; $0.blockAlign = 1 }, error: .unsupportedEncoding(formatTag: 2)))
        cases.append(Bad(name: "µ-law", bytes: with { $0.formatTag = 7; $0.bitsPerSample = 8 }, error: .unsupportedEncoding(formatTag: 7)))
        cases.append(Bad(name: "extensible with an unknown subformat", bytes: with { $0.extensible = true; $0.extensibleSubformat = 0x11 }, error: .unsupportedEncoding(formatTag: 0x11)))
        cases.append(Bad(name: "extensible with a short extension", bytes: with { $0.extensible = true; $0.extensionSize = 0 }, error: .inconsistentFormat(reason: "WAVE_FORMAT_EXTENSIBLE extension is 0 bytes, expected 22")))
        cases.append(Bad(name: "zero channels", bytes: with { $0.channels = 0; $0.blockAlign = 2 }, error: .zeroChannels))
        cases.append(Bad(name: "zero sample rate", bytes: with { $0.sampleRate = 0 }, error: .zeroSampleRate))
        cases.append(Bad(name: "nine channels", bytes: with { $0.channels = 9; $0.data = [UInt8](repeating: 0, count: 18) }, error: .unsupportedChannelCount(9)))
        cases.append(Bad(name: "4 kHz", bytes: with { $0.sampleRate = 4000 }, error: .unsupportedSampleRate(4000)))
        cases.append(Bad(name: "12-bit PCM", bytes: with { $0.bitsPerSample = 12; $0.blockAlign = 2 }, error: .unsupportedBitDepth(bits: 12, float: false)))
        cases.append(Bad(name: "16-bit float", bytes: with { $0.formatTag = 3; $0.bitsPerSample = 16 }, error: .unsupportedBitDepth(bits: 16, float: true)))
        cases.append(Bad(name: "block align disagreeing", bytes: with { $0.blockAlign = 4 }, error: .inconsistentFormat(reason: "block align 4 for 1 channels of 16 bits")))
        cases.append(Bad(name: "empty data", bytes: with { $0.data = [] }, error: .emptyData))
        cases.append(Bad(name: "fmt chunk shorter than 16 bytes", bytes: with { $0.formatChunkOverride = Array(WAVBuilder().formatBody.prefix(14)) }, error: .truncatedChunk(id: "fmt ")))
        cases.append(Bad(name: "extensible fmt chunk cut at 18 bytes", bytes: with { var b = $0; b.extensible = true; $0.formatChunkOverride = Array(b.formatBody.prefix(18)) }, error: .truncatedChunk(id: "fmt ")))
        cases.append(Bad(name: "a chunk header cut off", bytes: WAVBuilder.fixRIFFSize(WAVBuilder().bytes + Array("LIS".utf8)), error: .truncatedChunk(id: "LIS")))
        cases.append(Bad(name: "data holding half a frame", bytes: with { $0.channels = 2; $0.data = [1, 2, 3, 4, 5, 6] }, error: .truncatedChunk(id: "data")))
        var oversized = WAVBuilder().bytes
        oversized.replaceSubrange((oversized.count - 6)..<(oversized.count - 2), with: WAVBuilder.le32(1000))
        cases.append(Bad(name: "data size larger than the input", bytes: oversized, error: .sizeExceedsInput(chunk: "data", declared: 1000, available: 2)))
        var hugeRIFF = WAVBuilder().bytes
        hugeRIFF.replaceSubrange(4..<8, with: WAVBuilder.le32(0xFFFF_FFF0))
        cases.append(Bad(name: "RIFF size larger than the input", bytes: hugeRIFF, error: .sizeExceedsInput(chunk: "RIFF", declared: 0xFFFF_FFF0, available: hugeRIFF.count - 8)))
        var hugeData = WAVBuilder().bytes
        hugeData.replaceSubrange((hugeData.count - 6)..<(hugeData.count - 2), with: WAVBuilder.le32(0xFFFF_FFFF))
        cases.append(Bad(name: "data size of 4 GiB, never allocated", bytes: hugeData, error: .sizeExceedsInput(chunk: "data", declared: 0xFFFF_FFFF, available: 2)))
        return cases
    }()

    @Test("refuses each bad file with its exact error", arguments: badFiles)
    func refusesBadFile(_ bad: Bad) {
        #expect(throws: bad.error) { try Clip(wavBytes: bad.bytes) }
    }

    @Test("bad base64 names the problem", arguments: [
        ("not base64!", ClipError.notBase64(reason: "invalid character '!' at offset 10")),
        ("UklGRg", .notBase64(reason: "length is not a multiple of 4 (missing padding)")),
        ("U=kl", .notBase64(reason: "padding '=' too early at offset 1")),
        ("UklGRg==UklG", .notBase64(reason: "data after padding at offset 8")),
        ("", .notBase64(reason: "no data")),
        ("UklG\u{00E9}", .notBase64(reason: "invalid character byte 0xc3 at offset 4")),
    ])
    func refusesBadBase64(_ text: String, _ error: ClipError) {
        #expect(throws: error) { try Clip(base64: text) }
    }

    @Test("base64 split over lines decodes")
    func wrappedBase64() throws {
        let text = "UklGRiYAAABXQVZFZm10IBAA\n  AAABAAEARKwAAIhYAQACABAA\r\nZGF0YQIAAAD8/w==\n"
        #expect(try Clip(base64: text) == Clip.embedded)
    }

    @Test("a clip file that cannot be read names the path and the reason")
    func unreadableFile() {
        #expect(throws: ClipError.unreadableFile(path: "/nonexistent/clip.wav", reason: "No such file or directory", errno: 2)) {
            try Clip(contentsOfFile: "/nonexistent/clip.wav")
        }
        #expect(throws: ClipError.unreadableFile(path: "/", reason: "not a regular file", errno: 22)) {
            try Clip(contentsOfFile: "/")
        }
    }

    @Test("every error describes itself")
    func descriptions() {
        #expect(ClipError.unsupportedEncoding(formatTag: 7).description.contains("µ-law"))
        #expect(ClipError.sizeExceedsInput(chunk: "data", declared: 9, available: 2).description == "size field of 'data' (9 bytes) is larger than the input (2 bytes left)")
    }

    private func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
            let value = (UInt32(chunk[0]) << 16) | (UInt32(chunk.count > 1 ? chunk[1] : 0) << 8) | UInt32(chunk.count > 2 ? chunk[2] : 0)
            out.append(alphabet[Int(value >> 18) & 63])
            out.append(alphabet[Int(value >> 12) & 63])
            out.append(chunk.count > 1 ? alphabet[Int(value >> 6) & 63] : UInt8(ascii: "="))
            out.append(chunk.count > 2 ? alphabet[Int(value) & 63] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
