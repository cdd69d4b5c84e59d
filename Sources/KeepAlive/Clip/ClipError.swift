/// Why a clip could not be read or decoded.
///
/// Every error names the problem in its ``description`` so a command-line tool can print it as is:
///
/// ```swift
/// do {
///     _ = try Clip(base64: "not base64!")
/// } catch {
///     print(error)  // not base64: invalid character ' ' at offset 3
/// }
/// ```
///
/// A struct with a ``code``, not an enumeration, so that the decoder can learn new ways for a file
/// to be wrong without breaking a program's `switch`:
///
/// ```swift
/// do {
///     _ = try Clip(contentsOfFile: "/etc/keepalived/clip.wav")
/// } catch where error.code == .unreadableFile || error.code == .fileTooLarge {
///     print("no clip there: \(error)")
/// } catch {
///     print("not a clip: \(error)")
/// }
/// ```
public struct ClipError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule the input breaks; match it with `==` or in a `switch` with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as `notBase64`.
        public let description: String
        private init(_ name: String) { description = name }

        /// The text is not valid base64.
        public static let notBase64 = Code("notBase64")
        /// The bytes do not start with a `RIFF` header of form `WAVE`.
        public static let notRIFFWAVE = Code("notRIFFWAVE")
        /// No `fmt ` chunk precedes the audio data.
        public static let missingFormatChunk = Code("missingFormatChunk")
        /// The file has no `data` chunk.
        public static let missingDataChunk = Code("missingDataChunk")
        /// The encoding is not linear PCM or IEEE float (ADPCM, µ-law, A-law, MP3, …).
        public static let unsupportedEncoding = Code("unsupportedEncoding")
        /// The bit depth is not one of 8/16/24/32 (PCM) or 32/64 (float).
        public static let unsupportedBitDepth = Code("unsupportedBitDepth")
        /// The header declares zero channels.
        public static let zeroChannels = Code("zeroChannels")
        /// The header declares a sample rate of zero.
        public static let zeroSampleRate = Code("zeroSampleRate")
        /// More channels than the engine plays (1 to 8).
        public static let unsupportedChannelCount = Code("unsupportedChannelCount")
        /// A rate outside 8 kHz to 384 kHz.
        public static let unsupportedSampleRate = Code("unsupportedSampleRate")
        /// The header's block alignment disagrees with its channels and bit depth.
        public static let inconsistentFormat = Code("inconsistentFormat")
        /// The `data` chunk holds no complete frame.
        public static let emptyData = Code("emptyData")
        /// A chunk ends before its own header or required fields do.
        public static let truncatedChunk = Code("truncatedChunk")
        /// A chunk other than `data` declares more bytes than the input holds.
        public static let sizeExceedsInput = Code("sizeExceedsInput")
        /// The clip file could not be read.
        public static let unreadableFile = Code("unreadableFile")
        /// The clip file is larger than a keep-alive clip may be.
        public static let fileTooLarge = Code("fileTooLarge")
    }

    /// Which rule the input breaks.
    public let code: Code
    /// What is wrong, in words a command-line tool can print as is.
    public let description: String

    private init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// The text is not valid base64.
    public static func notBase64(reason: String) -> ClipError { ClipError(.notBase64, "not base64: \(reason)") }
    /// The bytes do not start with a `RIFF` header of form `WAVE`.
    public static let notRIFFWAVE = ClipError(.notRIFFWAVE, "not a RIFF/WAVE file")
    /// No `fmt ` chunk precedes the audio data.
    public static let missingFormatChunk = ClipError(.missingFormatChunk, "no 'fmt ' chunk before the audio data")
    /// The file has no `data` chunk.
    public static let missingDataChunk = ClipError(.missingDataChunk, "no 'data' chunk")
    /// The encoding is not linear PCM or IEEE float.
    public static func unsupportedEncoding(formatTag tag: UInt16) -> ClipError {
        ClipError(.unsupportedEncoding, "unsupported encoding: \(encodingName(tag)) (format tag 0x\(String(tag, radix: 16, uppercase: true))); only integer PCM and IEEE float are played")
    }
    /// The encoding is known but the bit depth is not one of 8/16/24/32 (PCM) or 32/64 (float).
    public static func unsupportedBitDepth(bits: Int, float: Bool) -> ClipError {
        ClipError(.unsupportedBitDepth, float ? "unsupported bit depth: \(bits)-bit float (32 or 64 are supported)" : "unsupported bit depth: \(bits)-bit PCM (8, 16, 24 or 32 are supported)")
    }
    /// The header declares zero channels.
    public static let zeroChannels = ClipError(.zeroChannels, "the format declares zero channels")
    /// The header declares a sample rate of zero.
    public static let zeroSampleRate = ClipError(.zeroSampleRate, "the format declares a sample rate of zero")
    /// More channels than the engine plays (1 to 8).
    public static func unsupportedChannelCount(_ n: Int) -> ClipError {
        ClipError(.unsupportedChannelCount, "unsupported channel count: \(n) (1 to 8 are supported)")
    }
    /// A rate outside 8 kHz to 384 kHz.
    public static func unsupportedSampleRate(_ rate: Int) -> ClipError {
        ClipError(.unsupportedSampleRate, "unsupported sample rate: \(rate) Hz (8000 to 384000 are supported)")
    }
    /// The header's block alignment disagrees with its channels and bit depth.
    public static func inconsistentFormat(reason: String) -> ClipError { ClipError(.inconsistentFormat, "inconsistent format: \(reason)") }
    /// The `data` chunk holds no complete frame.
    public static let emptyData = ClipError(.emptyData, "the 'data' chunk is empty")
    /// A chunk ends before its own header or required fields do.
    public static func truncatedChunk(id: String) -> ClipError { ClipError(.truncatedChunk, "truncated chunk '\(id)'") }
    /// A chunk other than `data` declares more bytes than the input holds. (A `data` or RIFF
    /// size that runs past the end is read as "to the end", as a streaming writer means it.)
    public static func sizeExceedsInput(chunk: String, declared: UInt32, available: Int) -> ClipError {
        ClipError(.sizeExceedsInput, "size field of '\(chunk)' (\(declared) bytes) is larger than the input (\(available) bytes left)")
    }
    /// The clip file could not be read (`reason`: the `errno` text).
    public static func unreadableFile(path: String, reason: String) -> ClipError {
        ClipError(.unreadableFile, "cannot read clip file '\(path)': \(reason)")
    }
    /// The clip file is larger than a keep-alive clip may be.
    public static func fileTooLarge(path: String, bytes: Int, limit: Int) -> ClipError {
        ClipError(.fileTooLarge, "clip file '\(path)' is \(bytes) bytes; the limit is \(limit)")
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
