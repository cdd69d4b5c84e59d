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
        var oversizedList = WAVBuilder()
        oversizedList.chunksBeforeData = [("LIST", [1, 2])]
        var listBytes = oversizedList.bytes
        let listSize = 12 + 24 + 4  // after the RIFF header, the fmt chunk and the LIST tag
        listBytes.replaceSubrange(listSize..<(listSize + 4), with: WAVBuilder.le32(1000))
        cases.append(Bad(name: "a chunk before data larger than the input", bytes: listBytes, error: .sizeExceedsInput(chunk: "LIST", declared: 1000, available: 12)))
        cases.append(Bad(name: "a streaming header with less than one frame", bytes: WAVDecoderTests.streamingHeader(riffSize: 0xFFFF_FFFF, dataSize: 0xFFFF_FFFF, channels: 2) + [1, 2, 3], error: .emptyData))
        cases.append(Bad(name: "a streaming header cut inside 'fmt '", bytes: Array(WAVDecoderTests.streamingHeader(riffSize: 0, dataSize: 0, channels: 2).prefix(30)), error: .sizeExceedsInput(chunk: "fmt ", declared: 16, available: 10)))
        return cases
    }()

    /// The header of a 16-bit 48 kHz WAV file as ffmpeg's muxer writes it to a pipe (it cannot
    /// seek back to fill in the sizes): its `LIST` chunk, then `data` with the sizes given.
    static func streamingHeader(riffSize: UInt32, dataSize: UInt32, channels: UInt16) -> [UInt8] {
        var wav = WAVBuilder()
        wav.channels = channels
        wav.sampleRate = 48000
        let software = Array("INFOISFT".utf8) + WAVBuilder.le32(14) + Array("Lavf60.16.100\u{0}".utf8)
        return Array("RIFF".utf8) + WAVBuilder.le32(riffSize) + Array("WAVE".utf8) + WAVBuilder.chunk("fmt ", wav.formatBody)
            + WAVBuilder.chunk("LIST", software) + Array("data".utf8) + WAVBuilder.le32(dataSize)
    }

    /// `sox -n -b 16 -c 1 -r 8000 -t wav - synth 0.001 sine 440 | cat`: sox writes sizes of
    /// about 2 GiB when it cannot seek.
    static let soxToPipe16: [UInt8] = [
        0x52, 0x49, 0x46, 0x46, 0x24, 0xf0, 0xff, 0x7f, 0x57, 0x41, 0x56, 0x45, 0x66, 0x6d, 0x74, 0x20,
        0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x40, 0x1f, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00,
        0x02, 0x00, 0x10, 0x00, 0x64, 0x61, 0x74, 0x61, 0x00, 0xf0, 0xff, 0x7f, 0x4f, 0x03, 0x13, 0x1e,
        0xad, 0x39, 0xb4, 0x4d, 0x68, 0x58, 0xa4, 0x59, 0x13, 0x4e, 0xd2, 0x3d,
    ]

    /// `sox -n -c 2 -r 48000 -t wav - synth 0.0001 sine 440 | cat`: 32-bit PCM, extensible, with
    /// a `fact` chunk that also lies.
    static let soxToPipe32: [UInt8] = [
        0x52, 0x49, 0x46, 0x46, 0x48, 0xf0, 0xff, 0x7f, 0x57, 0x41, 0x56, 0x45, 0x66, 0x6d, 0x74, 0x20,
        0x28, 0x00, 0x00, 0x00, 0xfe, 0xff, 0x02, 0x00, 0x80, 0xbb, 0x00, 0x00, 0x00, 0xdc, 0x05, 0x00,
        0x08, 0x00, 0x20, 0x00, 0x16, 0x00, 0x20, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71, 0x66, 0x61, 0x63, 0x74,
        0x04, 0x00, 0x00, 0x00, 0x00, 0xfe, 0xff, 0x0f, 0x64, 0x61, 0x74, 0x61, 0x00, 0xf0, 0xff, 0x7f,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x42, 0x5e, 0x07, 0x0f, 0x42, 0x5e, 0x07,
        0xb3, 0x42, 0xb6, 0x0e, 0xb3, 0x42, 0xb6, 0x0e, 0xd3, 0xc5, 0x01, 0x16, 0xd3, 0xc5, 0x01, 0x16,
        0xef, 0x99, 0x3a, 0x1d, 0xef, 0x99, 0x3a, 0x1d,
    ]

    static let streamingFiles: [Good] = {
        // Three stereo frames of 16-bit samples, then half a frame: a pipe closed mid-write.
        let frames: [UInt8] = [0x00, 0xC0, 0x00, 0x40, 1, 0, 2, 0, 3, 0, 4, 0, 0x55, 0x55]
        var cases = [
            Good(name: "sox to a pipe, 16-bit mono: sizes of about 2 GiB", bytes: soxToPipe16, rate: 8000, channels: 1,
                 encoding: .integer(bits: 16), frames: 8, firstSample: 847.0 / 32768),
            Good(name: "sox to a pipe, 32-bit stereo extensible with a fact chunk", bytes: soxToPipe32, rate: 48000, channels: 2,
                 encoding: .integer(bits: 32), frames: 5, firstSample: 0),
            Good(name: "ffmpeg to a pipe: RIFF and data sizes 0xFFFFFFFF, a partial last frame", bytes: streamingHeader(riffSize: 0xFFFF_FFFF, dataSize: 0xFFFF_FFFF, channels: 2) + frames,
                 rate: 48000, channels: 2, encoding: .integer(bits: 16), frames: 3, firstSample: -0.5),
            Good(name: "RIFF and data sizes 0", bytes: streamingHeader(riffSize: 0, dataSize: 0, channels: 2) + frames,
                 rate: 48000, channels: 2, encoding: .integer(bits: 16), frames: 3, firstSample: -0.5),
            Good(name: "RIFF size 0xFFFFFFFF, data size exact", bytes: streamingHeader(riffSize: 0xFFFF_FFFF, dataSize: 12, channels: 2) + frames.prefix(12),
                 rate: 48000, channels: 2, encoding: .integer(bits: 16), frames: 3, firstSample: -0.5),
        ]
        // A whole file cut short inside its data (a download that stopped): what is there plays.
        var cut = WAVBuilder()
        cut.channels = 2
        cut.data = Array(frames.prefix(12))
        cases.append(Good(name: "a file cut inside its data chunk, mid-frame", bytes: Array(cut.bytes.dropLast(2)), rate: 44100, channels: 2,
                          encoding: .integer(bits: 16), frames: 2, firstSample: -0.5))
        return cases
    }()

    @Test("headers written to a pipe, whose sizes are 0, 0xFFFFFFFF or past the end, play what is there", arguments: streamingFiles)
    func decodesStreamingHeader(_ good: Good) throws {
        let clip = try Clip(wavBytes: good.bytes)
        #expect(clip.sampleRate == good.rate)
        #expect(clip.channels == good.channels)
        #expect(clip.encoding == good.encoding)
        #expect(clip.frameCount == good.frames)
        #expect(abs(clip.sample(frame: 0, channel: 0) - good.firstSample) < 1e-9)
    }

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
        #expect(throws: ClipError.unreadableFile(path: "/nonexistent/clip.wav", reason: "No such file or directory")) {
            try Clip(contentsOfFile: "/nonexistent/clip.wav")
        }
        #expect(throws: ClipError.unreadableFile(path: "/", reason: "not a regular file")) {
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
