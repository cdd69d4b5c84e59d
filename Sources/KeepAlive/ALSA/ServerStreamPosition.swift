/// Where a sound server's stream is, as ALSA needs it: a position in a ring of `bufferFrames`
/// that moves on by what the server frees. A server has no ring to point into, only a count of
/// the frames it takes now; the position moves by how much that count grew since it was last
/// read, net of what was written meanwhile. ALSA's pulse plug-in keeps the same count, in bytes.
///
/// ```swift
/// var position = ServerStreamPosition(bufferFrames: 6)
/// position.update(writable: 6)   // a new stream: the server takes a whole buffer
/// position.wrote(4)
/// position.update(writable: 4)   // it played two frames
/// position.frames                // 2: five frames on, then three, in a ring of six
/// ```
struct ServerStreamPosition: Equatable {
    let bufferFrames: Int
    /// The position, in `0..<bufferFrames`.
    private(set) var frames = 0
    /// What the server took when last read, less what was written since.
    private var lastWritable = 0

    init(bufferFrames: Int) {
        precondition(bufferFrames > 1, "a stream's buffer holds at least two frames")
        self.bufferFrames = bufferFrames
    }

    /// The server now takes `writable` frames. Never a whole buffer: ALSA would see the ring
    /// wrap and count nothing.
    mutating func update(writable: Int) {
        let writable = min(writable, bufferFrames - 1)
        if writable > lastWritable { frames = (frames + writable - lastWritable) % bufferFrames }
        lastWritable = writable
    }

    /// `count` frames were queued: the server takes that many fewer.
    mutating func wrote(_ count: Int) {
        lastWritable -= count
    }
}
