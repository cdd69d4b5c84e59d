/// Keeps keepalived's own streams on the sinks their outputs name. A server may move a stream on
/// its own: PulseAudio's module-switch-on-connect moves the default sink's streams to a device
/// just plugged in, which took a monitor's keep-alive to a replugged USB DAC and let the
/// monitor's sink suspend. A stream's home is the sink it is first seen on, the one its output
/// named; found elsewhere while its home is still there, it is moved back, a few times at most:
/// a policy that moves it away again each time wins, and the stream stays where it is.
///
/// A `pulse` output plays on the default sink, wherever that is, and is never moved back: only
/// streams first seen on a sink that a sink output keeps awake get a home.
///
/// ```swift
/// var homes = StreamHomes()
/// _ = homes.observe(streams: [7: "tv"], kept: ["tv"], sinks: ["tv"])              // 7's home: tv
/// homes.observe(streams: [7: "dac"], kept: ["tv"], sinks: ["tv", "dac"])          // [Move(stream: 7, sink: "tv")]
/// ```
struct StreamHomes {
    /// A stream the server moved off its home, and the home it goes back to.
    struct Move: Equatable {
        let stream: UInt32
        let sink: String
    }

    static let mostMovesBack = 3

    private var homes: [UInt32: (sink: String, movesBack: Int)] = [:]

    /// Takes a listing: `streams`, each of keepalived's own sink inputs with the name of the sink
    /// it plays on now; `kept`, the sinks that sink outputs keep awake; `sinks`, every sink the
    /// server has. Returns the streams to move back.
    mutating func observe(streams: [UInt32: String], kept: Set<String>, sinks: Set<String>) -> [Move] {
        homes = homes.filter { streams[$0.key] != nil }
        var moves: [Move] = []
        for (stream, sink) in streams.sorted(by: { $0.key < $1.key }) {
            guard let home = homes[stream] else {
                if kept.contains(sink) { homes[stream] = (sink, 0) }
                continue
            }
            guard sink != home.sink, kept.contains(home.sink), sinks.contains(home.sink),
                  home.movesBack < Self.mostMovesBack else { continue }
            homes[stream] = (home.sink, home.movesBack + 1)
            moves.append(Move(stream: stream, sink: home.sink))
        }
        return moves
    }
}
