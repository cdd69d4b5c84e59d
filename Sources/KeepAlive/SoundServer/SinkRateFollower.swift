import CKeepAlivePulse

/// Lets a user's stream have its own rate on a PipeWire sink that keepalived's stream keeps
/// running: follows the sink's other streams in the process's one listing of the server
/// (``ServerListing``, through the ``SoundServerConnection``) and carries out what
/// ``SinkRateStateMachine`` decides. One per sink stream of keepalived's
/// (``ServerSinkPCM``), from the moment the stream is ready until it is released; on a server
/// that is not PipeWire (PulseAudio) it does nothing.
///
/// ```swift
/// let follower = SinkRateFollower(connection: connection, stream: stream)   // lock held
/// connection.add(follower)
/// // …
/// follower.retire()             // lock held, before the stream is released
/// connection.remove(follower)
/// ```
///
/// Concurrency: everything with the connection's lock held or on its loop's thread, but the
/// question to PipeWire: that runs on a thread of its own (it may take ``clockTimeout``, and
/// every sink stream's write waits for the loop's lock), whose one write is the answer's box;
/// the loop looks in the box after ``firstAnswerPoll``, then at twice the wait each time, at most
/// ``longestAnswerPoll`` apart, until it is there.
final class SinkRateFollower: SoundServerUser {
    private let connection: SoundServerConnection
    private let stream: OpaquePointer
    private var machine = SinkRateStateMachine()
    /// The question to PipeWire under way, and the timer that looks for its answer.
    private var question: ClockQuestion?
    private var answerTimer: OpaquePointer?
    /// How long the loop waits before it looks in the box again.
    private var answerPoll = SinkRateFollower.firstAnswerPoll

    /// How long a question to PipeWire may take: a user's stream plays at keepalived's rate
    /// until the answer (PipeWire answers in milliseconds; the bound is for one that does not).
    static let clockTimeout: Duration = .milliseconds(250)
    /// When the loop first looks for the answer: PipeWire answers in about 1.5 ms, and a user's
    /// track waits for the rate it brings (`bench/run --rates`: a 10 ms look cost it 8 ms).
    static let firstAnswerPoll: Duration = .milliseconds(2)
    /// The longest wait between two looks, for a PipeWire that is slow to answer.
    static let longestAnswerPoll: Duration = .milliseconds(20)

    init(connection: SoundServerConnection, stream: OpaquePointer) {
        self.connection = connection
        self.stream = stream
    }

    var facilities: UInt32 { UInt32(CPULSE_WATCH_SINK_INPUTS) }
    /// A stream's own reopening brings the connection back; a follower never hurries it.
    var firstRetry: Duration { SoundServerConnection.longestRetry }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> SinkRateFollower {
        Unmanaged<SinkRateFollower>.fromOpaque(userdata!).takeUnretainedValue()
    }

    func connectionReady() {}

    func serverListed(_ view: SoundServerView) {
        connection.preconditionLocked("SinkRateFollower.serverListed")
        // PulseAudio keeps a sink's rate with `avoid-resampling` or not at all: nothing to follow.
        guard view.server.contains("PipeWire") else { return }
        let sink = cpulse_stream_sink(stream), own = cpulse_stream_index(stream)
        // The user's streams on this sink: keepalived's own (this one, another output's) are no
        // sound that would have chosen the graph's rate.
        let others = view.streams.filter { $0.sink == sink && $0.index != own && !$0.isOwn }
        perform(machine.streamsChanged(othersPlaying: others.contains { !$0.isCorked }, otherRates: others.map(\.rate)))
    }

    func connectionLost(_ error: String) {}

    private func perform(_ action: SinkRateStateMachine.Action) {
        switch action {
        case .none:
            break
        case .readClock:
            ask()
        case .force(let rate):
            update("node.force-rate=\"\(rate)\" node.rate=\"1/\(rate)\"")
        case .release:
            // "0" ends the request on PipeWire 0.3. 1.0 and later read it as "this node's own
            // rate", node.rate, which the request set to the same rate: the graph stays there,
            // and the next first stream's request replaces it. (Removing the key does not reach
            // the server's node: pipewire-pulse only adds and changes a stream's properties.)
            update("node.force-rate=\"0\"")
        }
    }

    /// Asks PipeWire for its clock settings on a thread of its own; the loop's timer picks the
    /// answer up (``answerArrived()``). A thread that cannot start is an unanswered question.
    private func ask() {
        let question = ClockQuestion()
        do {
            try startDetachedThread(named: "keepalive-rate") {
                question.answer(try? PipeWireClock.read(timeout: SinkRateFollower.clockTimeout).get())
            }
        } catch {
            return perform(machine.clockRead(nil))
        }
        self.question = question
        if answerTimer == nil {
            answerTimer = cpulse_timer_new(connection.loop, { SinkRateFollower.from($0).answerArrived() }, userdata)
        }
        guard let answerTimer else {
            // No timer to pick the answer up: as a question PipeWire did not answer, rather
            // than a machine left reading for good.
            self.question = nil
            return perform(machine.clockRead(nil))
        }
        answerPoll = Self.firstAnswerPoll
        cpulse_timer_arm(connection.loop, answerTimer, answerPoll.microseconds)
    }

    private func answerArrived() {
        connection.preconditionLocked("SinkRateFollower.answerArrived")
        guard let question else { return }
        guard let clock = question.answered else {
            answerPoll = min(answerPoll * 2, Self.longestAnswerPoll)
            if let answerTimer { cpulse_timer_arm(connection.loop, answerTimer, answerPoll.microseconds) }
            return
        }
        self.question = nil
        perform(machine.clockRead(clock))
    }

    /// Forgets a question under way and frees the timer: the stream is about to be released
    /// (lock held). Its thread ends on its own, its answer unread.
    func retire() {
        connection.preconditionLocked("SinkRateFollower.retire")
        question = nil
        if let answerTimer { cpulse_timer_free(connection.loop, answerTimer) }
        answerTimer = nil
    }

    /// Not sent (the stream is failing): the stream is made again, with a new follower.
    private func update(_ properties: String) {
        _ = cpulse_stream_update_properties(stream, properties, { userdata, _ in
            SinkRateFollower.from(userdata).answered()
        }, userdata)
    }

    private func answered() {
        guard machine.isChoosing else { return }
        perform(machine.forceAnswered())
    }
}

/// One question to PipeWire about its clock: written once by the thread that asks, read by the
/// loop.
private final class ClockQuestion: Sendable {
    /// nil until answered; then the settings, or nil inside when PipeWire could not say.
    private let box = Locked<PipeWireClock??>(nil)

    func answer(_ clock: PipeWireClock?) { box.withLock { $0 = .some(clock) } }

    var answered: PipeWireClock?? { box.withLock { $0 } }
}
