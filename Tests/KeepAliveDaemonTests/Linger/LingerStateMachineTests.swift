import Testing

import KeepAlive
@testable import KeepAliveDaemon
import TestSupport

/// `--linger`'s decisions, without a server: fed views and instants, checked by the actions.
@Suite("Linger state machine")
struct LingerStateMachineTests {
    private let start = ContinuousClock.now
    private let linger = Duration.seconds(10)

    private func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    private func view(own: UInt32? = 1, others: [(sink: UInt32, corked: Bool)] = [], defaultSink: UInt32? = 1) -> LingerView {
        var streams = others.map { LingerView.Stream(sink: $0.sink, isCorked: $0.corked, isOwn: false) }
        if let own { streams.append(LingerView.Stream(sink: own, isCorked: false, isOwn: true)) }
        return LingerView(streams: streams, sinks: [1, 2], defaultSink: defaultSink)
    }

    /// Started at 0, the server answered at once with nothing else playing: paused at 10.
    private func pausedAfterTheFirstWindow() -> LingerStateMachine {
        var machine = LingerStateMachine(duration: linger)
        _ = machine.start(at: at(0))
        _ = machine.serverChanged(view(), at: at(0.1))
        _ = machine.timerFired(at: at(10))
        return machine
    }

    @Test("at start the window runs from start: nothing else plays, so the output is paused at the deadline")
    func pausesAfterTheFirstWindow() {
        var machine = LingerStateMachine(duration: linger)
        #expect(machine.start(at: at(0)) == .armTimer(at(10)))
        #expect(machine.serverChanged(view(), at: at(0.1)) == .armTimer(at(10)))
        #expect(machine.serverChanged(view(), at: at(0.2)) == .none)
        #expect(machine.timerFired(at: at(5)) == .armTimer(at(10)), "an early timer rearms, never pauses")
        #expect(machine.timerFired(at: at(10)) == .pause)
        #expect(machine.isPaused)
        #expect(machine.timerFired(at: at(20)) == .none, "paused: nothing more to do")
    }

    @Test("another stream resets the window: paused only the linger time after it stopped")
    func anotherStreamKeepsItAwake() {
        var machine = LingerStateMachine(duration: linger)
        _ = machine.start(at: at(0))
        _ = machine.serverChanged(view(), at: at(0.1))
        #expect(machine.serverChanged(view(others: [(1, false)]), at: at(2)) == .cancelTimer)
        #expect(machine.othersPlaying)
        #expect(machine.timerFired(at: at(10)) == .none, "no pause while another stream plays")
        #expect(machine.serverChanged(view(), at: at(12)) == .armTimer(at(22)))
        #expect(machine.timerFired(at: at(22)) == .pause)
    }

    @Test("while paused, a new stream on the sink resumes at once; one on another sink or corked does not")
    func resumesOnANewStream() {
        var machine = pausedAfterTheFirstWindow()
        // Paused: keepalived's own stream is gone; the sink it last used is watched.
        #expect(machine.serverChanged(view(own: nil, defaultSink: 2), at: at(11)) == .none)
        #expect(machine.sink == 1)
        #expect(machine.serverChanged(view(own: nil, others: [(2, false)], defaultSink: 2), at: at(12)) == .none)
        #expect(machine.serverChanged(view(own: nil, others: [(1, true)], defaultSink: 2), at: at(13)) == .none)
        #expect(machine.serverChanged(view(own: nil, others: [(1, false)], defaultSink: 2), at: at(14)) == .resume)
        #expect(!machine.isPaused)
        // Once it stops again, the window starts from then.
        #expect(machine.serverChanged(view(), at: at(16)) == .armTimer(at(26)))
    }

    @Test("without a known sink of its own, the server's default sink is watched")
    func watchesTheDefaultSink() {
        var machine = LingerStateMachine(duration: linger)
        _ = machine.start(at: at(0))
        #expect(machine.serverChanged(view(own: nil, others: [(2, false)], defaultSink: 2), at: at(1)) == .cancelTimer)
        #expect(machine.sink == 2)
    }

    @Test("a lost server resumes a paused output and stops the clock; the window restarts when it answers")
    func failsSafe() {
        var machine = pausedAfterTheFirstWindow()
        #expect(machine.serverLost() == .resume)
        #expect(!machine.isConnected && !machine.isPaused)
        #expect(machine.timerFired(at: at(30)) == .none)
        #expect(machine.serverChanged(view(), at: at(31)) == .armTimer(at(41)))
        #expect(machine.timerFired(at: at(41)) == .pause)
    }

    @Test("no pause before the server answered: blind pausing could let a busy sink sleep")
    func neverPausesBlind() {
        var machine = LingerStateMachine(duration: linger)
        _ = machine.start(at: at(0))
        #expect(machine.timerFired(at: at(10)) == .none)
        #expect(!machine.isPaused)
        // It answers after the start's window: a whole new window from then.
        #expect(machine.serverChanged(view(), at: at(12)) == .armTimer(at(22)))
        #expect(machine.timerFired(at: at(22)) == .pause)
    }
}
