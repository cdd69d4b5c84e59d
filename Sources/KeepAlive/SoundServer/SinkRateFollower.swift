import CPulse
import Synchronization

/// Lets a user's stream have its own rate on a PipeWire sink that keepalived's stream keeps
/// running: follows the sink's other streams on the process's ``SoundServerConnection`` and
/// carries out what ``SinkRateStateMachine`` decides. One per sink stream of keepalived's
/// (``ServerSinkPCM``), from the moment the stream is ready until it is released; on a server
/// that is not PipeWire (PulseAudio) it does nothing after its first question.
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
/// the loop looks in the box every ``answerPoll`` until it is there.
final class SinkRateFollower: SoundServerUser {
    private let connection: SoundServerConnection
    private let stream: OpaquePointer
    private var machine = SinkRateStateMachine()
    /// nil until the server said who it is.
    private var isPipeWire: Bool?
    /// A sink input listing is under way; `stale`: an event came during it.
    private var listing = false
    private var stale = false
    /// What the listing under way collected.
    private var othersPlaying = false
    private var otherRates: [UInt32] = []
    /// The question to PipeWire under way, and the timer that looks for its answer.
    private var question: ClockQuestion?
    private var answerTimer: OpaquePointer?

    /// How long a question to PipeWire may take: a user's stream plays at keepalived's rate
    /// until the answer (PipeWire answers in milliseconds; the bound is for one that does not).
    static let clockTimeout: Duration = .milliseconds(250)
    /// How often the loop looks for the answer while a question is under way.
    static let answerPoll: Duration = .milliseconds(10)

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

    func connectionReady() {
        guard isPipeWire == nil, let context = connection.context else { return list() }
        _ = cpulse_list(context, Int32(CPULSE_LIST_SERVER), { userdata, entry in
            SinkRateFollower.from(userdata).serverListed(entry?.assumingMemoryBound(to: cpulse_server.self).pointee)
        }, userdata)
    }

    func serverChanged() { list() }

    func connectionLost(_ error: String) {
        listing = false
    }

    private func serverListed(_ server: cpulse_server?) {
        // The server's entry comes once, then the end of the list (nil).
        guard let server else { return }
        let name = server.name.map { String(cString: $0) } ?? ""
        isPipeWire = name.contains("PipeWire")
        list()
    }

    /// Lists the sink inputs, once at a time: an event during a listing lists again after it.
    private func list() {
        guard isPipeWire == true, let context = connection.context else { return }
        guard !listing else {
            stale = true
            return
        }
        listing = true
        stale = false
        othersPlaying = false
        otherRates = []
        let listed = cpulse_list(context, Int32(CPULSE_LIST_SINK_INPUTS), { userdata, entry in
            SinkRateFollower.from(userdata).sinkInputListed(entry?.assumingMemoryBound(to: cpulse_sink_input.self).pointee)
        }, userdata)
        if listed < 0 { listing = false }
    }

    private func sinkInputListed(_ input: cpulse_sink_input?) {
        guard let input else { return listed() }
        guard input.sink == cpulse_stream_sink(stream), input.index != cpulse_stream_index(stream) else { return }
        if input.corked == 0 { othersPlaying = true }
        otherRates.append(input.rate)
    }

    private func listed() {
        listing = false
        if stale { return list() }
        perform(machine.streamsChanged(othersPlaying: othersPlaying, otherRates: otherRates))
    }

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
        cpulse_timer_arm(connection.loop, answerTimer, Self.answerPoll.microseconds)
    }

    private func answerArrived() {
        guard let question else { return }
        guard let clock = question.answered else {
            if let answerTimer { cpulse_timer_arm(connection.loop, answerTimer, Self.answerPoll.microseconds) }
            return
        }
        self.question = nil
        perform(machine.clockRead(clock))
    }

    /// Forgets a question under way and frees the timer: the stream is about to be released
    /// (lock held). Its thread ends on its own, its answer unread.
    func retire() {
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
    private let box = Mutex<PipeWireClock??>(nil)

    func answer(_ clock: PipeWireClock?) { box.withLock { $0 = .some(clock) } }

    var answered: PipeWireClock?? { box.withLock { $0 } }
}
