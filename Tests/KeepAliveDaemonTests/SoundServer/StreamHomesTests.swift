import Testing
@testable import KeepAliveDaemon

/// Which of keepalived's own streams go back to their sinks, from listings alone.
@Suite("StreamHomes: streams the server moved go back")
struct StreamHomesTests {
    typealias Move = StreamHomes.Move
    let t0 = ContinuousClock.now

    @Test("a stream moved to a device just plugged in goes back to its sink; the new sink's own stream stays")
    func switchOnConnect() {
        var homes = StreamHomes()
        #expect(homes.observe(streams: [1: "tv", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0).isEmpty)
        // The DAC unplugged: its stream is gone with its output.
        #expect(homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv"], at: t0).isEmpty)
        // Plugged in again: the server moves the monitor's stream to it, then the new output's comes.
        #expect(homes.observe(streams: [1: "dac2"], kept: ["tv"], sinks: ["tv", "dac2"], at: t0) == [Move(stream: 1, sink: "tv")])
        #expect(homes.observe(streams: [1: "tv", 5: "dac2"], kept: ["tv", "dac2"], sinks: ["tv", "dac2"], at: t0).isEmpty)
    }

    @Test("a stream the server moved before any listing saw it goes back to the sink it was opened for, even once the new sink is kept too")
    func movedBeforeFirstSeen() {
        // Without the stream's own word: first seen on the DAC, kept a moment later, the DAC
        // taken for its home: the TV's sink was left without a stream (a full run's flake).
        var unnamed = StreamHomes()
        #expect(unnamed.observe(streams: [1: "dac", 2: "speakers"], kept: ["tv", "speakers"], sinks: ["tv", "speakers", "dac"], at: t0).isEmpty)
        #expect(unnamed.observe(streams: [1: "dac", 2: "speakers", 3: "dac"], kept: ["tv", "speakers", "dac"], sinks: ["tv", "speakers", "dac"],
                                at: t0 + .milliseconds(300)).isEmpty)
        // With it (keepalived.sink): moved back at the first sight, and home from then on.
        var homes = StreamHomes()
        let opened: [UInt32: String] = [1: "tv", 2: "speakers", 3: "dac"]
        #expect(homes.observe(streams: [1: "dac", 2: "speakers"], opened: opened, kept: ["tv", "speakers"], sinks: ["tv", "speakers", "dac"], at: t0)
            == [Move(stream: 1, sink: "tv")])
        #expect(homes.observe(streams: [1: "tv", 2: "speakers", 3: "dac"], opened: opened, kept: ["tv", "speakers", "dac"], sinks: ["tv", "speakers", "dac"],
                              at: t0 + .milliseconds(300)).isEmpty)
        // Moved again later by a client: back again.
        #expect(homes.observe(streams: [1: "speakers", 2: "speakers", 3: "dac"], opened: opened, kept: ["tv", "speakers", "dac"],
                              sinks: ["tv", "speakers", "dac"], at: t0 + .seconds(5)) == [Move(stream: 1, sink: "tv")])
    }

    @Test("a stream opened for a sink no output keeps now, or one that is gone, stays where the server put it")
    func openedForUnkeptSink() {
        var homes = StreamHomes()
        #expect(homes.observe(streams: [1: "speakers"], opened: [1: "tv"], kept: ["speakers"], sinks: ["tv", "speakers"], at: t0).isEmpty)
        #expect(homes.observe(streams: [1: "speakers"], opened: [1: "tv"], kept: ["tv", "speakers"], sinks: ["speakers"], at: t0).isEmpty)
    }

    @Test("a pulse output's stream follows the default sink: never moved back")
    func defaultSink() {
        var homes = StreamHomes()
        #expect(homes.observe(streams: [3: "tv"], kept: [], sinks: ["tv", "dac"], at: t0).isEmpty)
        #expect(homes.observe(streams: [3: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: t0).isEmpty, "first seen on no kept sink: no home")
    }

    @Test("a home that is gone, or no longer kept, calls for no move")
    func homeGone() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv"], at: t0)
        #expect(homes.observe(streams: [1: "speakers"], kept: ["tv"], sinks: ["speakers"], at: t0).isEmpty, "its sink vanished: the server rescued the stream")
        var dropped = StreamHomes()
        _ = dropped.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv"], at: t0)
        #expect(dropped.observe(streams: [1: "speakers"], kept: [], sinks: ["tv", "speakers"], at: t0).isEmpty, "no output keeps tv any more")
    }

    @Test("a policy that moves it away each time wins after a few moves back")
    func policyWins() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv", "dac"], at: t0)
        // Each move back done and undone at once: seen home, then away again.
        for round in 0..<StreamHomes.mostMovesBack {
            let now = t0 + .milliseconds(10 * round)
            #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: now) == [Move(stream: 1, sink: "tv")])
            #expect(homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv", "dac"], at: now + .milliseconds(2)).isEmpty)
        }
        #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: t0 + .milliseconds(50)).isEmpty)
    }

    @Test("a policy that moves it away before a listing saw it home also wins, once each move back had its time")
    func policyWinsUnseen() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv", "dac"], at: t0)
        let step = StreamHomes.moveBackInFlight + .milliseconds(100)
        for round in 0..<StreamHomes.mostMovesBack {
            #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: t0 + step * round) == [Move(stream: 1, sink: "tv")])
        }
        #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: t0 + step * StreamHomes.mostMovesBack).isEmpty)
    }

    @Test("a move back not yet done: the listings that still show the stream away ask for nothing more and count nothing")
    func moveBackInFlight() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0)
        // switch-on-connect moved the TV's stream to the DAC just plugged in; the DAC's own
        // stream and the server's events make listing after listing before the move back is done.
        #expect(homes.observe(streams: [1: "dac", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0) == [Move(stream: 1, sink: "tv")])
        for ms in [5, 10, 20, 40, 80] {
            #expect(homes.observe(streams: [1: "dac", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0 + .milliseconds(ms)).isEmpty, "\(ms) ms")
        }
        #expect(homes.observe(streams: [1: "tv", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0 + .milliseconds(120)).isEmpty)
        // A client's move a few seconds later is undone again.
        #expect(homes.observe(streams: [1: "dac", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0 + .seconds(5)) == [Move(stream: 1, sink: "tv")])
    }

    @Test("a stream that ended is forgotten: a new stream with its index gets a home of its own")
    func forgotten() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0)
        _ = homes.observe(streams: [:], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0)
        #expect(homes.observe(streams: [1: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0).isEmpty)
    }

    @Test("moves away seconds apart are each undone, however many: only moves back in a row within the fight window count")
    func userMovesNowAndThen() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv", "dac"], at: t0)
        for round in 1...(StreamHomes.mostMovesBack * 3) {
            let now = t0 + StreamHomes.fightWindow * (Double(round) * 1.5)
            #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: now) == [Move(stream: 1, sink: "tv")], "round \(round)")
            #expect(homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv", "dac"], at: now).isEmpty)
        }
    }

    @Test("a policy that won loses again to a move away after the fight window")
    func policyWinsForAWhile() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv", "dac"], at: t0)
        for round in 0..<StreamHomes.mostMovesBack {
            _ = homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: t0 + .milliseconds(10 * round))
            _ = homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv", "dac"], at: t0 + .milliseconds(10 * round + 2))
        }
        #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: t0 + StreamHomes.fightWindow / 2).isEmpty)
        #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: t0 + StreamHomes.fightWindow * 2) == [Move(stream: 1, sink: "tv")])
    }

    @Test("a restarted server numbers its streams again: forgotten, the new TV stream with the old DAC stream's index stays on the TV")
    func serverRestarted() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [0: "tv", 1: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0)
        homes.forgetAll()
        // The new server's first listing: the TV's stream was made first this time.
        #expect(homes.observe(streams: [1: "tv", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0).isEmpty)
        #expect(homes.observe(streams: [1: "dac", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: t0) == [Move(stream: 1, sink: "tv")])
    }
}
