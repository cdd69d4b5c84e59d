/// Frames ready to hand to `snd_pcm_writei`, in the device's format.
///
/// Owned by one playback thread. Every buffer is allocated when the source is made; ``peek(maximum:)``
/// and ``consume(_:)`` never allocate, convert a clip or lock.
///
/// The write loop:
///
/// ```swift
/// var remaining = writable
/// while remaining > 0 {
///     let (pointer, frames) = source.peek(maximum: remaining)
///     let written = pcm.write(pointer, frames: frames)
///     guard written > 0 else { break }
///     source.consume(written)
///     remaining -= written
/// }
/// ```
protocol FrameSource: AnyObject {
    /// The format the frames are in.
    var format: OutputFormat { get }

    /// Up to `maximum` frames (at least one when `maximum` ≥ 1) of contiguous interleaved frames
    /// in ``format``, valid until the next call on this source. Calling it again without
    /// ``consume(_:)`` offers the same frames.
    func peek(maximum: Int) -> (pointer: UnsafeRawPointer, frames: Int)

    /// The device took the first `frames` of what ``peek(maximum:)`` last offered (0 ≤ `frames` ≤
    /// what was offered); the next peek starts right after them.
    func consume(_ frames: Int)

    /// Starts again from the signal's beginning (a loop's first frame, a burst's fade-in), for a
    /// device that was just prepared and holds nothing stale. Never allocates either.
    func restart()

    /// Whether `frames` frames from `pointer` lie inside a buffer this source (or the source it
    /// wraps) allocated when it was made: what the tests use to show that playing allocates
    /// nothing.
    func holds(_ pointer: UnsafeRawPointer, frames: Int) -> Bool

    /// Which ring lengths the signal can fill and loop in without a seam.
    var ringFit: RingFit { get }

    /// The frame of its IEC 60958 channel-status block (0..<192) that the next frame offered
    /// is, for a source of subframes; nil for linear samples.
    var frameInBlock: Int? { get }

    /// Makes the next frame offered frame `frame` of its channel-status block: after a carried
    /// player's subframes, the signal goes on in the card's blocks, not in its own. Nothing for
    /// linear samples.
    func continueBlock(at frame: Int)
}

extension FrameSource {
    var frameInBlock: Int? { nil }
    func continueBlock(at frame: Int) {}
}

/// Which ring lengths a signal can be tiled into and replayed for ever without a seam.
enum RingFit: Equatable {
    /// A whole number of this many frames: the signal repeats exactly after them.
    case multiple(of: Int)
    /// Any length: the signal has no shape a seam could break (noise).
    case anyLength
    /// None: it never repeats (a waveform without a short exact loop, play-and-pause bursts).
    case none
}

extension UnsafeMutableRawBufferPointer {
    /// Whether `byteCount` bytes from `pointer` lie inside this buffer.
    func contains(_ pointer: UnsafeRawPointer, byteCount: Int) -> Bool {
        let start = UnsafeRawPointer(baseAddress!)
        return pointer >= start && pointer + byteCount <= start + count
    }
}

/// A source over a ``RenderedLoop``: offers slices of the loop buffer itself (no copy), up to the
/// loop's end, then wraps around.
///
/// ```swift
/// let source = LoopFrameSource(loop: RenderedLoop(clip: .embedded, format: format, gain: .defaultVolume,
///                                                 ceiling: .defaultCeiling, minimumFrames: format.periodFrames), format: format)
/// ```
final class LoopFrameSource: FrameSource {
    let format: OutputFormat
    let loop: RenderedLoop
    /// The next frame to offer, in 0..<loop.frameCount.
    private(set) var position = 0

    init(loop: RenderedLoop, format: OutputFormat) {
        precondition(loop.frameCount >= 1 && loop.bytesPerFrame == format.bytesPerFrame, "loop and format disagree")
        self.loop = loop
        self.format = format
    }

    func peek(maximum: Int) -> (pointer: UnsafeRawPointer, frames: Int) {
        (loop.frames(from: position), max(0, min(maximum, loop.frameCount - position)))
    }

    func consume(_ frames: Int) {
        precondition(frames >= 0 && frames <= loop.frameCount - position, "consumed more than was offered")
        position += frames
        if position == loop.frameCount { position = 0 }
    }

    func restart() { position = 0 }

    var ringFit: RingFit { .multiple(of: loop.cycleFrames) }

    /// A loop framed when it was rendered holds whole blocks from its first frame on.
    var frameInBlock: Int? { format.framing == .iec958 ? position % IEC958Framer.blockFrames : nil }

    /// Skips ahead to that frame of a block (less than a block of the signal).
    func continueBlock(at frame: Int) {
        guard let now = frameInBlock else { return }
        let block = IEC958Framer.blockFrames
        position = (position + ((frame - now) % block + block) % block) % loop.frameCount
    }

    func holds(_ pointer: UnsafeRawPointer, frames: Int) -> Bool {
        let start = loop.frames(from: 0)
        return pointer >= start && pointer + frames * format.bytesPerFrame <= start + loop.frameCount * loop.bytesPerFrame
    }
}
