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
/// machine.streamsChanged(othersPlaying: true, otherRates: [48000])   // .readClock
/// machine.clockRead(clock)                                           // .force(48000)
/// machine.forceAnswered()                                            // .release
/// ```
package struct SinkRateStateMachine: Sendable {
    /// What the follower must do.
    package enum Action: Equatable, Sendable {
        /// Nothing.
        case none
        /// Read PipeWire's clock settings, off the connection's thread (an answer can take the
        /// question's whole timeout, and the sink streams' writes wait on that thread's lock),
        /// then call ``clockRead(_:)``. The streams may change meanwhile: say so as usual.
        case readClock
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
        /// The clock is being read for streams that just started; what the server shows since
        /// (whether others play, and their rates).
        case reading(othersPlay: Bool, otherRates: [UInt32])
        /// A rate was asked for and not answered yet; `othersPlay`: what the server shows since.
        case forcing(othersPlay: Bool)
    }

    private var state = State.alone

    package init() {}

    /// Whether a rate request is under way (read, asked or not answered yet).
    var isChoosing: Bool {
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
            state = .reading(othersPlay: true, otherRates: otherRates)
            return .readClock
        case .accompanied:
            if !othersPlaying { state = .alone }
            return .none
        case .reading:
            // The answer decides with what the server shows when it comes.
            state = .reading(othersPlay: othersPlaying, otherRates: otherRates)
            return .none
        case .forcing:
            state = .forcing(othersPlay: othersPlaying)
            return .none
        }
    }

    /// The clock settings read for ``Action/readClock`` (nil: PipeWire could not be asked). A
    /// rate is asked for only when the settings let the graph follow its streams and the other
    /// streams still play; it is the rate for their rates now.
    package mutating func clockRead(_ clock: PipeWireClock?) -> Action {
        guard case .reading(let othersPlay, let otherRates) = state else {
            preconditionFailure("SinkRateStateMachine: a clock read nobody asked for")
        }
        guard othersPlay else {
            // They stopped while the clock was read: keepalived's stream is alone again.
            state = .alone
            return .none
        }
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
