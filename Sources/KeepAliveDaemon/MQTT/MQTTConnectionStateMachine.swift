/// The connection to an MQTT broker, without I/O: when to connect, how long to back off after a
/// failure (1 s, doubling to 60 s, back to 1 s once a connection was accepted), when a broker
/// that accepted TCP but never answered is given up on, and which changes are worth one journal
/// line (a change of the connection's state or of why it fails, never the same failure again).
/// `MQTTPublisher` feeds it and carries out the one ``Action`` each event returns.
///
/// ```swift
/// var machine = MQTTConnectionStateMachine()
/// machine.start(at: now)                          // .connect(deadline: now + 10 s, log: nil)
/// machine.refused("not authorised", at: now)     // .retry(at: now + 1 s, log: "… not authorised …")
/// machine.retryDue(at: now + .seconds(1))         // .connect(…, log: nil)
/// machine.accepted(at: now + .seconds(2))         // .publishEverything(log: "connected …")
/// ```
struct MQTTConnectionStateMachine: Sendable {
    /// The first wait after a failure; each failure in a row doubles it, up to ``longestWait``.
    static let firstWait = Duration.seconds(1)
    static let longestWait = Duration.seconds(60)
    /// How long a broker may take to answer a connect (TCP, TLS and CONNACK) before it is given up.
    static let answerTimeout = Duration.seconds(10)

    enum Action: Equatable, Sendable {
        case none
        /// Start connecting; give up at `deadline` (``answerTimedOut(at:)``). `log`: a line for
        /// the journal, when this is a change.
        case connect(deadline: ContinuousClock.Instant, log: String?)
        /// The broker accepted: publish every retained state again (and the availability).
        case publishEverything(log: String)
        /// Close what is left of the connection and connect again at `at`.
        case retry(at: ContinuousClock.Instant, log: String?)
        /// Publish `offline` and disconnect: the daemon stops.
        case disconnect
    }

    private enum State: Equatable, Sendable {
        case stopped
        /// `failures`: failed attempts in a row before this one; `why`: the last one's reason.
        case connecting(failures: Int, why: String?, deadline: ContinuousClock.Instant)
        case connected(since: ContinuousClock.Instant)
        case waiting(failures: Int, why: String, until: ContinuousClock.Instant)
        case stopping
    }

    private var state = State.stopped

    /// Whether the broker has accepted the connection (what `status` says).
    var isConnected: Bool {
        if case .connected = state { true } else { false }
    }

    /// Why the last attempt failed or the connection ended, until a connect is accepted.
    var lastFailure: String? {
        switch state {
        case .connecting(_, let why, _): why.map(Self.sentence)
        case .waiting(_, let why, _): Self.sentence(why)
        case .stopped, .connected, .stopping: nil
        }
    }

    /// Failed attempts in a row (0 while connected or before the first failure).
    var failuresInARow: Int {
        switch state {
        case .connecting(let failures, _, _), .waiting(let failures, _, _): failures
        case .stopped, .connected, .stopping: 0
        }
    }

    /// Whether a connect is under way: its answer (or its failure) is awaited.
    var isConnecting: Bool {
        if case .connecting = state { true } else { false }
    }

    /// The daemon starts with `--mqtt`.
    mutating func start(at now: ContinuousClock.Instant) -> Action {
        guard case .stopped = state else { preconditionFailure("MQTTConnectionStateMachine.start in \(state)") }
        let deadline = now + Self.answerTimeout
        state = .connecting(failures: 0, why: nil, deadline: deadline)
        return .connect(deadline: deadline, log: nil)
    }

    /// The broker's CONNACK accepted the connection.
    mutating func accepted(at now: ContinuousClock.Instant) -> Action {
        switch state {
        case .connecting:
            state = .connected(since: now)
            return .publishEverything(log: "MQTT: connected to the broker; publishing the box's state")
        case .stopping:
            return .none
        case .stopped, .connected, .waiting:
            preconditionFailure("MQTTConnectionStateMachine.accepted in \(state)")
        }
    }

    /// The connect failed before the broker answered (a name that does not resolve, a refused
    /// TCP connection, a TLS handshake), or the broker refused it (its CONNACK's reason: bad
    /// credentials, a client id it rejects): wait, then connect again.
    mutating func refused(_ why: String, at now: ContinuousClock.Instant) -> Action {
        switch state {
        case .connecting(let failures, let previous, _):
            return wait(failures: failures + 1, why: why, loggedWhy: previous, at: now)
        case .stopping:
            return .none
        case .stopped, .connected, .waiting:
            preconditionFailure("MQTTConnectionStateMachine.refused in \(state)")
        }
    }

    /// An accepted connection was lost (the broker went away, the network dropped, a keep-alive
    /// ping unanswered): connect again after the first wait.
    mutating func lost(_ why: String, at now: ContinuousClock.Instant) -> Action {
        switch state {
        case .connected:
            return wait(failures: 1, why: why, loggedWhy: nil, at: now)
        case .connecting(let failures, let previous, _):
            // Lost before the CONNACK: a failed attempt.
            return wait(failures: failures + 1, why: why, loggedWhy: previous, at: now)
        case .waiting, .stopping:
            return .none
        case .stopped:
            preconditionFailure("MQTTConnectionStateMachine.lost in \(state)")
        }
    }

    /// The deadline of a ``Action/connect(deadline:log:)`` passed: a broker that accepted TCP and
    /// never answered is given up on, as a refusal. Before the deadline (a stale timer): nothing.
    mutating func answerTimedOut(at now: ContinuousClock.Instant) -> Action {
        guard case .connecting(let failures, let previous, let deadline) = state else { return .none }
        guard now >= deadline else { return .none }
        return wait(failures: failures + 1, why: "the broker did not answer in \(Self.answerTimeout)", loggedWhy: previous, at: now)
    }

    /// The wait of a ``Action/retry(at:log:)`` is over. Before its end (a stale timer): nothing.
    mutating func retryDue(at now: ContinuousClock.Instant) -> Action {
        guard case .waiting(let failures, let why, let until) = state, now >= until else { return .none }
        let deadline = now + Self.answerTimeout
        state = .connecting(failures: failures, why: why, deadline: deadline)
        return .connect(deadline: deadline, log: nil)
    }

    /// The daemon stops: `offline` is published if it can be, and the connection closed.
    mutating func stop() -> Action {
        switch state {
        case .stopped, .stopping:
            return .none
        case .connecting, .connected, .waiting:
            state = .stopping
            return .disconnect
        }
    }

    /// libmosquitto's texts end with a period ("The connection was lost."): as a clause, without.
    static func sentence(_ why: String) -> String {
        var text = Substring(why)
        while text.last == "." || text.last == " " { text = text.dropLast() }
        guard let first = text.first else { return "no reason given" }
        // A capital that starts a word of one letter or a proper name stays ("TLS").
        let second = text.dropFirst().first
        return second.map { $0.isLowercase } ?? false ? first.lowercased() + text.dropFirst() : String(text)
    }

    /// The wait after `failures` failures in a row: 1 s, 2 s, 4 s … 60 s.
    static func wait(afterFailures failures: Int) -> Duration {
        var wait = firstWait
        for _ in 1..<max(failures, 1) {
            wait *= 2
            if wait >= longestWait { return longestWait }
        }
        return wait
    }

    private mutating func wait(failures: Int, why: String, loggedWhy: String?, at now: ContinuousClock.Instant) -> Action {
        let until = now + Self.wait(afterFailures: failures)
        state = .waiting(failures: failures, why: why, until: until)
        // One line per change: the same reason again (a broker down for an hour) says nothing new.
        let log = why == loggedWhy ? nil : "MQTT: cannot reach the broker: \(Self.sentence(why)); trying again in 1 s, then waiting twice as long each time, up to \(Self.longestWait.components.seconds) s"
        return .retry(at: until, log: log)
    }
}
