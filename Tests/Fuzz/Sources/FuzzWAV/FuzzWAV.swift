@testable import KeepAlive

/// The formats a clip is rendered into: each integer width, float, odd rates both ways and the
/// channel extremes, so resampling, channel mapping and quantizing all see every decoded clip.
private let deviceFormats: [OutputFormat] = [
    OutputFormat(sampleFormat: .s16, sampleRate: 48_000, channels: 2, bufferFrames: 96_000, periodFrames: 48_000),
    OutputFormat(sampleFormat: .s24, sampleRate: 8_000, channels: 1, bufferFrames: 16_000, periodFrames: 8_000),
    OutputFormat(sampleFormat: .s32, sampleRate: 44_100, channels: 8, bufferFrames: 88_200, periodFrames: 44_100),
    OutputFormat(sampleFormat: .float32, sampleRate: 96_000, channels: 6, bufferFrames: 192_000, periodFrames: 96_000),
    OutputFormat(sampleFormat: .u8, sampleRate: 22_050, channels: 1, bufferFrames: 44_100, periodFrames: 22_050),
]

/// Any bytes as a WAV file: decoding either fails with a described `ClipError` or yields a clip
/// whose every sample is a finite fraction of full scale, and rendering that clip into any device
/// format never writes a sample above the ceiling.
// Also exported under libFuzzer's own name: -sanitize=fuzzer links libFuzzer's main, which
// references it, even though this target's main calls the driver directly.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzWAV(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: start, count: count)
    let clip: Clip
    do {
        clip = try Clip(wavBytes: bytes)
    } catch {
        precondition(!error.description.isEmpty, "a clip error without words")
        return 0
    }
    precondition(clip.frameCount > 0 && (1...8).contains(clip.channels) && (8_000...384_000).contains(clip.sampleRate))
    let isFloat = if case .float = clip.encoding { true } else { false }
    for frame in 0..<clip.frameCount {
        for channel in 0..<clip.channels {
            let sample = clip.sample(frame: frame, channel: channel)
            // Float clips may carry NaN or infinities; the quantizer turns those into silence.
            precondition(!sample.isFinite || abs(sample) <= 1 || isFloat, "PCM sample \(sample) outside full scale")
        }
    }
    for format in deviceFormats {
        let loop = RenderedLoop(clip: clip, format: format, gain: .defaultVolume, ceiling: .defaultCeiling, minimumFrames: format.periodFrames / 8)
        let peak = loop.peak(format: format.sampleFormat)
        precondition(peak <= Level.defaultCeiling.linear, "rendered peak \(peak) above the ceiling in \(format)")
        precondition(loop.frameCount >= format.periodFrames / 8)
    }
    return 0
}
