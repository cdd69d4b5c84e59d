import Testing

@testable import KeepAlive

@Suite("A sink's rate on PipeWire: a user's stream that starts beside keepalived's gets the rate it would get without it")
struct SinkRateStateMachineTests {
    let following = PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000])
    let fixed = PipeWireClock(defaultRate: 48000, allowedRates: [48000])

    @Test("the first other stream that plays: read the clock, ask for its rate, take the request back")
    func firstStream() {
        var machine = SinkRateStateMachine()
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100]) == .readClock)
        #expect(machine.isChoosing)
        #expect(machine.clockRead(following) == .force(44100))
        #expect(machine.forceAnswered() == .release)
        #expect(!machine.isChoosing)
        // It plays on: a second stream joining a running graph changes nothing, as without keepalived.
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100, 48000]) == .none)
    }

    @Test("a stream linked but corked is not playing: nothing yet; its rate counts once one plays")
    func corked() {
        var machine = SinkRateStateMachine()
        #expect(machine.streamsChanged(othersPlaying: false, otherRates: [96000]) == .none)
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [96000, 44100]) == .readClock)
        #expect(machine.clockRead(PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000, 96000])) == .force(96000))
    }

    @Test("after the other streams stop, the next one is followed again")
    func nextTrack() {
        var machine = SinkRateStateMachine()
        _ = machine.streamsChanged(othersPlaying: true, otherRates: [48000])
        _ = machine.clockRead(following)
        _ = machine.forceAnswered()
        #expect(machine.streamsChanged(othersPlaying: false, otherRates: []) == .none)
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100]) == .readClock)
        #expect(machine.clockRead(following) == .force(44100))
    }

    @Test("a clock that does not follow its streams (one allowed rate, a forced rate) or cannot be read: nothing is asked")
    func notFollowing() {
        for clock in [fixed, PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000], forcedRate: 44100), nil] {
            var machine = SinkRateStateMachine()
            #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100]) == .readClock)
            #expect(machine.clockRead(clock) == .none)
            #expect(!machine.isChoosing)
            #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100]) == .none)
            #expect(machine.streamsChanged(othersPlaying: false, otherRates: []) == .none)
            #expect(machine.streamsChanged(othersPlaying: true, otherRates: [48000]) == .readClock)
        }
    }

    @Test("the streams stop while the request is out: after the answer, the next stream is followed")
    func stopsWhileForcing() {
        var machine = SinkRateStateMachine()
        _ = machine.streamsChanged(othersPlaying: true, otherRates: [48000])
        #expect(machine.clockRead(following) == .force(48000))
        #expect(machine.streamsChanged(othersPlaying: false, otherRates: []) == .none)
        #expect(machine.forceAnswered() == .release)
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100]) == .readClock)
    }

    @Test("they play on while the request is out: after the answer, nothing more is asked")
    func playsWhileForcing() {
        var machine = SinkRateStateMachine()
        _ = machine.streamsChanged(othersPlaying: true, otherRates: [48000])
        _ = machine.clockRead(following)
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [48000, 44100]) == .none)
        #expect(machine.forceAnswered() == .release)
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [48000, 44100]) == .none)
    }

    @Test("a clock read nobody asked for is a precondition failure")
    func unaskedRead() async {
        await #expect(processExitsWith: .failure) {
            var machine = SinkRateStateMachine()
            _ = machine.clockRead(PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000]))
        }
    }

    @Test("an answer to no request is a precondition failure")
    func unaskedAnswer() async {
        await #expect(processExitsWith: .failure) {
            var machine = SinkRateStateMachine()
            _ = machine.forceAnswered()
        }
    }

    @Test("streams that change while the clock is read (off the loop): the answer decides on what the server shows then")
    func changeWhileReading() {
        var machine = SinkRateStateMachine()
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100]) == .readClock)
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100, 96000]) == .none)
        #expect(machine.isChoosing)
        #expect(machine.clockRead(PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000, 96000])) == .force(96000))
    }

    @Test("the other streams stop while the clock is read: nothing is asked, and the next one is followed")
    func stopWhileReading() {
        var machine = SinkRateStateMachine()
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [44100]) == .readClock)
        #expect(machine.streamsChanged(othersPlaying: false, otherRates: []) == .none)
        #expect(machine.clockRead(following) == .none)
        #expect(!machine.isChoosing)
        #expect(machine.streamsChanged(othersPlaying: true, otherRates: [48000]) == .readClock)
    }
}
