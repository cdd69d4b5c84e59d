/// Parses RIFF/WAVE bytes into a clip's format and sample bytes.
///
/// Every size read from a header is checked against the input before it is used, so a hostile
/// file can neither crash the decoder nor make it allocate more than the input's own size. Sizes
/// a streaming writer could not fill in (0, 0xFFFFFFFF, or past the end of the input) mean "to
/// the end", as sox and libsndfile read them; any other size that does not fit is refused.
enum WAVDecoder {
    struct Decoded {
        var sampleRate: Int
        var channels: Int
        var encoding: Clip.Encoding
        var bytes: [UInt8]
    }

    private struct Format {
        var tag: UInt16
        var channels: Int
        var sampleRate: Int
        var blockAlign: Int
        var bitsPerSample: Int
    }

    private static let formatPCM: UInt16 = 0x0001
    private static let formatFloat: UInt16 = 0x0003
    private static let formatExtensible: UInt16 = 0xFFFE
    /// The tail shared by the KSDATAFORMAT_SUBTYPE GUIDs for PCM and IEEE float.
    private static let subformatGUIDTail: [UInt8] = [
        0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71,
    ]

    static func decode(_ input: [UInt8]) throws(ClipError) -> Decoded {
        guard input.count >= 12, tag(input, 0) == "RIFF", tag(input, 8) == "WAVE" else {
            throw .notRIFFWAVE
        }
        // A writer that cannot seek back (sox or ffmpeg writing to a pipe) leaves the RIFF size
        // at 0, 0xFFFFFFFF or a guess of about 2 GiB; a file cut short has one larger than what
        // is left. Either way the chunks run to the end of the input, as sox and libsndfile read it.
        let riffSize = Int(u32(input, 4))
        let end = riffSize == 0 || riffSize > input.count - 8 ? input.count : 8 + riffSize
        var offset = 12
        var format: Format?
        var dataRange: Range<Int>?
        var dataSizeTrusted = true
        while offset < end {
            guard end - offset >= 8 else { throw .truncatedChunk(id: partialTag(input, offset, end)) }
            let id = tag(input, offset)
            let size = u32(input, offset + 4)
            let bodyStart = offset + 8
            let body: Range<Int>
            if id == "data", size == 0 || size == 0xFFFF_FFFF || Int(size) > end - bodyStart {
                // The same unwritten size on the audio: it is whatever bytes are there, and a
                // pipe closed mid-write may have left a partial frame at the end.
                body = bodyStart..<end
                if dataRange == nil { dataSizeTrusted = false }
            } else {
                guard Int(size) <= end - bodyStart else {
                    throw .sizeExceedsInput(chunk: id, declared: size, available: end - bodyStart)
                }
                body = bodyStart..<(bodyStart + Int(size))
            }
            switch id {
            case "fmt ":
                format = try parseFormat(input, body)
            case "data":
                guard format != nil else { throw .missingFormatChunk }
                if dataRange == nil { dataRange = body }
            default:
                break  // LIST, fact, cue, bext, …: metadata the loop has no use for.
            }
            // RIFF pads odd-sized chunks to an even length; a writer that left off the final pad
            // byte still produced a usable file.
            offset = body.upperBound + (body.count & 1)
        }
        guard let format else { throw .missingFormatChunk }
        guard var dataRange else { throw .missingDataChunk }
        let encoding: Clip.Encoding = format.tag == formatFloat
            ? .float(bits: format.bitsPerSample) : .integer(bits: format.bitsPerSample)
        let partialFrame = dataRange.count % format.blockAlign
        if dataSizeTrusted {
            // A declared size that splits a frame means the header lies about the layout.
            guard partialFrame == 0 else { throw .truncatedChunk(id: "data") }
        } else {
            dataRange = dataRange.dropLast(partialFrame)
        }
        guard !dataRange.isEmpty else { throw .emptyData }
        return Decoded(
            sampleRate: format.sampleRate, channels: format.channels, encoding: encoding,
            bytes: Array(input[dataRange]))
    }

    private static func parseFormat(_ input: [UInt8], _ body: Range<Int>) throws(ClipError) -> Format {
        guard body.count >= 16 else { throw .truncatedChunk(id: "fmt ") }
        let start = body.lowerBound
        var tag = u16(input, start)
        let channels = Int(u16(input, start + 2))
        let sampleRate = Int(u32(input, start + 4))
        let blockAlign = Int(u16(input, start + 12))
        let bits = Int(u16(input, start + 14))
        if tag == formatExtensible {
            guard body.count >= 40 else { throw .truncatedChunk(id: "fmt ") }
            let extensionSize = Int(u16(input, start + 16))
            guard extensionSize >= 22 else {
                throw .inconsistentFormat(reason: "WAVE_FORMAT_EXTENSIBLE extension is \(extensionSize) bytes, expected 22")
            }
            let guidStart = start + 24
            let subformat = u16(input, guidStart)
            let tail = Array(input[(guidStart + 2)..<(guidStart + 16)])
            guard tail == subformatGUIDTail else { throw .unsupportedEncoding(formatTag: 0) }
            tag = subformat
        }
        guard tag == formatPCM || tag == formatFloat else { throw .unsupportedEncoding(formatTag: tag) }
        guard channels > 0 else { throw .zeroChannels }
        guard sampleRate > 0 else { throw .zeroSampleRate }
        guard channels <= 8 else { throw .unsupportedChannelCount(channels) }
        guard (8000...384_000).contains(sampleRate) else { throw .unsupportedSampleRate(sampleRate) }
        if tag == formatFloat {
            guard bits == 32 || bits == 64 else { throw .unsupportedBitDepth(bits: bits, float: true) }
        } else {
            guard [8, 16, 24, 32].contains(bits) else { throw .unsupportedBitDepth(bits: bits, float: false) }
        }
        guard blockAlign == channels * bits / 8 else {
            throw .inconsistentFormat(reason: "block align \(blockAlign) for \(channels) channels of \(bits) bits")
        }
        return Format(tag: tag, channels: channels, sampleRate: sampleRate, blockAlign: blockAlign, bitsPerSample: bits)
    }

    private static func u16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
    }

    private static func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
    }

    private static func tag(_ bytes: [UInt8], _ at: Int) -> String {
        String(decoding: bytes[at..<(at + 4)].map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    private static func partialTag(_ bytes: [UInt8], _ at: Int, _ end: Int) -> String {
        String(decoding: bytes[at..<min(at + 4, end)].map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}
