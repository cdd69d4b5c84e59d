/// Reads IEC958 subframes as alsa-lib's `iec958` PCM writes them (IEC958_SUBFRAME_LE, the format a
/// Raspberry Pi's vc4-hdmi hardware takes) and checks each one: the faulty PCM
/// (Tests/Fixtures/faulty-pcm) with `format "IEC958_SUBFRAME_LE"` records them in `capture.raw`,
/// whoever framed them (the `keepalived:` plug-in's player, or keepalived's own engine).
///
/// One subframe is 32 bits, little-endian:
///
/// | bits  | what |
/// | ----- | ---- |
/// | 0–3   | preamble: Z (0x08) on the first subframe of a 192-frame block, X (0x02) on any other first subframe, Y (0x04) on the second |
/// | 4–27  | the sample, 24 bits, two's complement (a 16-bit sample in its upper 16 bits, bits 12–27) |
/// | 28    | validity: 0 for a valid sample |
/// | 29    | user data |
/// | 30    | one bit of the channel status: frame N of a block carries byte N/8, bit N%8 (LSB first) |
/// | 31    | parity: bits 4–31 hold an even number of ones |
///
/// ```swift
/// let decoded = try IEC958Decoder(channels: 2).decode(device.capturedData(device: "pi-hdmi"))
/// #expect(decoded.problems.isEmpty, "\(decoded.problems)")
/// #expect(decoded.channelStatus.prefix(4) == [0x04, 0x82, 0x00, 0x02])   // 48 kHz
/// #expect(decoded.samples[0][0] == 0x123400)                           // a 16-bit 0x1234
/// ```
///
/// The decoder only reads: it asserts nothing itself, so a test says which of its findings matter.
struct IEC958Decoder {
    /// Frames per channel-status block.
    static let blockFrames = 192
    /// The preambles alsa-lib writes by default (and vc4-hdmi's driver reads).
    static let z: UInt8 = 0x08, x: UInt8 = 0x02, y: UInt8 = 0x04

    /// Subframes per frame: 2 for stereo (Y marks every subframe after the first).
    var channels = 2

    /// What a capture holds.
    struct Decoded: CustomStringConvertible {
        /// Each frame's samples, the 24-bit field sign-extended (`samples[frame][channel]`).
        var samples: [[Int32]]
        /// The first block's channel status, 24 bytes, from the first subframe of each frame;
        /// empty when the capture holds no whole block.
        var channelStatus: [UInt8]
        /// Whole 192-frame blocks.
        var blocks: Int
        /// Every subframe that breaks a rule (preamble, parity, validity, a channel-status bit
        /// that differs from the first block's or from the other channel's), and bytes left
        /// over; at most the first 20 are spelled out, `problemCount` counts them all.
        var problems: [String]
        var problemCount: Int
        /// The user-data bits seen set (alsa-lib never sets one).
        var userBits: Int

        /// A 16-bit sample as it sits in the 24-bit field (its upper 16 bits).
        static func field(of sample: Int16) -> Int32 { Int32(sample) << 8 }

        var description: String {
            let status = channelStatus.prefix(5).map { String($0, radix: 16).leftPadded(2) }.joined(separator: " ")
            return "\(samples.count) frames of \(samples.first?.count ?? 0) subframes, \(blocks) whole blocks, "
                + "channel status \(status.isEmpty ? "(no whole block)" : status + " …"), user bits \(userBits), "
                + "\(problemCount) problems\(problems.isEmpty ? "" : ": " + problems.prefix(3).joined(separator: "; "))"
        }
    }

    /// Decodes `bytes` (whole frames from the block's start: a capture of one prepared stream).
    func decode(_ bytes: [UInt8]) -> Decoded {
        let frameBytes = 4 * channels
        let frames = bytes.count / frameBytes
        var decoded = Decoded(samples: [], channelStatus: [], blocks: frames / Self.blockFrames, problems: [], problemCount: 0, userBits: 0)
        decoded.samples.reserveCapacity(frames)
        func problem(_ text: String) {
            if decoded.problems.count < 20 { decoded.problems.append(text) }
            decoded.problemCount += 1
        }
        if bytes.count % frameBytes != 0 { problem("\(bytes.count % frameBytes) bytes after the last whole frame") }
        var status = [[UInt8]](repeating: [UInt8](repeating: 0, count: Self.blockFrames / 8), count: channels)
        for frame in 0..<frames {
            var row: [Int32] = []
            row.reserveCapacity(channels)
            let inBlock = frame % Self.blockFrames
            for channel in 0..<channels {
                let at = (frame * channels + channel) * 4
                let word = UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
                let preamble = UInt8(word & 0xF)
                let expected = channel > 0 ? Self.y : inBlock == 0 ? Self.z : Self.x
                if preamble != expected {
                    problem("frame \(frame) subframe \(channel): preamble 0x\(String(preamble, radix: 16)), not 0x\(String(expected, radix: 16))")
                }
                if (word >> 4).nonzeroBitCount % 2 != 0 { problem("frame \(frame) subframe \(channel): odd parity over bits 4–31") }
                if word & 1 << 28 != 0 { problem("frame \(frame) subframe \(channel): validity bit set") }
                if word & 1 << 29 != 0 { decoded.userBits += 1 }
                let bit = UInt8(word >> 30 & 1)
                if frame < Self.blockFrames {
                    status[channel][inBlock / 8] |= bit << (inBlock % 8)
                } else if bit != status[channel][inBlock / 8] >> (inBlock % 8) & 1 {
                    problem("frame \(frame) subframe \(channel): channel-status bit \(inBlock) differs from the first block's")
                }
                // Bits 4–27 to the top of an Int32, then down with the sign: the 24-bit sample.
                row.append(Int32(bitPattern: word << 4) >> 8)
            }
            decoded.samples.append(row)
        }
        if decoded.blocks > 0 {
            decoded.channelStatus = status[0]
            for channel in 1..<channels where status[channel] != status[0] {
                problem("subframe \(channel)'s channel status differs from the first's")
            }
        }
        return decoded
    }

    /// The channel-status rate code (AES3, bits 0–3 of byte 3) alsa-lib writes for `rate`; nil
    /// for a rate IEC 60958 has no code for.
    static func rateCode(_ rate: Int) -> UInt8? {
        [22050: 4, 24000: 6, 32000: 3, 44100: 0, 48000: 2, 88200: 8, 96000: 10, 176400: 12, 192000: 14, 768000: 9][rate]
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
