/// Frames another source's 24-bit samples into IEC 60958 subframes as they are written: for the
/// signals that are generated as they play (noise, a sine with no short exact loop, bursts with
/// pauses) on a device that takes nothing but `IEC958_SUBFRAME_LE`. Those already compute every
/// sample they write; framing is a few more operations per sample. A signal that loops is framed
/// once, when it is rendered (``RenderedLoop``), and never here.
///
/// The channel-status block runs on across every write: the block position follows the frames
/// the device took, not the inner source's own position (a burst's pauses are framed too).
///
/// ```swift
/// let framed = IEC958FramedSource(inner: noise, format: format)   // format.framing == .iec958
/// ```
final class IEC958FramedSource: FrameSource {
    let format: OutputFormat
    let inner: any FrameSource
    private let framer: IEC958Framer
    private let capacity: Int
    private let scratch: UnsafeMutableRawBufferPointer
    /// The frame of the current channel-status block that the next frame written is.
    private var blockFrame = 0

    /// `inner` renders linear `S24_LE` samples in `format`'s rate and channels.
    init(inner: any FrameSource, format: OutputFormat) {
        precondition(format.framing == .iec958 && inner.format.framing == .linear && inner.format.bytesPerFrame == format.bytesPerFrame,
                     "an IEC958 framing wraps a linear source of the same frame size")
        self.format = format
        self.inner = inner
        framer = IEC958Framer(sampleRate: format.sampleRate)
        capacity = scratchFrames(for: format)
        scratch = .allocate(byteCount: capacity * format.bytesPerFrame, alignment: 16)
    }

    deinit { scratch.deallocate() }

    func peek(maximum: Int) -> (pointer: UnsafeRawPointer, frames: Int) {
        let (pointer, frames) = inner.peek(maximum: min(maximum, capacity))
        scratch.baseAddress!.copyMemory(from: pointer, byteCount: frames * format.bytesPerFrame)
        framer.frame(scratch.baseAddress!, frames: frames, channels: format.channels, firstFrameInBlock: blockFrame)
        return (UnsafeRawPointer(scratch.baseAddress!), frames)
    }

    func consume(_ frames: Int) {
        inner.consume(frames)
        blockFrame = (blockFrame + frames) % IEC958Framer.blockFrames
    }

    func restart() {
        inner.restart()
        blockFrame = 0
    }

    func holds(_ pointer: UnsafeRawPointer, frames: Int) -> Bool {
        scratch.contains(pointer, byteCount: frames * format.bytesPerFrame)
    }

    var frameInBlock: Int? { blockFrame }

    /// Framed as written: the next frames are framed from there on.
    func continueBlock(at frame: Int) { blockFrame = (frame % IEC958Framer.blockFrames + IEC958Framer.blockFrames) % IEC958Framer.blockFrames }

    /// Generated as it plays: never looped in a ring.
    var ringFit: RingFit { .none }
}
