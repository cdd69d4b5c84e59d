import Testing
@testable import KeepAliveDaemon

/// Which of keepalived's own streams go back to their sinks, from listings alone.
@Suite("StreamHomes: streams the server moved go back")
struct StreamHomesTests {
    typealias Move = StreamHomes.Move

    @Test("a stream moved to a device just plugged in goes back to its sink; the new sink's own stream stays")
    func switchOnConnect() {
        var homes = StreamHomes()
        #expect(homes.observe(streams: [1: "tv", 2: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"]).isEmpty)
        // The DAC unplugged: its stream is gone with its output.
        #expect(homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv"]).isEmpty)
        // Plugged in again: the server moves the monitor's stream to it, then the new output's comes.
        #expect(homes.observe(streams: [1: "dac2"], kept: ["tv"], sinks: ["tv", "dac2"]) == [Move(stream: 1, sink: "tv")])
        #expect(homes.observe(streams: [1: "tv", 5: "dac2"], kept: ["tv", "dac2"], sinks: ["tv", "dac2"]).isEmpty)
    }

    @Test("a pulse output's stream follows the default sink: never moved back")
    func defaultSink() {
        var homes = StreamHomes()
        #expect(homes.observe(streams: [3: "tv"], kept: [], sinks: ["tv", "dac"]).isEmpty)
        #expect(homes.observe(streams: [3: "dac"], kept: ["tv"], sinks: ["tv", "dac"]).isEmpty, "first seen on no kept sink: no home")
    }

    @Test("a home that is gone, or no longer kept, calls for no move")
    func homeGone() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv"])
        #expect(homes.observe(streams: [1: "speakers"], kept: ["tv"], sinks: ["speakers"]).isEmpty, "its sink vanished: the server rescued the stream")
        var dropped = StreamHomes()
        _ = dropped.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv"])
        #expect(dropped.observe(streams: [1: "speakers"], kept: [], sinks: ["tv", "speakers"]).isEmpty, "no output keeps tv any more")
    }

    @Test("a policy that moves it away each time wins after a few moves back")
    func policyWins() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv"], sinks: ["tv", "dac"])
        for _ in 0..<StreamHomes.mostMovesBack {
            #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"]) == [Move(stream: 1, sink: "tv")])
        }
        #expect(homes.observe(streams: [1: "dac"], kept: ["tv"], sinks: ["tv", "dac"]).isEmpty)
    }

    @Test("a stream that ended is forgotten: a new stream with its index gets a home of its own")
    func forgotten() {
        var homes = StreamHomes()
        _ = homes.observe(streams: [1: "tv"], kept: ["tv", "dac"], sinks: ["tv", "dac"])
        _ = homes.observe(streams: [:], kept: ["tv", "dac"], sinks: ["tv", "dac"])
        #expect(homes.observe(streams: [1: "dac"], kept: ["tv", "dac"], sinks: ["tv", "dac"]).isEmpty)
    }
}
