/// Keeps keepalived's own streams on the sinks their outputs name. A server may move a stream on
/// its own: PulseAudio's module-switch-on-connect moves the default sink's streams to a device
/// just plugged in, which took a monitor's keep-alive to a replugged USB DAC and let the
/// monitor's sink suspend. A stream's home is the sink it was opened for (its `keepalived.sink`
/// property), else the kept sink it is first seen on; found elsewhere while its home is still
/// there, it is moved back. The property is what a busy daemon needs: a listing that came after
/// the server had already moved a new stream (a DAC plugged in while the stream was starting)
/// first saw it on the DAC, and once the DAC was kept too, took the DAC for its home; the TV's
/// sink was left without a stream for good. A policy that moves it
/// away again at once, each time, wins after a few moves back in a row, and the stream stays
/// where it is; a move away that comes later than ``fightWindow`` after the last move back is a
/// move of its own (a client's, a device plugged in), and the count starts again: a stream moved
/// now and then by a user keeps going home however long it lives.
///
/// A stream index names a stream for one server's life only: a restarted server numbers its
/// streams from 0 again, so the homes are forgotten when the server goes away (``forgetAll()``).
/// Kept, the new TV stream that got the old DAC stream's index was sent to the DAC (`dac=2 tv=0`).
///
/// A `pulse` output plays on the default sink, wherever that is, and is never moved back: only
/// streams first seen on a sink that a sink output keeps awake get a home.
///
/// ```swift
/// var homes = StreamHomes()
/// let now = ContinuousClock.now
/// _ = homes.observe(streams: [7: "tv"], kept: ["tv"], sinks: ["tv"], at: now)                 // 7's home: tv
/// homes.observe(streams: [7: "dac"], kept: ["tv"], sinks: ["tv", "dac"], at: now)            // [Move(stream: 7, sink: "tv")]
/// homes.observe(streams: [8: "dac"], opened: [8: "tv"], kept: ["tv", "dac"], sinks: ["tv", "dac"], at: now)  // [Move(stream: 8, sink: "tv")]
/// homes.forgetAll()                                                                            // the server went away
/// ```
struct StreamHomes {
    /// A stream the server moved off its home, and the home it goes back to.
    struct Move: Equatable {
        let stream: UInt32
        let sink: String
    }

    /// Moves back in a row (each within ``fightWindow`` of the last) before a policy wins.
    static let mostMovesBack = 3
    /// How soon after a move back a move away counts as a policy undoing it. A policy that
    /// fights reacts to the move's event, in milliseconds; a user, a client or a device plugged
    /// in moves a stream seconds apart at the least.
    static let fightWindow: Duration = .seconds(1)
    /// How long a move back is given before a listing that still shows the stream away counts:
    /// the listings made until the server has done it (each of its events makes one, and a sink
    /// just plugged in makes several) show the move away that was already answered. Counted,
    /// they made a slow daemon (under ThreadSanitizer) give up after one move away as if a
    /// policy fought it, and the stream stayed on the new sink.
    static let moveBackInFlight: Duration = .milliseconds(500)

    private struct Home {
        var sink: String
        /// Moves back in a row, and when the last was asked for.
        var movesBack = 0
        var lastMoveBack: ContinuousClock.Instant?
        /// A move back asked for and not yet seen done.
        var inFlight = false
    }

    private var homes: [UInt32: Home] = [:]

    /// Takes a listing made at `now`: `streams`, each of keepalived's own sink inputs with the
    /// name of the sink it plays on now; `opened`, the sink each was opened for, where it says
    /// (a stream through ALSA's pulse plug-in, or on the default sink, does not); `kept`, the
    /// sinks that sink outputs keep awake; `sinks`, every sink the server has. Returns the
    /// streams to move back.
    mutating func observe(streams: [UInt32: String], opened: [UInt32: String] = [:], kept: Set<String>, sinks: Set<String>,
                          at now: ContinuousClock.Instant) -> [Move] {
        homes = homes.filter { streams[$0.key] != nil }
        var moves: [Move] = []
        for (stream, sink) in streams.sorted(by: { $0.key < $1.key }) {
            guard var home = homes[stream] ?? opened[stream].map({ Home(sink: $0) }) else {
                if kept.contains(sink) { homes[stream] = Home(sink: sink) }
                continue
            }
            homes[stream] = home
            if sink == home.sink {
                if home.inFlight {
                    home.inFlight = false
                    homes[stream] = home
                }
                continue
            }
            guard kept.contains(home.sink), sinks.contains(home.sink) else { continue }
            if home.inFlight, let last = home.lastMoveBack, last.duration(to: now) < Self.moveBackInFlight { continue }
            if let last = home.lastMoveBack, last.duration(to: now) > Self.fightWindow { home.movesBack = 0 }
            guard home.movesBack < Self.mostMovesBack else { continue }
            home.movesBack += 1
            home.lastMoveBack = now
            home.inFlight = true
            homes[stream] = home
            moves.append(Move(stream: stream, sink: home.sink))
        }
        return moves
    }

    /// Forgets every stream: the server went away, and the next one's indices are its own.
    mutating func forgetAll() {
        homes = [:]
    }
}
