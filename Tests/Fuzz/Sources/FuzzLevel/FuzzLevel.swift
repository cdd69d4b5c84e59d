@testable import KeepAlive

/// Any bytes as the text of `--volume` or `--max-level`: parsing either fails with a described
/// error or yields a finite level in (0, 1] that reads back from its printed value, and a
/// quantizer with that level as gain, ceiling or both never stores a sample above the ceiling.
// Also exported under libFuzzer's own name: -sanitize=fuzzer links libFuzzer's main, which
// references it, even though this target's main calls the driver directly.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzLevel(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    let level: Level
    do {
        level = try Level(parsing: text)
    } catch {
        precondition(!error.description.isEmpty, "a level error without words")
        return 0
    }
    precondition(level.linear.isFinite && level.linear > 0 && level.linear <= 1, "level \(level.linear) out of (0, 1]")
    precondition(level.decibels.isFinite && level.decibels <= 0)
    // What the daemon prints (the linear value, and its dB) must read back as the same level.
    precondition((try? Level(parsing: "\(level.linear)")) == level, "'\(level.linear)' does not parse back to itself")
    if let shown = try? Level(parsing: "\(level.decibels) dB") {
        precondition(abs(shown.linear - level.linear) <= level.linear * 1e-9, "'\(level.decibels) dB' reads back as \(shown.linear)")
    } else {
        preconditionFailure("'\(level.decibels) dB' does not parse")
    }
    var storage = (UInt64(0), UInt64(0))
    for format in [SampleFormat.u8, .s16, .s24, .s24Packed, .s32, .float32] {
        for (gain, ceiling) in [(level, Level.defaultCeiling), (Level.defaultVolume, level), (level, level)] where gain <= ceiling {
            let quantizer = SampleQuantizer(format: format, gain: gain, ceiling: ceiling)
            for source in [1.0, -1.0, 0.5, -1e-12, 1e-300] {
                withUnsafeMutableBytes(of: &storage) { raw in
                    quantizer.store(source, at: raw.baseAddress!)
                    let stored = SampleQuantizer.load(format, at: raw.baseAddress!)
                    precondition(abs(stored) <= ceiling.linear, "\(format) stored \(stored) over ceiling \(ceiling.linear)")
                }
            }
        }
    }
    return 0
}
