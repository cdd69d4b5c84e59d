import CKeepalivedCarry
import Testing
@testable import KeepAlive

/// A carried player's stream without a card or a player: the frames each look copies, the signal
/// it appends, what goes back, and the position the player is told.
@Suite("Carrying a player")
struct CarryStateMachineTests {
    /// 5, 10 and 40 ms at 48 kHz.
    let levels = CarryStateMachine.Levels(minimumLead: 240, lowWater: 480, highWater: 1920)

    func counters(_ written: UInt64, _ state: ckeepalived_carry_player_state = CKEEPALIVED_CARRY_RUNNING, generation: UInt32 = 0) -> ckeepalived_carry_player {
        ckeepalived_carry_player(written: written, state: state.rawValue, generation: generation)
    }

    /// Carrying from a card holding `lead` frames of the signal, a 4800-frame player buffer.
    func carrying(lead: Int = 480) -> CarryStateMachine {
        var machine = CarryStateMachine(levels: levels, leadFrames: lead)
        machine.granted(bufferFrames: 4800)
        return machine
    }

    @Test("a player's buffer: the ring's time less the signal's room, in the widest format the card takes, within the bound")
    func playerBuffer() {
        let card = PCMCapabilities(formats: [], rates: [44100, 48000, 96000, 192_000], channels: 1...8)
        // A 4 s ring at 44.1 kHz keeping 500 ms above and below: 3 s at 192 kHz, 8 channels, 32 bits.
        let levels = CarryStateMachine.Levels(rate: 44100, bufferFrames: 176_400)
        #expect(CarryStateMachine.playerBufferBytes(ringFrames: 176_400, rate: 44100, levels: levels, capabilities: card, maximum: 1 << 30)
            == 3 * 192_000 * 8 * 4)
        #expect(CarryStateMachine.playerBufferBytes(ringFrames: 176_400, rate: 44100, levels: levels, capabilities: card, maximum: 16 << 20) == 16 << 20)
        // A stereo card at 48 kHz at most: 3 s of that, whatever the stream runs at now.
        let small = PCMCapabilities(formats: [], rates: [44100, 48000], channels: 2...2)
        #expect(CarryStateMachine.playerBufferBytes(ringFrames: 176_400, rate: 44100, levels: levels, capabilities: small, maximum: 16 << 20) == 3 * 48000 * 2 * 4)
        // No room beside the signal's: nothing to grant.
        let tight = CarryStateMachine.Levels(minimumLead: 10, lowWater: 100, highWater: 600)
        #expect(CarryStateMachine.playerBufferBytes(ringFrames: 1200, rate: 48000, levels: tight, capabilities: small, maximum: 16 << 20) == 0)
    }

    @Test("levels: a lead of 30 ms; the signal topped up from 250 to 500 ms on a ring loop's buffer, from 3/8 to 5/8 of a short ring")
    func levelsAt48k() {
        let ring = CarryStateMachine.Levels(rate: 48_000, bufferFrames: 4 * 48_000)
        #expect(ring.minimumLead == 1440 && ring.lowWater == 12_000 && ring.highWater == 24_000 && ring.settle == 3360)
        #expect(ring.signalRoom == 24_000)
        let small = CarryStateMachine.Levels(rate: 48_000, bufferFrames: 12_000)
        #expect(small.minimumLead == 1440 && small.lowWater == 4500 && small.highWater == 7500 && small.settle == 3360)
        // A 0.5 s buffer (a stream's): a 500 ms high water would leave the player nothing; its
        // grant keeps the room it had.
        let stream = CarryStateMachine.Levels(rate: 48_000, bufferFrames: 24_000)
        #expect(stream.lowWater == 9000 && stream.highWater == 15_000 && stream.signalRoom == 7200 && 24_000 - 2 * stream.signalRoom > 0)
        // 192 kHz in 8 channels of 32 bits in a 2 MB ring (snd-aloop's): 341 ms, woken with 128 ms
        // left (50 ms underran under emulation), and still room for a player.
        let wide = CarryStateMachine.Levels(rate: 192_000, bufferFrames: 65_536)
        #expect(wide.lowWater == 24_576 && wide.highWater == 40_960 && wide.lowWater < wide.highWater)
        let card = PCMCapabilities(formats: [], rates: [44100, 192_000], channels: 1...8)
        #expect(CarryStateMachine.playerBufferBytes(ringFrames: 65_536, rate: 192_000, levels: wide, capabilities: card, maximum: 16 << 20) > 0)
    }

    @Test("the player gone or dropping with only the signal queued: nothing is taken back")
    func nothingBackAfterTheMusic() {
        var machine = carrying(lead: 240)
        _ = machine.looked(player: counters(960), fill: 240)
        machine.performed(rewound: 0, music: 960, signal: 0)
        _ = machine.looked(player: counters(960), fill: 400)
        machine.performed(rewound: 0, music: 0, signal: 1520)
        // 1700 queued: the player's last 180 (within the lead), then the signal.
        #expect(machine.looked(player: counters(0, CKEEPALIVED_CARRY_IDLE, generation: 1), fill: 1700) == .step(.init()))
        #expect(machine.ended(fill: 1600) == .init(signal: 320))
        // With 280 of the player's queued, beyond the lead, they go back.
        var other = carrying(lead: 240)
        _ = other.looked(player: counters(960), fill: 240)
        other.performed(rewound: 0, music: 960, signal: 1520)
        #expect(other.ended(fill: 1800) == .init(rewind: 1560, signal: 1680))
    }

    @Test("before a format: the signal only, topped up to the high water below the low water")
    func signalOnly() {
        var machine = CarryStateMachine(levels: levels, leadFrames: 300)
        #expect(machine.looked(player: nil, fill: 300) == .step(.init(signal: 1620)))
        machine.performed(rewound: 0, music: 0, signal: 1620)
        #expect(machine.looked(player: nil, fill: 1000) == .step(.init()))
        #expect(machine.framesUntilLook(fill: 1000) == 520)
        #expect(machine.cardWritten == 1920)
    }

    @Test("a prepared player that wrote ahead of its start: nothing copied until it runs")
    func notStarted() {
        var machine = carrying()
        #expect(machine.looked(player: counters(2400, CKEEPALIVED_CARRY_IDLE), fill: 480) == .step(.init()))
        // Its first frame is heard after the lead (what is above it goes back); during a
        // lead-in, after that too; with less than the lead queued, right after what is there.
        #expect(machine.position(fill: 480) == .init(generation: 0, played: 0, queued: 0, ahead: 240))
        #expect(machine.position(fill: 480, leadIn: 48_000) == .init(generation: 0, played: 0, queued: 0, ahead: 48_240))
        #expect(machine.position(fill: 100) == .init(generation: 0, played: 0, queued: 0, ahead: 100))
    }

    @Test("the first frames: the signal ahead goes back to the lead, the player's follow it")
    func firstFrames() {
        var machine = carrying(lead: 1920)
        #expect(machine.looked(player: counters(2400), fill: 1900) == .step(.init(rewind: 1660, musicFrom: 0, music: 2400)))
        machine.performed(rewound: 1660, music: 2400, signal: 0)
        // The card holds 240 of the signal, then the player's 2400.
        #expect(machine.position(fill: 2640) == .init(generation: 0, played: 0, queued: 2400, ahead: 240))
        #expect(machine.position(fill: 2400) == .init(generation: 0, played: 0, queued: 2400, ahead: 0))
        #expect(machine.position(fill: 1400) == .init(generation: 0, played: 1000, queued: 1400, ahead: 0))
        // More: copied right after, no signal between.
        #expect(machine.looked(player: counters(3400), fill: 1400) == .step(.init(musicFrom: 2400, music: 1000)))
        machine.performed(rewound: 0, music: 1000, signal: 0)
        #expect(machine.position(fill: 2400) == .init(generation: 0, played: 1000, queued: 2400, ahead: 0))
    }

    @Test("the player stops writing: the signal follows its last frame, and its next frames follow the signal")
    func underrun() {
        var machine = carrying(lead: 240)
        _ = machine.looked(player: counters(960), fill: 240)
        machine.performed(rewound: 0, music: 960, signal: 0)
        // 400 left in the card, all the player's: the signal is appended.
        #expect(machine.looked(player: counters(960), fill: 400) == .step(.init(signal: 1520)))
        machine.performed(rewound: 0, music: 0, signal: 1520)
        #expect(machine.position(fill: 1920) == .init(generation: 0, played: 560, queued: 400, ahead: 0))
        // The player writes again while 1000 of the signal are queued: 760 of it go back.
        #expect(machine.looked(player: counters(1960), fill: 1000) == .step(.init(rewind: 760, musicFrom: 960, music: 1000)))
        machine.performed(rewound: 760, music: 1000, signal: 0)
        #expect(machine.position(fill: 1240) == .init(generation: 0, played: 960, queued: 1000, ahead: 240))
        #expect(machine.position(fill: 1000) == .init(generation: 0, played: 960, queued: 1000, ahead: 0))
        #expect(machine.position(fill: 500) == .init(generation: 0, played: 1460, queued: 500, ahead: 0))
    }

    @Test("a pause takes back what is queued of the player's; the resume copies it again")
    func pause() {
        var machine = carrying(lead: 240)
        _ = machine.looked(player: counters(2000), fill: 240)
        machine.performed(rewound: 0, music: 2000, signal: 0)
        #expect(machine.looked(player: counters(2000, CKEEPALIVED_CARRY_PAUSED), fill: 1240) == .step(.init(rewind: 1000, signal: 1680)))
        machine.performed(rewound: 1000, music: 0, signal: 1680)
        // 1240 queued before the pause: 1000 went back, so 1000 of the player's were played or
        // stay in the card (240), and 1000 wait in its buffer.
        #expect(machine.looked(player: counters(2000), fill: 1920) == .step(.init(rewind: 1680, musicFrom: 1000, music: 1000)))
    }

    @Test("a pause reaching back across the signal between two runs (a late write of the player's) copies none of its frames twice")
    func pauseAcrossALateWrite() {
        var machine = carrying(lead: 240)
        // Run A: the player's 0..<960 at the card's 240..<1200.
        _ = machine.looked(player: counters(960), fill: 240)
        machine.performed(rewound: 0, music: 960, signal: 0)
        // The player is late: 500 of the signal follow, then 360 of them go back for its next
        // write, so run B (its 960..<1920) starts at the card's 1340, 140 of the signal before it.
        machine.performed(rewound: 0, music: 0, signal: 500)
        #expect(machine.looked(player: counters(1920), fill: 600) == .step(.init(rewind: 360, musicFrom: 960, music: 960)))
        machine.performed(rewound: 360, music: 960, signal: 0)
        // Paused with 1500 queued (the card at 800, in run A): 1260 go back, 960 of run B, the 140
        // of the signal and 160 of run A; 800 of the player's stay played or queued.
        #expect(machine.looked(player: counters(1920, CKEEPALIVED_CARRY_PAUSED), fill: 1500) == .step(.init(rewind: 1260, signal: 1680)))
        machine.performed(rewound: 1260, music: 0, signal: 1680)
        // The resume copies from the player's 800, not from 660 (140 of its frames twice).
        #expect(machine.looked(player: counters(1920), fill: 1800) == .step(.init(rewind: 1560, musicFrom: 800, music: 1120)))
    }

    @Test("a drop or prepare: a new generation starts from frame 0, the old one's queued frames go back")
    func drop() {
        var machine = carrying(lead: 240)
        _ = machine.looked(player: counters(2000), fill: 240)
        machine.performed(rewound: 0, music: 2000, signal: 0)
        #expect(machine.looked(player: counters(0, CKEEPALIVED_CARRY_IDLE, generation: 1), fill: 2000) == .step(.init(rewind: 1760, signal: 1680)))
        machine.performed(rewound: 1760, music: 0, signal: 1680)
        #expect(machine.position(fill: 1920) == .init(generation: 1, played: 0, queued: 0, ahead: 240))
    }

    @Test("the end of a drain (a new generation after draining): the drain's frames play to their end")
    func drainEnd() {
        var machine = carrying(lead: 240)
        _ = machine.looked(player: counters(2000), fill: 240)
        machine.performed(rewound: 0, music: 2000, signal: 0)
        #expect(machine.looked(player: counters(2000, CKEEPALIVED_CARRY_DRAINING), fill: 1500) == .step(.init()))
        // Its PCM's estimate reached the last frame 700 frames before the card did.
        #expect(machine.looked(player: counters(0, CKEEPALIVED_CARRY_IDLE, generation: 1), fill: 700) == .step(.init()))
        #expect(machine.looked(player: counters(0, CKEEPALIVED_CARRY_IDLE, generation: 1), fill: 300) == .step(.init(signal: 1620)))
    }

    @Test("the player gone right after a drain (while draining, or after the drain's end): the drain's frames still queued play, nothing is taken back")
    func closedAfterDrain() {
        var draining = carrying(lead: 240)
        _ = draining.looked(player: counters(2000), fill: 240)
        draining.performed(rewound: 0, music: 2000, signal: 0)
        _ = draining.looked(player: counters(2000, CKEEPALIVED_CARRY_DRAINING), fill: 1500)
        #expect(draining.ended(fill: 1200) == .init(signal: 720))
        var drained = carrying(lead: 240)
        _ = drained.looked(player: counters(2000), fill: 240)
        drained.performed(rewound: 0, music: 2000, signal: 0)
        _ = drained.looked(player: counters(2000, CKEEPALIVED_CARRY_DRAINING), fill: 1500)
        _ = drained.looked(player: counters(0, CKEEPALIVED_CARRY_IDLE, generation: 1), fill: 1200)
        #expect(drained.ended(fill: 1000) == .init(signal: 920))
        // A close without a drain takes the queued frames back to the lead, as a drop does.
        var closed = carrying(lead: 240)
        _ = closed.looked(player: counters(2000), fill: 240)
        closed.performed(rewound: 0, music: 2000, signal: 0)
        #expect(closed.ended(fill: 1200) == .init(rewind: 960, signal: 1680))
    }

    @Test("carried on after the stream's repair: what was written before is not copied; the player's prepare starts its next frames")
    func resumed() {
        var machine = CarryStateMachine(levels: levels, leadFrames: 1920)
        machine.granted(bufferFrames: 4800, resumingAt: counters(50_000, generation: 2))
        #expect(machine.generation == 2)
        // Still the old generation, all of it "played" (its PCM was told of an underrun): the signal only.
        #expect(machine.looked(player: counters(50_000, generation: 2), fill: 400) == .step(.init(signal: 1520)))
        machine.performed(rewound: 0, music: 0, signal: 1520)
        #expect(machine.position(fill: 1920) == .init(generation: 2, played: 50_000, queued: 0, ahead: 240))
        // Its recovery: a prepare (a new generation) and new frames, carried behind the lead.
        #expect(machine.looked(player: counters(960, generation: 3), fill: 1920) == .step(.init(rewind: 1680, musicFrom: 0, music: 960)))
        #expect(machine.generation == 3)
    }

    @Test("a player's counters that cannot be true end its stream")
    func broken() {
        var machine = carrying()
        _ = machine.looked(player: counters(1000), fill: 480)
        machine.performed(rewound: 0, music: 1000, signal: 0)
        guard case .broken = machine.looked(player: counters(500), fill: 480) else {
            Issue.record("a count that went back was taken")
            return
        }
        var other = carrying()
        guard case .broken = other.looked(player: counters(4801), fill: 480) else {
            Issue.record("more than the buffer was taken")
            return
        }
    }

    @Test("the player gone: its queued frames go back down to the lead, and the signal fills to the high water at once")
    func ended() {
        var machine = carrying(lead: 240)
        _ = machine.looked(player: counters(2000), fill: 240)
        machine.performed(rewound: 0, music: 2000, signal: 0)
        #expect(machine.ended(fill: 1500) == .init(rewind: 1260, signal: 1680))
        // Only the signal queued, above the high water: nothing goes back, nothing is added.
        var full = carrying(lead: 2400)
        #expect(full.ended(fill: 2400) == .init())
    }

    @Test("an unreadable look (the player mid-write every try) appends the signal only when low")
    func unreadable() {
        var machine = carrying()
        #expect(machine.looked(player: nil, fill: 1000) == .step(.init()))
        #expect(machine.looked(player: nil, fill: 100) == .step(.init(signal: 1820)))
    }

    @Test("the shared position: published whole, the played count follows the clock and stops at what is queued")
    func sharedPosition() {
        let position = ckeepalived_carry_position(generation: 3, played: 1000, queued: 480, stamp_ns: 1_000_000_000)
        #expect(ckeepalived_carry_played_at(position, 48_000, 1_000_000_000) == 1000)
        #expect(ckeepalived_carry_played_at(position, 48_000, 1_005_000_000) == 1240)
        #expect(ckeepalived_carry_played_at(position, 48_000, 1_100_000_000) == 1480)
        #expect(ckeepalived_carry_played_at(position, 48_000, 900_000_000) == 1000)
        // The signal before the frame at the stamp (a lead-in): counted down to the stamp.
        #expect(ckeepalived_carry_ahead_at(position, 48_000, 900_000_000) == 4800)
        #expect(ckeepalived_carry_ahead_at(position, 48_000, 1_000_000_000) == 0)
        #expect(ckeepalived_carry_ahead_at(position, 48_000, 1_005_000_000) == 0)
        #expect(ckeepalived_carry_ahead_at(position, 48_000, -100_000_000_000) == 60 * 48_000)
        var shared = ckeepalived_carry_shared()
        ckeepalived_carry_init(&shared, 4800, 4, 48_000)
        ckeepalived_carry_publish(&shared, position)
        var read = ckeepalived_carry_position()
        #expect(ckeepalived_carry_read(&shared, &read) == 0)
        #expect(read.generation == 3 && read.played == 1000 && read.queued == 480 && read.stamp_ns == 1_000_000_000)
        ckeepalived_carry_player_write(&shared, ckeepalived_carry_player(written: 77, state: 1, generation: 2))
        var player = ckeepalived_carry_player()
        #expect(ckeepalived_carry_player_read(&shared, &player) == 0)
        #expect(player.written == 77 && player.state == 1 && player.generation == 2)
        // A writer that never finishes (an odd count): the reader gives up rather than wait.
        shared.player_sequence += 1
        #expect(ckeepalived_carry_player_read(&shared, &player) == -1)
    }

    @Test("the frames before the next one is heard: the buffer's, and a card's own delay past it (a USB card's packets) up to a quarter second")
    func heardThroughTheCard() {
        // The loopback: snd_pcm_delay is the buffer's fill.
        #expect(CarryStateMachine.heard(fill: 4800, delay: 4800, rate: 48000) == 4800)
        // A USB card 2 ms of packets behind its buffer: the player is told those too, as on hw:.
        #expect(CarryStateMachine.heard(fill: 4800, delay: 4896, rate: 48000) == 4896)
        // The position moved between the two reads, or no delay read: the fill.
        #expect(CarryStateMachine.heard(fill: 4800, delay: 4790, rate: 48000) == 4800)
        #expect(CarryStateMachine.heard(fill: 4800, delay: nil, rate: 48000) == 4800)
        // A delay no card has is bounded.
        #expect(CarryStateMachine.heard(fill: 4800, delay: 1 << 30, rate: 48000) == 4800 + 12000)
        // The position published from it: what the card has still to play is not played yet.
        // (firstFrames' card: 240 of the signal, then the player's 2400.)
        var machine = carrying(lead: 1920)
        _ = machine.looked(player: counters(2400), fill: 1900)
        machine.performed(rewound: 1660, music: 2400, signal: 0)
        #expect(machine.position(fill: CarryStateMachine.heard(fill: 2640, delay: 2736, rate: 48000))
            == .init(generation: 0, played: 0, queued: 2400, ahead: 336))
        #expect(machine.position(fill: CarryStateMachine.heard(fill: 1400, delay: 1496, rate: 48000))
            == .init(generation: 0, played: 904, queued: 1496, ahead: 0))
    }
}

/// On a card that takes IEC 60958 subframes, where each player's frame lands: its frame `n` of a
/// generation is frame `n % 192` of a channel-status block, and the card's blocks run on
/// unbroken, so it must land where the card's block count agrees.
@Suite("Carrying a player in IEC 60958 blocks")
struct CarryBlocksTests {
    let levels = CarryStateMachine.Levels(minimumLead: 240, lowWater: 480, highWater: 1920)

    func counters(_ written: UInt64, _ state: ckeepalived_carry_player_state = CKEEPALIVED_CARRY_RUNNING, generation: UInt32 = 0) -> ckeepalived_carry_player {
        ckeepalived_carry_player(written: written, state: state.rawValue, generation: generation)
    }

    @Test("the card's frames count in blocks from the origin; without blocks there are none")
    func blockFrames() {
        let machine = CarryStateMachine(levels: levels, leadFrames: 300, blocks: .init(origin: 100))
        #expect(machine.blockFrame(at: 0) == 100)
        #expect(machine.blockFrame(at: 92) == 0)
        #expect(machine.blockFrame(at: 300) == 16)
        #expect(machine.blockFrame(at: -100) == 0)
        #expect(CarryStateMachine(levels: levels, leadFrames: 300).blockFrame(at: 7) == nil)
        #expect(CarryStateMachine(levels: levels, leadFrames: 300).padding(before: 5, rewound: 0) == 0)
    }

    @Test("the first frame waits for a block's start: the padding is the signal up to it, less than a block")
    func firstFrame() {
        // The lead's end (card frame 1920) is frame (100 + 1920) % 192 = 100 of a block; taken back
        // to 240 it is frame (100 + 240) % 192 = 148: 44 of the signal, then the player's frame 0.
        var machine = CarryStateMachine(levels: levels, leadFrames: 1920, blocks: .init(origin: 100))
        machine.granted(bufferFrames: 4800)
        #expect(machine.looked(player: counters(960), fill: 1920) == .step(.init(rewind: 1680, musicFrom: 0, music: 960)))
        #expect(machine.padding(before: 0, rewound: 1680) == 44)
        machine.performed(rewound: 1680, padding: 44, music: 960, signal: 0)
        #expect(machine.position(fill: 240 + 44 + 960) == .init(generation: 0, played: 0, queued: 960, ahead: 284))
        // Its next frames follow at once: already in their place.
        #expect(machine.looked(player: counters(1200), fill: 1000) == .step(.init(musicFrom: 960, music: 240)))
        #expect(machine.padding(before: 960, rewound: 0) == 0)
    }

    /// A seeded generator: the same run every time.
    struct Steps: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state
        }
    }

    @Test("through writes, underruns, pauses, drops and drains, every frame of the player's lands in its place in a block", arguments: [0, 37, 191])
    func everyFrameInPlace(origin: Int) {
        var random = Steps(state: UInt64(origin) + 1)
        var machine = CarryStateMachine(levels: levels, leadFrames: 1000, blocks: .init(origin: origin))
        machine.granted(bufferFrames: 4800)
        // The card's frames from the carrying's start: each a player's (generation, frame) or the signal.
        var card: [Int64: (UInt32, UInt64)] = [:]
        var fill = 1000
        var written: UInt64 = 0
        var generation: UInt32 = 0
        var state = CKEEPALIVED_CARRY_RUNNING
        for _ in 0..<2000 {
            switch Int.random(in: 0..<20, using: &random) {
            case 0: state = CKEEPALIVED_CARRY_PAUSED
            case 1:
                generation += 1
                written = 0
                state = CKEEPALIVED_CARRY_RUNNING
            case 2: state = CKEEPALIVED_CARRY_DRAINING
            case 3...5: break  // nothing new written: the card runs down to the signal
            default:
                if state != CKEEPALIVED_CARRY_DRAINING { state = CKEEPALIVED_CARRY_RUNNING }
                written += UInt64.random(in: 1...900, using: &random)
            }
            guard case .step(let step) = machine.looked(player: counters(written, state, generation: generation), fill: fill) else {
                // Written past its buffer: not this test's case; the player starts over.
                Issue.record("a look broke the stream")
                return
            }
            let rewound = min(step.rewind, max(0, fill - levels.minimumLead))
            let padding = step.music > 0 ? machine.padding(before: step.musicFrom, rewound: rewound) : 0
            #expect(padding < 192)
            var at = machine.cardWritten - Int64(rewound)
            for frame in at..<machine.cardWritten { card[frame] = nil }
            at += Int64(padding)
            for index in 0..<step.music {
                let frame = step.musicFrom + UInt64(index)
                card[at + Int64(index)] = (generation, frame)
                #expect(machine.blockFrame(at: at + Int64(index)) == Int(frame % 192), "generation \(generation) frame \(frame)")
            }
            machine.performed(rewound: rewound, padding: padding, music: step.music, signal: step.signal)
            fill = fill - rewound + padding + step.music + step.signal
            // The card plays between looks: at most all but the lead.
            fill -= Int.random(in: 0...max(0, min(fill - levels.minimumLead, 1500)), using: &random)
        }
        #expect(!card.isEmpty)
    }
}
