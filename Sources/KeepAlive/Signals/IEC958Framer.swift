/// Frames 24-bit samples into IEC 60958 subframes, as ALSA's `IEC958_SUBFRAME_LE` lays them out
/// (alsa-lib's `iec958` plug-in writes the same words):
///
/// | bits | content |
/// | --- | --- |
/// | 0–3 | preamble: Z (`0x08`) on the first channel of a block's first frame, X (`0x02`) on the first channel of the others, Y (`0x04`) on every other channel |
/// | 4–27 | the sample, 24 bits, two's complement |
/// | 28 | validity: 0, the sample is fit to play |
/// | 29 | user data: 0 |
/// | 30 | channel status: bit `frame mod 192` of the 24-byte block |
/// | 31 | parity: bits 4–31 hold an even number of ones |
///
/// The channel-status block is a consumer one for linear PCM: `04 82 00 FS 0B`, copying
/// permitted, an original of the PCM-encoder category, the sampling frequency's code, and 24-bit
/// words.
///
/// A stream stays valid across any cut that falls on a block boundary, so a loop of a whole
/// number of ``blockFrames`` frames replays as one seamless IEC 60958 stream: what lets a ring
/// loop run on an IEC958-only device.
///
/// ```swift
/// let framer = IEC958Framer(sampleRate: 48000)
/// framer.subframe(-1, channel: 0, frameInBlock: 0)   // 0x0FFF_FFF8: Z, sample -1 (24 ones: even parity)
/// framer.subframe(-1, channel: 1, frameInBlock: 2)   // 0xCFFF_FFF4: Y, status bit 2 (copying permitted), parity
/// ```
struct IEC958Framer {
    /// Frames in one channel-status block.
    static let blockFrames = 192

    /// The 192 channel-status bits, one per frame of a block.
    let status: [UInt8]

    init(sampleRate: Int) {
        var status = [UInt8](repeating: 0, count: Self.blockFrames / 8)
        status[0] = 0x04  // consumer, linear PCM, copying permitted, no pre-emphasis
        status[1] = 0x82  // category: PCM encoder/decoder; original
        status[2] = 0x00  // source and channel numbers unspecified
        status[3] = Self.frequencyCode(sampleRate)
        status[4] = 0x0B  // word length: 24 bits of a 24-bit maximum
        self.status = status
    }

    /// IEC 60958-3's code for a sampling frequency in channel-status byte 3 (bits 24–27);
    /// `0x01`, "not indicated", for a rate it has no code for.
    static func frequencyCode(_ rate: Int) -> UInt8 {
        switch rate {
        case 22050: 0x04
        case 24000: 0x06
        case 32000: 0x03
        case 44100: 0x00
        case 48000: 0x02
        case 88200: 0x08
        case 96000: 0x0A
        case 176_400: 0x0C
        case 192_000: 0x0E
        case 768_000: 0x09
        default: 0x01
        }
    }

    /// The subframe that carries `sample` (a 24-bit value, sign-extended or not) on `channel` of
    /// the frame at `frameInBlock` (0..<192).
    func subframe(_ sample: Int32, channel: Int, frameInBlock: Int) -> UInt32 {
        var word = (UInt32(bitPattern: sample) << 4) & 0x0FFF_FFF0
        if status[frameInBlock >> 3] & (1 << (frameInBlock & 7)) != 0 { word |= 1 << 30 }
        if word.nonzeroBitCount & 1 != 0 { word |= 1 << 31 }
        let preamble: UInt32 = channel != 0 ? 0x04 : frameInBlock == 0 ? 0x08 : 0x02
        return word | preamble
    }

    /// Frames `frames` interleaved frames of `channels` 32-bit words in place: each word holds an
    /// `S24_LE` sample (as ``SampleQuantizer`` stores it) and becomes its subframe; the first frame
    /// is frame `firstFrameInBlock` of its block.
    func frame(_ buffer: UnsafeMutableRawPointer, frames: Int, channels: Int, firstFrameInBlock: Int) {
        var inBlock = firstFrameInBlock % Self.blockFrames
        var offset = 0
        for _ in 0..<frames {
            for channel in 0..<channels {
                let sample = Int32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: Int32.self))
                buffer.storeBytes(of: subframe(sample, channel: channel, frameInBlock: inBlock).littleEndian, toByteOffset: offset, as: UInt32.self)
                offset += 4
            }
            inBlock += 1
            if inBlock == Self.blockFrames { inBlock = 0 }
        }
    }

    /// The sample a subframe carries, sign-extended from its 24 bits (for tests and peaks).
    static func sample(of subframe: UInt32) -> Int32 {
        Int32(bitPattern: subframe << 4) >> 8
    }

    /// The fewest frames that hold a whole number of both `cycleFrames` and `block`s (by
    /// default channel-status blocks).
    static func alignedCycle(_ cycleFrames: Int, block: Int = blockFrames) -> Int {
        let cycle = max(cycleFrames, 1), block = max(block, 1)
        var (a, b) = (cycle, block)
        while b != 0 { (a, b) = (b, a % b) }
        return cycle / a * block
    }
}
