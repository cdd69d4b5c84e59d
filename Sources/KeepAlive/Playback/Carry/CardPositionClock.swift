/// When the card's position that keepalived reads was true. A card's position moves in steps
/// (snd-aloop's by kernel ticks, 4 ms at HZ=250; others by a DMA burst or a USB packet): read
/// at `now`, it is the position of the last step, up to a step earlier. A carried player is
/// told it with the time it was true, since its PCM counts on from there at the rate
/// (`ckeepalived_carry_played_at`): stamped at the read, the player's delay would be too long by
/// how late in its step the read came (1.5 ms in the median on the loopback, carry-sync).
///
/// A read is never early: the earliest of the recent reads, against its position at the rate, is
/// the nearest to a step, and every other read was late by how far it lies behind that one.
/// Recent: a second, over which a card's clock drifting from CLOCK_MONOTONIC by 100 ppm moves
/// 0.1 ms. A read later than `limit` behind the others is no step (the card stopped, or the
/// position jumped): the window starts again from it.
///
/// ```swift
/// var clock = CardPositionClock(rate: 48000)
/// let validAt = clock.validAt(position: 96_000, readAt: 2_003_000_000)
/// ```
struct CardPositionClock {
    let rate: Int
    let window: Int64
    let limit: Int64
    /// Recent reads: the card's frames played and when they were read (CLOCK_MONOTONIC ns), oldest first.
    private var reads: [(position: Int64, at: Int64)] = []
    private static let capacity = 128

    init(rate: Int, window: Int64 = 1_000_000_000, limit: Int64 = 20_000_000) {
        self.rate = max(rate, 1)
        self.window = window
        self.limit = limit
        // Its room once: the carrying loop's steady state allocates nothing.
        reads.reserveCapacity(Self.capacity)
    }

    /// The time at which the card had played `position` frames, read at `readAt`: `readAt` less
    /// how late this read came against the earliest recent one (never more than `limit`).
    mutating func validAt(position: Int64, readAt: Int64) -> Int64 {
        if let last = reads.last, position < last.position || readAt < last.at { reads.removeAll(keepingCapacity: true) }
        // Beyond a few seconds of frames apart, no read says anything of this one (and the
        // product below stays far from overflowing).
        reads.removeAll { readAt - $0.at > window || position - $0.position > 4 * Int64(rate) }
        if reads.count >= Self.capacity { reads.removeFirst(reads.count - Self.capacity + 1) }
        var late: Int64 = 0
        for read in reads {
            // How much later this read came than `read`, beyond the frames played between them.
            let played = (position - read.position) * 1_000_000_000 / Int64(rate)
            late = max(late, readAt - read.at - played)
        }
        if late > limit {
            reads.removeAll(keepingCapacity: true)
            late = 0
        }
        reads.append((position, readAt))
        return readAt - late
    }
}
