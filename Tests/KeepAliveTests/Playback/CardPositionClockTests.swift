import Testing
@testable import KeepAlive

/// When a card's position read by keepalived was true: what a carried player's delay and
/// htimestamp count on from (carry-sync measured it on the loopback).
@Suite("A card's position and when it was true")
struct CardPositionClockTests {
    static let ms: Int64 = 1_000_000

    /// A card at 48 kHz whose position moves in 4 ms steps, as snd-aloop's at HZ=250: what it
    /// says when read at `t` (ns), and when that became true.
    static func stepped(at t: Int64) -> (position: Int64, since: Int64) {
        let since = t / (4 * ms) * (4 * ms)
        return (since * 48000 / 1_000_000_000, since)
    }

    @Test("reads anywhere in a 4 ms step: once a second's reads have met a step's start, each is dated within 0.5 ms of its step, never after the read")
    func steppedCard() {
        var clock = CardPositionClock(rate: 48000)
        var worst: Int64 = 0
        // One read every 2.9 ms: its phase in the step comes round through the whole step.
        for k in Int64(0)..<400 {
            let t = 1_000 * Self.ms + k * 2_900_000
            let card = Self.stepped(at: t)
            let valid = clock.validAt(position: card.position, readAt: t)
            #expect(valid <= t)
            #expect(valid >= card.since - Self.ms / 100)
            if k >= 40 { worst = max(worst, valid - card.since) }
        }
        #expect(worst <= Self.ms / 2)
    }

    @Test("a card whose position is true when read: dated at the read; a read whose clock came 2 ms late is dated back by that")
    func continuousCard() {
        var clock = CardPositionClock(rate: 48000)
        for k in Int64(0)..<100 {
            let t = 5_000 * Self.ms + k * 23 * Self.ms
            let late: Int64 = k == 60 ? 2 * Self.ms : 0
            let valid = clock.validAt(position: t * 48000 / 1_000_000_000, readAt: t + late)
            #expect(abs(valid - t) <= 30_000, "read \(k): dated \(valid - t) ns from when its position was true")
        }
    }

    @Test("a card that stopped 100 ms and went on: its reads after are not dated back by the stop, nor is a position that went back")
    func stoppedCard() {
        var clock = CardPositionClock(rate: 48000)
        var t: Int64 = 1_000 * Self.ms
        var position: Int64 = 0
        for _ in 0..<20 {
            t += 10 * Self.ms
            position += 480
            _ = clock.validAt(position: position, readAt: t)
        }
        t += 100 * Self.ms  // stopped: the position did not move meanwhile
        for _ in 0..<5 {
            t += 10 * Self.ms
            position += 480
            #expect(clock.validAt(position: position, readAt: t) == t)
        }
        #expect(clock.validAt(position: position - 4800, readAt: t + Self.ms) == t + Self.ms)
    }
}
