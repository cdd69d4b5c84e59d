/// Why a clip could not be read or decoded.
///
/// Every case names the problem in its ``description`` so a command-line tool can print it as is:
///
/// ```swift
/// do {
///     _ = try Clip(base64: "not base64!")
/// } catch {
///     print(error)  // not base64: invalid character ' ' at offset 3
/// }
/// ```
public enum ClipError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is not valid base64.
    case notBase64(reason: String)
    /// The bytes do not start with a `RIFF` header of form `WAVE`.
    case notRIFFWAVE
    /// No `fmt ` chunk precedes the audio data.
    case missingFormatChunk
    /// The file has no `data` chunk.
    case missingDataChunk
    /// The encoding is not linear PCM or IEEE float (ADPCM, µ-law, A-law, MP3, …).
    case unsupportedEncoding(formatTag: UInt16)
    /// The encoding is known but the bit depth is not one of 8/16/24/32 (PCM) or 32/64 (float).
    case unsupportedBitDepth(bits: Int, float: Bool)
    /// The header declares zero channels.
    case zeroChannels
    /// The header declares a sample rate of zero.
    case zeroSampleRate
    /// More channels than the engine plays (1 to 8).
    case unsupportedChannelCount(Int)
    /// A rate outside 8 kHz to 384 kHz.
    case unsupportedSampleRate(Int)
    /// The header's block alignment disagrees with its channels and bit depth.
    case inconsistentFormat(reason: String)
    /// The `data` chunk holds no complete frame.
    case emptyData
    /// A chunk ends before its own header or required fields do.
    case truncatedChunk(id: String)
    /// A chunk other than `data` declares more bytes than the input holds. (A `data` or RIFF
    /// size that runs past the end is read as "to the end", as a streaming writer means it.)
    case sizeExceedsInput(chunk: String, declared: UInt32, available: Int)
    /// The clip file could not be read (the `errno` text and number).
    case unreadableFile(path: String, reason: String, errno: Int32)
    /// The clip file is larger than a keep-alive clip may be.
    case fileTooLarge(path: String, bytes: Int, limit: Int)

    /// What is wrong, in words a command-line tool can print as is.
    public var description: String {
        switch self {
        case .notBase64(let reason): "not base64: \(reason)"
        case .notRIFFWAVE: "not a RIFF/WAVE file"
        case .missingFormatChunk: "no 'fmt ' chunk before the audio data"
        case .missingDataChunk: "no 'data' chunk"
        case .unsupportedEncoding(let tag): "unsupported encoding: \(Self.encodingName(tag)) (format tag 0x\(String(tag, radix: 16, uppercase: true))); only integer PCM and IEEE float are played"
        case .unsupportedBitDepth(let bits, let float):
            float ? "unsupported bit depth: \(bits)-bit float (32 or 64 are supported)" : "unsupported bit depth: \(bits)-bit PCM (8, 16, 24 or 32 are supported)"
        case .zeroChannels: "the format declares zero channels"
        case .zeroSampleRate: "the format declares a sample rate of zero"
        case .unsupportedChannelCount(let n): "unsupported channel count: \(n) (1 to 8 are supported)"
        case .unsupportedSampleRate(let r): "unsupported sample rate: \(r) Hz (8000 to 384000 are supported)"
        case .inconsistentFormat(let reason): "inconsistent format: \(reason)"
        case .emptyData: "the 'data' chunk is empty"
        case .truncatedChunk(let id): "truncated chunk '\(id)'"
        case .sizeExceedsInput(let chunk, let declared, let available):
            "size field of '\(chunk)' (\(declared) bytes) is larger than the input (\(available) bytes left)"
        case .unreadableFile(let path, let reason, _): "cannot read clip file '\(path)': \(reason)"
        case .fileTooLarge(let path, let bytes, let limit): "clip file '\(path)' is \(bytes) bytes; the limit is \(limit)"
        }
    }

    static func encodingName(_ tag: UInt16) -> String {
        switch tag {
        case 0x0002: "Microsoft ADPCM"
        case 0x0006: "A-law"
        case 0x0007: "µ-law"
        case 0x0011: "IMA ADPCM"
        case 0x0031: "GSM 6.10"
        case 0x0050: "MPEG"
        case 0x0055: "MP3"
        case 0x0092: "Dolby AC-3 (S/PDIF)"
        case 0x0000: "unknown"
        default: "format tag \(tag)"
        }
    }
}
