import Testing
import TestSupport
@testable import KeepAlive

/// A long loop costs one tile of memory (``LoopMemory``): the tile's arithmetic, the mirrors
/// reading what the first tile holds, and loops rendered into tiled memory playing exactly what a
/// plain allocation plays.
@Suite struct LoopMemoryTests {
    @Test("A tile is whole cycles and whole pages, at least 16 kB, and only where two fit", arguments: [
        // (bytes, cycle) → tile: a sink's 4 s write of -1 LSB, mono S16 (the benchmark's).
        (352_800, 2, 16_384 as Int?),
        // S24_3LE stereo: 6-byte frames tile every three pages.
        (352_800, 6, 24_576),
        // Too short for two 16 kB tiles: the page-aligned unit alone.
        (20_000, 2, 4_096),
        // Too short for two of any tile.
        (6_000, 2, nil),
        // A second of a 44.1 kHz clip at 2 bytes a frame: its lcm with a page is megabytes.
        (352_800, 88_200, nil),
    ])
    func tileArithmetic(bytes: Int, cycle: Int, tile: Int?) {
        #expect(LoopMemory.tileBytes(byteCount: bytes, cycleBytes: cycle, pageBytes: 4096) == tile)
    }

    @Test("Tiled memory reads back the first tile's bytes everywhere, and holds at least what was asked")
    func mirrors() {
        let memory = LoopMemory(byteCount: 352_800, cycleBytes: 6)
        defer { memory.release() }
        #expect(memory.isTiled, "memfd_create and MAP_FIXED mappings work here")
        #expect(memory.byteCount >= 352_800 && memory.byteCount % memory.distinctBytes == 0)
        for index in 0..<memory.distinctBytes { memory.base.storeBytes(of: UInt8(truncatingIfNeeded: index &* 7), toByteOffset: index, as: UInt8.self) }
        let wrong = (0..<memory.byteCount).first {
            memory.base.load(fromByteOffset: $0, as: UInt8.self) != UInt8(truncatingIfNeeded: ($0 % memory.distinctBytes) &* 7)
        }
        #expect(wrong == nil, "byte \(wrong ?? -1) differs from the first tile's")
    }

    @Test("A plain allocation where tiling saves nothing")
    func plain() {
        let memory = LoopMemory(byteCount: 6_000, cycleBytes: 2)
        defer { memory.release() }
        #expect(!memory.isTiled && memory.byteCount == 6_000 && memory.distinctBytes == 6_000)
    }

    @Test("A sound server's long loop of the seed clip: -1 in every sample, in one tile of memory")
    func longStreamLoop() {
        let format = OutputFormat(sampleFormat: .s16, sampleRate: 44100, channels: 1, bufferFrames: 352_800, periodFrames: 88_200)
        let loop = RenderedLoop(clip: .embedded, format: format, gain: .defaultVolume, ceiling: .defaultCeiling, minimumFrames: 176_400)
        #expect(loop.frameCount >= 176_400)
        #expect(loop.isTiled)
        let samples = UnsafeRawBufferPointer(start: loop.frames(from: 0), count: loop.frameCount * 2).bindMemory(to: Int16.self)
        #expect(samples.allSatisfy { $0 == -1 })
    }

    @Test("An IEC958 loop in tiled memory: every subframe valid across the whole loop, framed once", arguments: [1, 4])
    func longIEC958Loop(seconds: Int) throws {
        let format = OutputFormat(sampleFormat: .s24, sampleRate: 48_000, channels: 2, bufferFrames: 96_000, periodFrames: 24_000, framing: .iec958)
        // A one-frame signal: its cycle is one channel-status block, 1536 bytes, so the loop tiles.
        let quantizer = SampleQuantizer(format: format.sampleFormat, gain: .defaultVolume, ceiling: .defaultCeiling)
        let loop = RenderedLoop(format: format, passFrames: 1, minimumFrames: 48_000 * seconds, quantizer: quantizer) { _ in -0.001 }
        #expect(loop.isTiled)
        let bytes = Array(UnsafeRawBufferPointer(start: loop.frames(from: 0), count: loop.frameCount * loop.bytesPerFrame))
        let report = IEC958Decoder.decode(bytes, channels: 2)
        #expect(report.problems.isEmpty, "\(report)")
        #expect(report.blocks >= 48_000 * seconds / 192 - 1, "\(report)")
        let range = try #require(report.sampleRange)
        #expect(range.lowerBound == range.upperBound && range.lowerBound < 0, "\(report)")
    }
}
