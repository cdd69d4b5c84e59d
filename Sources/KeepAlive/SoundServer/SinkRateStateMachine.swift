/// Every decision a sink stream of keepalived's makes about its sink's rate on PipeWire, without
/// I/O: when a user's stream starts on the sink, give the graph the rate PipeWire would have
/// given it without keepalived. ``SinkRateFollower`` feeds it what the server shows and carries
/// out the one ``Action`` each event returns.
///
/// Why it is needed: PipeWire picks a graph's rate only while its driver is idle (the nearest
/// allowed rate to its largest stream's), and keeps it while any stream runs. keepalived's stream
/// always runs, so without this a user's 48 kHz track joined a graph running at 44.1 kHz and was
/// resampled, where without keepalived the sink would have been idle and switched to 48 kHz.
/// When the first other stream starts, the follower reads PipeWire's clock settings and, if they
/// let the graph follow its streams, asks for the rate PipeWire's rule gives the other streams
/// (`node.force-rate` on keepalived's own stream: the graph is reconfigured at once), then takes
/// the request back, so that nothing of keepalived's stays forced. While another stream already
/// runs, nothing is asked: without keepalived the graph would keep its rate then too.
///
/// ```swift
/// var machine = SinkRateStateMachine()
/// machine.streamsChanged(othersPlaying: true, otherRates: [48000])   // .readClock([48000])
/// machine.clockRead(clock, otherRates: [48000])                      // .force(48000)
/// machine.forceAnswered()                                            // .release
/// ```
package struct SinkRateStateMachine: Sendable {
    /// What the follower must do.
    package enum Action: Equatable, Sendable {
        /// Nothing.
        case none
        /// Read PipeWire's clock settings, then call ``clockRead(_:otherRates:)`` with these
        /// rates (the other streams' on the sink).
        case readClock(otherRates: [UInt32])
        /// Ask for this rate on keepalived's stream (`node.force-rate`, with `node.rate` to
        /// match), then call ``forceAnswered()`` once the server answers.
        case force(UInt32)
        /// Take the request back (`node.force-rate` 0): the graph keeps the rate it runs at.
        case release
    }

    private enum State: Equatable, Sendable {
        /// No other stream plays on the sink: keepalived's alone keeps it running.
        case alone
        /// Other streams play: the graph's rate is theirs, as it would be without keepalived.
        case accompanied
        /// The clock is being read for streams that just started.
        case reading
        /// A rate was asked for and not answered yet; `othersPlay`: what the server shows since.
        case forcing(othersPlay: Bool)
    }

    private var state = State.alone

    package init() {}

    /// Whether a rate request is under way (read, asked or not answered yet).
    package var isChoosing: Bool {
        switch state {
        case .reading, .forcing: true
        case .alone, .accompanied: false
        }
    }

    /// The sink's other streams changed: whether any of them plays (is not corked), and the
    /// rates of all of them (PipeWire takes the largest rate of every stream linked to the
    /// sink, playing or not).
    package mutating func streamsChanged(othersPlaying: Bool, otherRates: [UInt32]) -> Action {
        switch state {
        case .alone:
            guard othersPlaying else { return .none }
            state = .reading
            return .readClock(otherRates: otherRates)
        case .accompanied:
            if !othersPlaying { state = .alone }
            return .none
        case .reading:
            preconditionFailure("SinkRateStateMachine: streams changed while the clock was being read")
        case .forcing:
            state = .forcing(othersPlay: othersPlaying)
            return .none
        }
    }

    /// The clock settings read for ``Action/readClock(otherRates:)`` (nil: PipeWire could not be
    /// asked). A rate is asked for only when the settings let the graph follow its streams.
    package mutating func clockRead(_ clock: PipeWireClock?, otherRates: [UInt32]) -> Action {
        guard state == .reading else { preconditionFailure("SinkRateStateMachine: a clock read nobody asked for") }
        guard let clock, clock.followsStreams else {
            state = .accompanied
            return .none
        }
        state = .forcing(othersPlay: true)
        return .force(clock.rate(forStreamsAt: otherRates))
    }

    /// The server answered the rate request (applied or not): take it back.
    package mutating func forceAnswered() -> Action {
        guard case .forcing(let othersPlay) = state else { preconditionFailure("SinkRateStateMachine: an answer to no request") }
        state = othersPlay ? .accompanied : .alone
        return .release
    }
}
