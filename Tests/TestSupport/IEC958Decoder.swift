/// Checks every subframe of a captured `IEC958_SUBFRAME_LE` stream against IEC 60958, written
/// from the standard and alsa-lib's layout, not from keepalived's framer: the tests' oracle.
///
/// Each 32-bit little-endian word is one subframe: bits 0–3 the preamble (alsa-lib's values: Z
/// `0x08` on the first channel of a block's first frame, X `0x02` on the first channel of every
/// other frame, Y `0x04` on the other channels), 4–27 the sample, 28 validity, 29 user data, 30
/// the channel-status bit, 31 parity (bits 4–31 even). A capture may start inside a block; every
/// whole block after the first Z must carry the same 24 channel-status bytes on every channel.
///
/// ```swift
/// let report = IEC958Decoder.decode(try FileContents.bytes(capture), channels: 2)
/// #expect(report.problems.isEmpty, "\(report)")
/// #expect(report.channelStatus.prefix(4) == [0x04, 0x82, 0x00, 0x02])   // consumer PCM, 48 kHz
/// ```
public struct IEC958Decoder: CustomStringConvertible {
    /// Whole frames checked.
    public private(set) var frames = 0
    /// Whole channel-status blocks (192 frames from a Z).
    public private(set) var blocks = 0
    /// The channel-status bytes of the first whole block (empty when there is none).
    public private(set) var channelStatus: [UInt8] = []
    /// The samples, sign-extended from their 24 bits, per channel.
    public private(set) var samples: [[Int32]]
    /// What broke the standard, the first 20, each with its frame and channel.
    public private(set) var problems: [String] = []
    /// How many subframes broke it, all told.
    public private(set) var problemCount = 0

    public static let blockFrames = 192

    public static func decode(_ bytes: [UInt8], channels: Int) -> IEC958Decoder {
        var decoder = IEC958Decoder(channels: channels)
        decoder.run(bytes)
        return decoder
    }

    /// The subframes' samples as 24-bit values, one channel's.
    public func channel(_ index: Int) -> [Int32] { samples[index] }

    /// The samples frame by frame, each frame's channels in order.
    public var frameSamples: [[Int32]] {
        (0..<frames).map { frame in samples.map { $0[frame] } }
    }

    /// IEC 60958-3's sampling-frequency code (channel-status byte 3) for `rate`; nil for a rate
    /// it has none for.
    public static func frequencyCode(_ rate: Int) -> UInt8? {
        [22050: 0x04, 24000: 0x06, 32000: 0x03, 44100: 0x00, 48000: 0x02, 88200: 0x08, 96000: 0x0A,
         176_400: 0x0C, 192_000: 0x0E, 768_000: 0x09][rate]
    }

    /// The smallest and largest sample over every channel; nil with no frame.
    public var sampleRange: ClosedRange<Int32>? {
        let all = samples.joined()
        guard let low = all.min(), let high = all.max() else { return nil }
        return low...high
    }

    public var description: String {
        let status = channelStatus.prefix(6).map { hex($0) }.joined(separator: " ")
        let range = sampleRange.map { "\($0.lowerBound)…\($0.upperBound)" } ?? "none"
        let verdict = problemCount == 0 ? "every subframe valid (preambles Z/X/Y, even parity, validity 0)" : "\(problemCount) invalid subframes: \(problems.prefix(5).joined(separator: "; "))"
        return "IEC958: \(frames) frames, \(blocks) whole blocks; \(verdict); channel status \(status); samples \(range)"
    }

    private init(channels: Int) {
        samples = Array(repeating: [], count: max(channels, 1))
    }

    private mutating func problem(_ frame: Int, _ channel: Int, _ text: String) {
        problemCount += 1
        if problems.count < 20 { problems.append("frame \(frame) ch \(channel): \(text)") }
    }

    private mutating func run(_ bytes: [UInt8]) {
        let channels = samples.count
        let frameBytes = 4 * channels
        frames = bytes.count / frameBytes
        if bytes.count % frameBytes != 0 { problem(frames, 0, "\(bytes.count % frameBytes) bytes of a partial frame at the end") }
        // Where blocks start: a frame whose first subframe has preamble Z.
        var blockStart: Int?
        var statusBits: [[UInt8]] = Array(repeating: [], count: channels)
        var firstStatus: [UInt8]?
        for frame in 0..<frames {
            for channel in 0..<channels {
                let offset = frame * frameBytes + channel * 4
                let word = UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
                let preamble = word & 0xF
                if channel == 0, preamble == 0x08 {
                    if let start = blockStart, (frame - start) % Self.blockFrames != 0 {
                        problem(frame, channel, "Z \(frame - start) frames after a block start")
                    }
                    if blockStart == nil { blockStart = frame }
                }
                let inBlock = blockStart.map { (frame - $0) % Self.blockFrames }
                let expected: UInt32 = channel != 0 ? 0x04 : inBlock == 0 ? 0x08 : 0x02
                if preamble != expected { problem(frame, channel, "preamble \(hex(UInt8(preamble))), expected \(hex(UInt8(expected)))") }
                if (word >> 4).nonzeroBitCount & 1 != 0 { problem(frame, channel, "odd parity (\(hex32(word)))") }
                if word & (1 << 28) != 0 { problem(frame, channel, "validity bit set: the sample is marked unfit to play") }
                if word & (1 << 29) != 0 { problem(frame, channel, "user-data bit set") }
                samples[channel].append(Int32(bitPattern: word << 4) >> 8)
                guard let inBlock else { continue }
                if inBlock == 0 { statusBits[channel] = [] }
                statusBits[channel].append(UInt8((word >> 30) & 1))
                if statusBits[channel].count == Self.blockFrames {
                    var status = [UInt8](repeating: 0, count: Self.blockFrames / 8)
                    for (bit, value) in statusBits[channel].enumerated() where value != 0 { status[bit >> 3] |= 1 << (bit & 7) }
                    if let firstStatus {
                        if status != firstStatus { problem(frame, channel, "channel status \(status.prefix(6).map { hex($0) }) differs from the first block's") }
                    } else {
                        firstStatus = status
                    }
                    if channel == 0 { blocks += 1 }
                }
            }
        }
        if frames >= 2 * Self.blockFrames, blockStart == nil { problem(0, 0, "no block start (Z) in \(frames) frames") }
        channelStatus = firstStatus ?? []
    }
}

private func hex(_ value: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(value >> 4)], digits[Int(value & 0xF)]])
}

private func hex32(_ value: UInt32) -> String {
    (0..<4).reversed().map { hex(UInt8(truncatingIfNeeded: value >> (8 * $0))) }.joined()
}
