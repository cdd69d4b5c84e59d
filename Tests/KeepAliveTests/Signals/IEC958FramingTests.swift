import Testing
import TestSupport
@testable import KeepAlive

/// keepalived's own IEC 60958 framing, for devices that take nothing but `IEC958_SUBFRAME_LE` (a
/// Raspberry Pi's HDMI), checked against the tests' independent decoder: every subframe of
/// every signal, across loop wraps and odd write sizes.
@Suite struct IEC958FramingTests {
    static func framed(rate: Int = 48_000, channels: Int = 2, period: Int = 1024) -> OutputFormat {
        OutputFormat(sampleFormat: .s24, sampleRate: rate, channels: channels, bufferFrames: period * 4, periodFrames: period, framing: .iec958)
    }

    @Test("A subframe: preamble, the 24-bit sample in bits 4-27, channel status and even parity")
    func subframeLayout() {
        let framer = IEC958Framer(sampleRate: 48_000)
        #expect(framer.subframe(-1, channel: 0, frameInBlock: 0) == 0x0FFF_FFF8)
        // Frame 2 carries status bit 2 (byte 0 = 0x04: copying permitted); 25 ones, so parity.
        #expect(framer.subframe(-1, channel: 1, frameInBlock: 2) == 0xCFFF_FFF4)
        #expect(framer.subframe(1, channel: 0, frameInBlock: 5) == 0x8000_0012)
        #expect(framer.subframe(0, channel: 0, frameInBlock: 191) == 0x0000_0002)
        #expect(IEC958Framer.sample(of: framer.subframe(-10, channel: 0, frameInBlock: 7)) == -10)
        #expect(IEC958Framer.sample(of: framer.subframe(0x7F_FFFF, channel: 1, frameInBlock: 7)) == 0x7F_FFFF)
    }

    @Test("The channel-status block: consumer PCM, 24-bit words, the rate's code", arguments: [
        (32_000, UInt8(0x03)), (44_100, 0x00), (48_000, 0x02), (88_200, 0x08), (96_000, 0x0A), (176_400, 0x0C), (192_000, 0x0E), (12_345, 0x01),
    ])
    func channelStatus(rate: Int, code: UInt8) {
        let status = IEC958Framer(sampleRate: rate).status
        #expect(status.count == 24)
        #expect(Array(status.prefix(5)) == [0x04, 0x82, 0x00, code, 0x0B])
        #expect(status.dropFirst(5).allSatisfy { $0 == 0 })
    }

    @Test("Cycles align to whole channel-status blocks", arguments: [(1, 192), (48, 192), (100, 4800), (192, 192), (384, 384), (44_100, 705_600)])
    func alignedCycle(cycle: Int, aligned: Int) {
        #expect(IEC958Framer.alignedCycle(cycle) == aligned)
        #expect(IEC958Framer.alignedCycle(cycle, block: 1) == cycle)
    }

    @Test("The embedded clip: a loop of whole blocks, every subframe valid, never digital silence, within the ceiling", arguments: [44_100, 48_000, 96_000])
    func embeddedClip(rate: Int) throws {
        let format = Self.framed(rate: rate)
        let source = try SignalBench.source(.clip, format)
        let loop = try #require((source as? LoopFrameSource)?.loop, "a clip renders as a loop, framed once")
        #expect(loop.frameCount % 192 == 0)
        #expect(source.ringFit == .multiple(of: loop.cycleFrames) && loop.cycleFrames % 192 == 0)
        // Three passes through the loop, in writes of odd sizes and half-taken offers.
        let report = IEC958Decoder.decode(SignalBench.bytes(source, frames: loop.frameCount * 3, sizes: [1000, 7, 191], partial: true), channels: 2)
        #expect(report.problems.isEmpty, "\(report)")
        #expect(report.blocks >= 3)
        #expect(Array(report.channelStatus.prefix(5)) == [0x04, 0x82, 0x00, IEC958Framer.frequencyCode(rate), 0x0B], "\(report)")
        let range = try #require(report.sampleRange)
        // The embedded clip at volume 0.01 on 24-bit samples: -10 LSB (as on an S24_LE device),
        // never zero, and far under the default ceiling.
        #expect(range == -10 ... -10, "\(report)")
        #expect(Double(range.lowerBound.magnitude) / 8_388_608 <= Level.defaultCeiling.linear)
    }

    @Test("A signal generated as it plays is framed as it is written, the block running on across writes", arguments: [
        KeepAliveSignal.pink, .white, .brown, .sine(frequency: 1234.567_891),
    ])
    func generated(signal: KeepAliveSignal) throws {
        let format = Self.framed()
        let source = try SignalBench.source(signal, format, volume: 0.001, ceiling: 0.05)
        #expect(source is IEC958FramedSource)
        #expect(source.ringFit == .none)
        let report = IEC958Decoder.decode(SignalBench.bytes(source, frames: 192 * 40 + 17, sizes: [333, 4096, 1], partial: true), channels: 2)
        #expect(report.problems.isEmpty, "\(report)")
        #expect(report.blocks >= 39)
        let range = try #require(report.sampleRange)
        #expect(max(range.lowerBound.magnitude, range.upperBound.magnitude) <= UInt32(0.05 * 8_388_608))
    }

    @Test("Bursts with pauses: the pauses are framed too, and the stream stays one valid stream")
    func schedule() throws {
        let format = Self.framed(rate: 48_000, period: 480)
        let schedule = PlaySchedule(playFor: .milliseconds(30), pauseFor: .milliseconds(20), fade: .milliseconds(5))
        let source = try SignalBench.source(.clip, format, schedule: schedule)
        #expect(source is IEC958FramedSource)
        let report = IEC958Decoder.decode(SignalBench.bytes(source, frames: 48_000 / 2, sizes: [500, 33]), channels: 2)
        #expect(report.problems.isEmpty, "\(report)")
        // Sound in the bursts, digital zero in the pauses.
        #expect(report.channel(0).contains(0) && report.channel(0).contains { $0 != 0 })
    }

    @Test("After a carried player's frames, the signal goes on in the card's blocks: a loop skips to that frame of a block, a generated signal frames from it", arguments: [
        KeepAliveSignal.clip, .pink,
    ])
    func continueBlock(signal: KeepAliveSignal) throws {
        let source = try SignalBench.source(signal, Self.framed())
        _ = SignalBench.bytes(source, frames: 100)
        #expect(source.frameInBlock == 100)
        // The card's next frame is frame 37 of its block: 37 frames of 192 - 37 more, then whole blocks.
        source.continueBlock(at: 37)
        #expect(source.frameInBlock == 37)
        let bytes = SignalBench.bytes(source, frames: 192 - 37 + 192 * 3)
        let report = IEC958Decoder.decode(bytes, channels: 2)
        #expect(report.problems.isEmpty && report.blocks == 3, "\(report)")
        let firstZ = stride(from: 0, to: bytes.count, by: 8).first { bytes[$0] & 0x0F == 0x08 }.map { $0 / 8 }
        #expect(firstZ == 192 - 37)
        source.continueBlock(at: 0)
        #expect(source.frameInBlock == 0)
    }

    @Test("A linear source has no blocks")
    func linearHasNoBlocks() throws {
        let format = OutputFormat(sampleFormat: .s16, sampleRate: 48_000, channels: 2, bufferFrames: 4096, periodFrames: 1024)
        let source = try SignalBench.source(.clip, format)
        #expect(source.frameInBlock == nil)
        source.continueBlock(at: 5)
        #expect(source.frameInBlock == nil)
    }

    @Test("A restart begins a new block at the loop's first frame")
    func restart() throws {
        let source = try SignalBench.source(.pink, Self.framed())
        _ = SignalBench.bytes(source, frames: 100)
        source.restart()
        let report = IEC958Decoder.decode(SignalBench.bytes(source, frames: 192 * 3), channels: 2)
        #expect(report.problems.isEmpty && report.blocks == 3, "\(report)")
    }

    @Test("Writing frames allocates nothing: each offer lies in a buffer made with the source")
    func noAllocation() throws {
        for signal in [KeepAliveSignal.clip, .pink] {
            let source = try SignalBench.source(signal, Self.framed())
            for _ in 0..<50 {
                let (pointer, frames) = source.peek(maximum: 700)
                #expect(source.holds(pointer, frames: frames))
                source.consume(frames)
            }
        }
    }

    @Test("alsa-lib's IEC958 layer loops a ring of whole blocks")
    func chainWithIEC958Layer() {
        let dump = """
            IEC958 subframe conversion PCM (IEC958_SUBFRAME_LE)
            Its setup is:
              stream       : PLAYBACK
            Slave: Hooks PCM
            Its setup is:
              stream       : PLAYBACK
            Slave: Hardware PCM card 1 'vc4-hdmi-0' device 0 subdevice 0
            """
        let chain = PCMChain(dump: dump)
        #expect(chain.canLoopRing, "\(chain.layers)")
        #expect(chain.ringBlockFrames == 192)
        #expect(chain.hardware == HardwareDevice(card: 1, device: 0))
        #expect(PCMChain(dump: "Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n").ringBlockFrames == 1)
    }

    @Test("The kernel's ENOTSUPP says what it means on an HDMI output, and is waited for as a missing device")
    func notSupported() {
        let error = ALSAError(code: -524, operation: "open")
        #expect(error.description.contains("no display") && error.description.hasSuffix("(ENOTSUPP)"), "\(error)")
        #expect(InterruptionReason(openError: -524) == .noDisplay)
        #expect(InterruptionReason(streamError: -524) == .noDisplay)
        #expect(InterruptionReason.noDisplay.description == "no-display")
    }

    @Test("The format's name and line say IEC958")
    func description() {
        let format = Self.framed()
        #expect(format.deviceFormatName == "IEC958_SUBFRAME_LE")
        #expect(format.description.hasPrefix("IEC958_SUBFRAME_LE (S24_LE samples) 48000 Hz 2 ch"))
        #expect(!format.carriesSameFrames(as: format.linear))
        #expect(format.linear.deviceFormatName == "S24_LE")
    }
}
