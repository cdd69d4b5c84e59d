import Glibc

/// A decoded WAV clip: the sound the engine loops at near-zero level.
///
/// The clip keeps its samples in the file's own encoding; they are converted once, when an output
/// opens, into a loop in that device's format.
///
/// ```swift
/// let clip = try Clip(base64: Clip.embeddedBase64)   // the seed's one-sample clip
/// let fromDisk = try Clip(contentsOfFile: "/usr/share/sounds/blip.wav")
/// print(clip.sampleRate, clip.channels, clip.frameCount)  // 44100 1 1
/// ```
public struct Clip: Sendable, Equatable {
    /// How the samples are stored in the file.
    public enum Encoding: Sendable, Equatable, CustomStringConvertible {
        /// Linear PCM: unsigned for 8 bits, signed little-endian for 16, 24 and 32 bits.
        case integer(bits: Int)
        /// IEEE float, little-endian, 32 or 64 bits.
        case float(bits: Int)

        var bytesPerSample: Int {
            switch self {
            case .integer(let bits), .float(let bits): bits / 8
            }
        }

        /// `16-bit PCM`, `32-bit float`, ….
        public var description: String {
            switch self {
            case .integer(let bits): "\(bits)-bit PCM"
            case .float(let bits): "\(bits)-bit float"
            }
        }
    }

    /// Frames per second.
    public let sampleRate: Int
    /// Interleaved channels per frame (1 to 8).
    public let channels: Int
    /// The sample encoding.
    public let encoding: Encoding
    /// The interleaved sample bytes of the `data` chunk, whole frames only.
    let bytes: [UInt8]

    /// The number of frames in one pass of the clip.
    public var frameCount: Int { bytes.count / (channels * encoding.bytesPerSample) }

    /// The clip the iOS seed loops: 44.1 kHz, mono, 16-bit, one sample of value -4.
    public static let embeddedBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQIAAAD8/w=="

    /// The embedded default clip, decoded.
    public static let embedded: Clip = {
        do { return try Clip(base64: embeddedBase64) } catch { fatalError("embedded clip: \(error)") }
    }()

    /// The largest clip file read from disk. A keep-alive clip is tiny; anything this big is a
    /// mistake, and refusing it keeps a typo from pulling gigabytes into memory.
    public static let maximumFileSize = 64 << 20

    /// Decodes a WAV file given as base64 text.
    public init(base64 text: some StringProtocol) throws(ClipError) {
        try self.init(wavBytes: Base64.decode(text))
    }

    /// Decodes a WAV file held in memory.
    public init(wavBytes: some Collection<UInt8>) throws(ClipError) {
        let decoded = try WAVDecoder.decode(Array(wavBytes))
        self.sampleRate = decoded.sampleRate
        self.channels = decoded.channels
        self.encoding = decoded.encoding
        self.bytes = decoded.bytes
    }

    /// Reads and decodes a WAV file.
    public init(contentsOfFile path: String) throws(ClipError) {
        try self.init(wavBytes: Self.read(path))
    }

    init(sampleRate: Int, channels: Int, encoding: Encoding, bytes: [UInt8]) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.encoding = encoding
        self.bytes = bytes
    }

    /// The sample at `frame` and `channel`, as a fraction of full scale in [-1, 1].
    ///
    /// Internal: the renderer reads every sample once, when an output opens, with indices it
    /// derives from ``frameCount`` and ``channels``; an index outside them is a bug of the
    /// engine's, not a caller's mistake to check for on every sample.
    func sample(frame: Int, channel: Int) -> Double {
        let width = encoding.bytesPerSample
        let at = (frame * channels + channel) * width
        return bytes.withUnsafeBufferPointer { raw in
            switch encoding {
            case .integer(8):
                return Double(Int(raw[at]) - 128) / fullScale(bits: 8)
            case .integer(16):
                let value = Int16(bitPattern: UInt16(raw[at]) | UInt16(raw[at + 1]) << 8)
                return Double(value) / fullScale(bits: 16)
            case .integer(24):
                let unsigned = UInt32(raw[at]) | UInt32(raw[at + 1]) << 8 | UInt32(raw[at + 2]) << 16
                let value = Int32(bitPattern: unsigned << 8) >> 8
                return Double(value) / fullScale(bits: 24)
            case .integer:
                var unsigned: UInt32 = 0
                for i in 0..<4 { unsigned |= UInt32(raw[at + i]) << (8 * UInt32(i)) }
                return Double(Int32(bitPattern: unsigned)) / fullScale(bits: 32)
            case .float(32):
                var unsigned: UInt32 = 0
                for i in 0..<4 { unsigned |= UInt32(raw[at + i]) << (8 * UInt32(i)) }
                return Self.finite(Double(Float(bitPattern: unsigned)))
            case .float:
                var unsigned: UInt64 = 0
                for i in 0..<8 { unsigned |= UInt64(raw[at + i]) << (8 * UInt64(i)) }
                return Self.finite(Double(bitPattern: unsigned))
            }
        }
    }

    /// Float files may hold NaN, infinities or values past full scale; none may reach a speaker.
    private static func finite(_ value: Double) -> Double {
        value.isFinite ? min(max(value, -1), 1) : 0
    }

    private static func read(_ path: String) throws(ClipError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw unreadable(path, errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw unreadable(path, errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw .unreadableFile(path: path, reason: "not a regular file")
        }
        let size = Int(info.st_size)
        guard size <= maximumFileSize else { throw .fileTooLarge(path: path, bytes: size, limit: maximumFileSize) }
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            let count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, size - filled) }
            if count < 0 {
                if errno == EINTR { continue }
                throw unreadable(path, errno)
            }
            if count == 0 { break }
            filled += count
        }
        return Array(bytes[0..<filled])
    }

    private static func unreadable(_ path: String, _ code: Int32) -> ClipError {
        .unreadableFile(path: path, reason: String(cString: strerror(code)))
    }
}

// Beside the encoding rather than with the sample formats: a clip reads levels (fullScale), so
// the levels must not read clips back.
extension SampleFormat {
    /// The format closest to a clip's own encoding, asked of the device first.
    init(closestTo encoding: Clip.Encoding) {
        switch encoding {
        case .integer(8): self = .u8
        case .integer(16): self = .s16
        case .integer(24): self = .s24
        case .integer: self = .s32
        case .float: self = .float32
        }
    }
}
