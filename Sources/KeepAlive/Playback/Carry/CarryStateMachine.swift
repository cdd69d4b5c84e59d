import CKeepalivedCarry

/// Every decision of a carried player's stream: at each look at the player's counters and the
/// card's fill, what to take back from the card, which of the player's frames to copy, how much
/// of keepalived's signal to append, and when to look again; and what to tell the player of its
/// position. The carrying loop (``CarryPlayback``) reads, writes and sleeps; this decides.
///
/// The card's buffer holds, from its play position on, a little of keepalived's signal ahead of
/// the player's first frame, then the player's frames as they come (copied at once: the player's
/// own buffer bounds what is queued, so the carrying adds no latency of its own), and when the
/// player has nothing more, the signal again: never zeros, never a stop. Counts are in frames;
/// the card's (`cardWritten`) starts at 0 where the carrying began.
///
/// ```swift
/// var machine = CarryStateMachine(levels: .init(rate: 48000), leadFrames: 480)
/// machine.granted(bufferFrames: 24000)
/// if case .step(let step) = machine.looked(player: nil, fill: 480) {
///     machine.performed(rewound: step.rewind, music: step.music, signal: step.signal)
/// }
/// ```
struct CarryStateMachine {
    /// How much the card holds ahead of its play position, in frames.
    struct Levels: Equatable {
        /// Left in the card when queued frames are taken back: a DMA engine may have fetched
        /// what lies right at its position already.
        var minimumLead: Int
        /// Below this, the signal is appended (the loop looks again when the card reaches it).
        var lowWater: Int
        /// The signal is appended up to this.
        var highWater: Int
        /// What the card plays before the frames queued at a player's end are surely played
        /// (the lead, and a DMA engine's steps): a ring is filled again after that long.
        var settle: Int
        /// What a player's buffer leaves free of the ring, twice over: the signal's room.
        var signalRoom: Int

        init(minimumLead: Int, lowWater: Int, highWater: Int, settle: Int? = nil, signalRoom: Int? = nil) {
            self.minimumLead = minimumLead
            self.lowWater = lowWater
            self.highWater = highWater
            self.settle = settle ?? lowWater
            self.signalRoom = signalRoom ?? highWater
        }

        /// The levels for a card at `rate` whose buffer holds `bufferFrames`.
        init(rate: Int, bufferFrames: Int = .max) {
            // What stays ahead of the card's position when queued frames are taken back: the
            // window for the writes that follow (the player's first frames after the signal) and
            // for a position read late or moving in steps (snd-aloop moves by jiffies; an
            // emulated HDA card and the Pi stand-ins under a loaded host in bursts). 10 ms was
            // missed twice in one full CI run at the first frames of a run (box-mpd's MPD at its
            // lead-in's end, pi-standin's at its first sound: an underrun, the player told its
            // frames had played, and its track cut short). 30 ms: also how much later a player's
            // first frame is heard after a gap (its delay counts it), and how much of its queued
            // audio still plays after a drop or a pause.
            minimumLead = max(rate * 3 / 100, 32)  // 30 ms
            // The lead, and 40 ms of a DMA engine's steps.
            settle = max(minimumLead + rate / 25, 64)  // 70 ms
            // The low water is how late a wakeup may be before the card runs dry and stops
            // (an underrun, digital zero on the link, the player's stream ended): 50 ms was
            // missed by 76-96 ms in carry-chaos's hundred hand-offs (an emulated machine, a
            // player opening beside keepalived on one CPU). What lies above the player's last
            // frame is the signal, taken back when its next frames come: a quarter of a second of
            // it costs no latency. Between it and the high water the loop sleeps while a player
            // that holds the device sends nothing: four wakeups a second. A ring shorter than
            // 2/3 s (a stream's, or 192 kHz in 8 channels in a 2 MB ring: 341 ms) wakes at 3/8
            // of it and fills to 5/8: its 50 ms floor was missed at 192 kHz in 8 channels, the
            // emulated machine busy copying 6 MB/s three times (carry-formats).
            lowWater = max(min(rate / 4, bufferFrames * 3 / 8), settle, 64)  // 250 ms on a 2/3 s buffer or more
            highWater = max(min(rate / 2, bufferFrames * 5 / 8), rate * 3 / 20, 192)  // 500 ms
            // The player's buffer is granted as before the small ring's higher levels: what
            // lies above them then is its music, which needs no room of the signal's.
            signalRoom = max(min(rate / 2, bufferFrames / 4), rate * 3 / 20, 192)
        }
    }

    /// The most a carried player's buffer may hold, in bytes, granted before its format is known:
    /// as long a time as the card's ring holds now less twice the signal's room, in the
    /// widest format the card takes (its highest rate, most channels, four bytes a sample), so a
    /// player that moves a 44.1 kHz mono stream to 192 kHz in 8 channels gets seconds, not the
    /// 53 ms the ring's bytes would be then; at most `maximum` (the bound on shared memory). In the
    /// stream's own format that may be more frames than the ring holds: the loop copies what fits
    /// and the rest as the card plays. 0 when the ring has no room for a player at all.
    static func playerBufferBytes(ringFrames: Int, rate: Int, levels: Levels, capabilities: PCMCapabilities, maximum: Int) -> Int {
        let frames = ringFrames - 2 * levels.signalRoom
        guard frames > 0, rate > 0 else { return 0 }
        let widestBytesPerSecond = (capabilities.rates.max() ?? rate) * capabilities.channels.upperBound * 4
        return min(maximum, Int(Double(frames) / Double(rate) * Double(widestBytesPerSecond)))
    }

    /// A stretch of the player's frames copied one after the other into the card.
    struct Run: Equatable {
        var playerStart: UInt64
        var cardStart: Int64
        var length: UInt64

        /// How many of this run's frames lie at or past `cardEnd` on the card.
        func frames(pastCard cardEnd: Int64) -> UInt64 {
            let end = cardStart + Int64(length)
            return UInt64(max(0, min(Int64(length), end - cardEnd)))
        }
    }

    /// What the loop does now, in this order.
    struct Step: Equatable {
        /// Queued frames to take back from the end.
        var rewind = 0
        /// The player's frames to copy: from this index of its stream, this many.
        var musicFrom: UInt64 = 0
        var music = 0
        /// Frames of the signal to append after them (only when there is no music).
        var signal = 0
    }

    enum Look: Equatable {
        case step(Step)
        /// The player's counters cannot be true (it wrote beyond its buffer, or went back): its
        /// stream ends, and the card plays the signal.
        case broken(String)
    }

    private struct Stream {
        var bufferFrames: Int
        var generation: UInt32
        var copied: UInt64 = 0
        var run: Run?
        var previous: Run?
        /// The player's state at the last look: a new generation after a drain is the drain's
        /// end, not a drop (its PCM ends a drain when its estimate reaches the last frame, which
        /// may be a little ahead of the card).
        var draining = false
        /// The generation before this one ended in a drain, whose frames may still be queued.
        var afterDrain = false
    }

    private enum State {
        /// Granted, no format set: the signal only.
        case signalOnly
        case carrying(Stream)
        case ended
    }

    /// IEC 60958 channel-status blocks on a card that takes subframes: frame `c` of the
    /// carrying (``cardWritten``'s count) is frame `(origin + c) % frames` of its block. A
    /// player's PCM frames its stream's frame `n` as frame `n % 192` of a block, so its frames
    /// land where the two agree: the blocks run on unbroken across signal and music, as they
    /// would on the player's own `hw:` open.
    struct Blocks: Equatable {
        var frames = 192
        var origin: Int
    }

    let levels: Levels
    let blocks: Blocks?
    private var state = State.signalOnly
    /// Frames appended to the card since carrying began (the signal ahead of the first look too).
    private(set) var cardWritten: Int64 = 0
    /// Where the last of the player's frames in the card ends.
    private var musicEnd: Int64 = 0

    init(levels: Levels, leadFrames: Int = 0, blocks: Blocks? = nil) {
        self.levels = levels
        self.blocks = blocks
        cardWritten = Int64(leadFrames)
        musicEnd = 0
    }

    /// The frame of its block that the card's frame `card` (``cardWritten``'s count) is; nil
    /// without blocks.
    func blockFrame(at card: Int64) -> Int? {
        guard let blocks else { return nil }
        let frames = Int64(blocks.frames)
        return Int(((Int64(blocks.origin) + card) % frames + frames) % frames)
    }

    /// The signal's frames to write before the player's frame `playerFrame`, once `rewound`
    /// frames were taken back, so that it lands at its own place in a block (fewer than a
    /// block: at most 4 ms at 48 kHz); 0 without blocks, and within a run of its frames.
    func padding(before playerFrame: UInt64, rewound: Int) -> Int {
        guard let blocks, let frame = blockFrame(at: cardWritten - Int64(rewound)) else { return 0 }
        let wanted = Int(playerFrame % UInt64(blocks.frames))
        return ((wanted - frame) % blocks.frames + blocks.frames) % blocks.frames
    }

    /// The player set a format: memory of `bufferFrames` frames, counters from 0; or, `resumingAt`
    /// its counters, a player carried on after the stream's repair: what it wrote before is
    /// gone with the old stream (its PCM was told of an underrun), only what comes after is copied.
    mutating func granted(bufferFrames: Int, resumingAt counters: ckeepalived_carry_player? = nil) {
        switch state {
        case .signalOnly, .carrying:
            var stream = Stream(bufferFrames: bufferFrames, generation: counters?.generation ?? 0)
            stream.copied = counters?.written ?? 0
            state = .carrying(stream)
        case .ended:
            preconditionFailure("a format granted after carrying ended")
        }
    }

    /// The player's generation carried now; nil before a format and after the end.
    var generation: UInt32? {
        guard case .carrying(let stream) = state else { return nil }
        return stream.generation
    }

    /// The player is gone: what is queued of its frames is taken back (as a close drops them),
    /// with the signal after them; nothing when only the signal is queued. The signal is then
    /// topped up to the high water at once, whatever the low water says: a take-back leaves only
    /// the lead (30 ms), and the thread answers a next player or fills a ring before its next
    /// look (link-handoff's aplay, let go and carried again within 7 ms on a busy host, ran the
    /// card dry there: 40 ms of zero on the link).
    mutating func ended(fill: Int) -> Step {
        // A drain's frames play to their end: its PCM ends a drain when its estimate of the card
        // reaches the last frame, which may be a little ahead of the card, and a close right
        // after that (carry-chaos's hundred plays, 20 ms cut once) must not take them back.
        var drained = false
        if case .carrying(let stream) = state { drained = stream.draining || (stream.afterDrain && stream.copied == 0) }
        let rewind = drained ? 0 : musicQueuedRewind(fill: fill)
        state = .ended
        return Step(rewind: rewind, signal: max(0, levels.highWater - (fill - rewind)))
    }

    /// What to take back so that none of the player's frames stays queued beyond the lead: 0 when
    /// its last frame plays within the lead (taking back only the signal gains nothing and risks
    /// the card's position).
    private func musicQueuedRewind(fill: Int) -> Int {
        guard case .carrying = state else { return 0 }
        let cardPlayed = cardWritten - Int64(fill)
        guard musicEnd > cardPlayed + Int64(levels.minimumLead) else { return 0 }
        return max(0, fill - levels.minimumLead)
    }

    /// A look: the player's counters (nil when unreadable this time) and the frames queued in the card.
    mutating func looked(player: ckeepalived_carry_player?, fill: Int) -> Look {
        switch state {
        case .ended:
            preconditionFailure("a look after carrying ended")
        case .signalOnly:
            return .step(Step(signal: fill < levels.lowWater ? levels.highWater - fill : 0))
        case .carrying(var stream):
            defer { state = .carrying(stream) }
            guard let player else { return .step(Step(signal: fill < levels.lowWater ? levels.highWater - fill : 0)) }
            var step = Step()
            if player.generation != stream.generation {
                // A drop or a prepare: what is queued of the old stream goes, as on the hardware;
                // after a drain, it plays to its end.
                if !stream.draining { step.rewind = musicQueuedRewind(fill: fill) }
                let drained = stream.draining
                stream = Stream(bufferFrames: stream.bufferFrames, generation: player.generation)
                stream.afterDrain = drained
            }
            stream.draining = player.state == UInt32(CKEEPALIVED_CARRY_DRAINING.rawValue)
            guard player.written >= stream.copied else { return .broken("its count of frames written went back") }
            guard player.written - stream.copied <= UInt64(stream.bufferFrames) else {
                return .broken("it wrote \(player.written - stream.copied) frames ahead of what was played, more than its buffer of \(stream.bufferFrames)")
            }
            switch player.state {
            case UInt32(CKEEPALIVED_CARRY_RUNNING.rawValue), UInt32(CKEEPALIVED_CARRY_DRAINING.rawValue):
                let waiting = Int(player.written - stream.copied)
                if waiting > 0 {
                    // The signal after the last of the player's frames goes, down to the lead.
                    let tail = min(fill, Int(max(0, cardWritten - musicEnd)))
                    let back = step.rewind > 0 ? 0 : min(tail, max(0, fill - levels.minimumLead))
                    step.rewind += back
                    step.musicFrom = stream.copied
                    step.music = waiting
                    return .step(step)
                }
            case UInt32(CKEEPALIVED_CARRY_PAUSED.rawValue):
                // Paused on the hardware stops at once: what is queued of the player's goes back
                // to its buffer, to be copied again at the resume.
                if step.rewind == 0 { step.rewind = musicQueuedRewind(fill: fill) }
            default:
                break
            }
            step.signal = fill - step.rewind < levels.lowWater ? levels.highWater - (fill - step.rewind) : 0
            return .step(step)
        }
    }

    /// What the loop did of a step: frames taken back, the signal written before the player's
    /// frames (``padding(before:rewound:)``), the player's frames copied, signal appended.
    mutating func performed(rewound: Int, padding: Int = 0, music: Int, signal: Int) {
        if rewound > 0 {
            cardWritten -= Int64(rewound)
            // The player's frames among those taken back are no longer copied: each run's part past
            // the new end. Not everything between the new end and the music's end: the signal
            // between two runs (a late write of the player's) was not the player's, and counting
            // it would copy that many of its frames twice.
            if case .carrying(var stream) = state, var run = stream.run {
                let back = run.frames(pastCard: cardWritten)
                run.length -= back
                stream.copied -= back
                stream.run = run.length > 0 ? run : stream.previous
                if run.length == 0 {
                    stream.previous = nil
                    if var previous = stream.run {
                        let earlier = previous.frames(pastCard: cardWritten)
                        previous.length -= earlier
                        stream.copied -= earlier
                        stream.run = previous
                    }
                }
                state = .carrying(stream)
            }
            musicEnd = min(musicEnd, cardWritten)
        }
        cardWritten += Int64(padding)
        if music > 0, case .carrying(var stream) = state {
            if var run = stream.run, run.cardStart + Int64(run.length) == cardWritten, run.playerStart + run.length == stream.copied {
                run.length += UInt64(music)
                stream.run = run
            } else {
                stream.previous = stream.run
                stream.run = Run(playerStart: stream.copied, cardStart: cardWritten, length: UInt64(music))
            }
            stream.copied += UInt64(music)
            cardWritten += Int64(music)
            musicEnd = cardWritten
            state = .carrying(stream)
        }
        cardWritten += Int64(signal)
    }

    /// What the player is told, at `fill` frames queued in the card now: its frames the card has
    /// played, those queued after them, and how many frames of the signal the card plays before
    /// the next of them (the player's clock starts that much later). With none of its frames
    /// queued, the next it writes follows the lead (the signal above it is taken back), or
    /// `leadIn` frames more while a lead-in holds its frames back.
    func position(fill: Int, leadIn: Int = 0) -> Position? {
        guard case .carrying(let stream) = state else { return nil }
        let cardPlayed = cardWritten - Int64(fill)
        var ahead = 0
        let played: UInt64
        if let run = stream.run, cardPlayed >= run.cardStart {
            played = run.playerStart + min(UInt64(cardPlayed - run.cardStart), run.length)
        } else if let previous = stream.previous, cardPlayed < previous.cardStart + Int64(previous.length) {
            played = previous.playerStart + UInt64(max(0, cardPlayed - previous.cardStart))
            ahead = Int(max(0, previous.cardStart - cardPlayed))
        } else if let run = stream.run {
            played = run.playerStart
            ahead = Int(run.cardStart - cardPlayed)
        } else {
            played = stream.copied
        }
        if played >= stream.copied { ahead = leadIn > 0 ? leadIn + levels.minimumLead : min(max(fill, 0), levels.minimumLead) }
        return Position(generation: stream.generation, played: played, queued: stream.copied - min(played, stream.copied), ahead: ahead)
    }

    struct Position: Equatable {
        var generation: UInt32
        var played: UInt64
        var queued: UInt64
        var ahead: Int
    }

    /// The frames the card plays before the next one written is heard, at `fill` frames in its
    /// buffer and `delay` from snd_pcm_delay: the buffer's and the card's own delay past it (a
    /// USB card's packets in flight), which hw:'s delay counts and so must a carried player's.
    /// The card's part at most a quarter of a second: more is no card's, a delay read wrong.
    static func heard(fill: Int, delay: Int?, rate: Int) -> Int {
        guard let delay, delay > fill else { return fill }
        return fill + min(delay - fill, max(rate / 4, 1))
    }

    /// When to look again: once the card is down to the low water, in frames from now.
    func framesUntilLook(fill: Int) -> Int { max(0, fill - levels.lowWater) }
}
