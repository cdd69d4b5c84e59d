/// Every decision one output makes about faults: what a fault means, whether it can be repaired
/// on the open stream, how long to wait before reopening, when an outage starts and ends, and
/// what to tell the manager. A value type without I/O, in the shape of swift-nio's state
/// machines: one ``State`` whose cases carry their data, one mutating function per event that
/// returns the one ``Action`` the playback thread carries out, and an event that cannot happen
/// in the current state a precondition failure.
///
/// ```swift
/// var machine = RecoveryStateMachine(retry: RetryPolicy(), seed: 1)
/// let action = machine.streamFailed(-EPIPE, message: "write: Broken pipe", dryAt: nil, seen: [], at: now)
/// // action == .repair(.prepare, Fault(reason: .underrun, message: "write: Broken pipe", state: .recovering(.underrun)))
/// ```
///
/// The rules:
/// - A fault seen on the stream that the stream can survive (an underrun, a suspend) is repaired
///   in place: ``Repair/prepare`` or ``Repair/resume``. A second such fault before audio flowed
///   again means in-place repair does not work: reopen.
/// - Anything else closes the device; it is opened again after the next backoff delay (see
///   ``RetryPolicy``), at once after a sound server's socket appeared (it restarted), or soon
///   after a card's node appeared.
/// - An outage runs from its first fault (or from when the buffer ran dry, for an underrun seen
///   late) to the first audio that flows again, and is reported under its most telling reason
///   (``InterruptionReason/specificity``).
/// - A sound server whose socket was created again, while the stream played or at any moment of
///   an outage, restarted: the outage is `server-gone`, the stream is reopened rather than
///   repaired in place, and the reopen waits only ``settleDelay``, never a backoff step.
/// - The backoff starts over after ``RetryPolicy/stablePeriod`` of playback.
/// - Each state change is reported once; a device that opens but fails at once is announced
///   (``Action/announceOpen``) once, not on every retry.
struct RecoveryStateMachine {
    /// What the playback thread does next, and what it tells the manager.
    enum Action: Equatable {
        /// Nothing: go on as before.
        case none
        /// The device opened and is worth announcing.
        case announceOpen
        /// Audio flows: report the state `playing` and the outage that ended, if there was one.
        case play(recovered: Recovery?)
        /// Report the fault, then repair the open stream in place.
        case repair(Repair, Fault)
        /// Report the fault, if any (none when the watcher cut a wait short), close the device
        /// and open it again after `delay` (a card or server appearing may end the wait sooner).
        case reopen(after: Duration, Fault?)
        /// Report the state `stopped`: the thread ends.
        case stop
    }

    /// An in-place repair of the open stream.
    enum Repair: Equatable {
        /// Empty the buffer and start the stream again from the signal's first frame.
        case prepare
        /// Continue a suspended stream (prepare when the device cannot resume).
        case resume
    }

    /// A fault to report (every fault is reported; the manager logs each distinct one once).
    struct Fault: Equatable {
        var reason: InterruptionReason
        var message: String
        /// The output's new state, when the fault changed it.
        var state: KeepAliveState?
    }

    /// An outage that ended.
    struct Recovery: Equatable {
        var reason: InterruptionReason
        var downtime: Duration
    }

    /// Where the output stands. Readable (by the tests), written only by the events below.
    enum State: Equatable {
        /// Not played yet. `announced`: an open was announced already.
        case starting(announced: Bool)
        /// Audio flows, since `since`. `announced`: the device was opened again (for a new
        /// configuration) and announced since.
        case playing(since: ContinuousClock.Instant, announced: Bool)
        /// No audio flows since a fault.
        case outage(Outage)
        /// The thread was asked to stop: no event follows.
        case stopped
    }

    /// An outage under way: from its first fault to the first audio that flows again.
    struct Outage: Equatable {
        /// Its most telling reason so far (not always the one ``shown``).
        var reason: InterruptionReason
        /// When playback stopped.
        var since: ContinuousClock.Instant
        /// The state reported to the manager: recovering or waiting for the device.
        var shown: KeepAliveState
        /// An in-place repair was tried since audio last flowed: another fault means reopen.
        var repairedInPlace = false
        /// An open was announced during the outage: retries are not announced again.
        var announced = false
    }

    private(set) var state: State = .starting(announced: false)
    /// The retries' delays, beside `state` rather than in it: its policy is configuration, and
    /// its step counts across outages and the playback between them (it starts over only after
    /// a stable period), so every state would have to carry it.
    private var backoff: Backoff

    /// How long to let udev finish a new node's permissions, or a restarted server settle,
    /// before opening.
    static let settleDelay: Duration = .milliseconds(10)

    init(retry: RetryPolicy, seed: UInt64) {
        self.backoff = Backoff(policy: retry, seed: seed)
    }

    /// The state last reported to the manager.
    var reportedState: KeepAliveState {
        switch state {
        case .starting: .starting
        case .playing: .playing
        case .outage(let outage): outage.shown
        case .stopped: .stopped
        }
    }

    // MARK: - Events

    /// About to open the device. Only what the watcher sees from now on may cut the next wait
    /// short; `seen` is what it saw before (a server's socket sharpens an outage's reason).
    mutating func attemptingOpen(seen: DeviceChanges) {
        switch state {
        case .starting, .playing:
            break
        case .outage(var outage):
            outage.note(seen)
            state = .outage(outage)
        case .stopped:
            preconditionFailure("an open attempted after the output stopped")
        }
    }

    /// The device opened (and its parameters were accepted).
    mutating func opened() -> Action {
        switch state {
        case .starting(announced: false):
            state = .starting(announced: true)
        case .playing(let since, announced: false):
            state = .playing(since: since, announced: true)
        case .outage(var outage) where !outage.announced:
            outage.announced = true
            state = .outage(outage)
        case .starting, .playing, .outage:
            return .none
        case .stopped:
            preconditionFailure("the device opened after the output stopped")
        }
        return .announceOpen
    }

    /// Opening or configuring failed with `code`.
    mutating func openFailed(_ code: Int32, message: String, seen: DeviceChanges, at now: ContinuousClock.Instant) -> Action {
        let reason = InterruptionReason(openError: code)
        let outage = begin(reason, since: nil, seen: seen, at: now)
        // An unplugged device or a vanished server's socket is missing until it comes back; say
        // what happened rather than the symptom.
        var shown = reason
        if reason == .noDevice, outage.reason == .unplugged || outage.reason == .serverGone { shown = outage.reason }
        let fault = enter(outage, showing: .waitingForDevice(shown), Fault(reason: reason, message: message))
        return .reopen(after: nextDelay(seen), fault)
    }

    /// The signal cannot be played in the device's format (a sine at or above half its rate):
    /// a setting to change, not a fault to retry quickly.
    mutating func cannotRender(message: String, at now: ContinuousClock.Instant) -> Action {
        let outage = begin(.unknown, since: nil, seen: [], at: now)
        let fault = enter(outage, showing: .waitingForDevice(.unknown), Fault(reason: .unknown, message: message))
        return .reopen(after: backoff.policy.maximumDelay, fault)
    }

    /// Audio reached the device (a write went through, a ring started, a held device is
    /// ready). The steady-state call: it allocates nothing, and changes nothing once the output
    /// plays.
    mutating func flowing(at now: ContinuousClock.Instant) -> Action {
        switch state {
        case .playing:
            return .none
        case .starting:
            state = .playing(since: now, announced: false)
            return .play(recovered: nil)
        case .outage(let outage):
            state = .playing(since: now, announced: false)
            return .play(recovered: Recovery(reason: outage.reason, downtime: outage.since.duration(to: now)))
        case .stopped:
            preconditionFailure("audio flowed after the output stopped")
        }
    }

    /// The open stream failed with `code` (a write, an avail, a poll's error). `dryAt`: when the
    /// buffer ran out, if that was before now (the start of an underrun's silence).
    mutating func streamFailed(_ code: Int32, message: String, dryAt: ContinuousClock.Instant?,
                               seen: DeviceChanges, at now: ContinuousClock.Instant) -> Action {
        let reason = InterruptionReason(streamError: code)
        let since = reason == .underrun ? dryAt : nil
        // No prepare on the old connection survives a server that restarted under the stream
        // (its socket was created again): reopen.
        guard reason == .underrun || reason == .suspended, !seen.contains(.server) else {
            return lost(reason, message, since: since, seen: seen, at: now)
        }
        if case .outage(let outage) = state, outage.repairedInPlace {
            return lost(reason, "\(message), again right after recovering in place", since: nil, seen: seen, at: now)
        }
        var outage = begin(reason, since: since, seen: seen, at: now)
        outage.repairedInPlace = true
        let fault = enter(outage, showing: .recovering(outage.reason), Fault(reason: reason, message: message))
        return .repair(reason == .underrun ? .prepare : .resume, fault)
    }

    /// An in-place repair (prepare, resume) failed with `code`: the device must be reopened.
    mutating func repairFailed(_ code: Int32, message: String, at now: ContinuousClock.Instant) -> Action {
        lost(InterruptionReason(streamError: code), message, since: nil, seen: [], at: now)
    }

    /// The device must be closed and opened again. `since` is when playback really stopped,
    /// when that was before the fault was seen (a stall); nil means now.
    mutating func lost(_ reason: InterruptionReason, _ message: String, since: ContinuousClock.Instant?,
                       seen: DeviceChanges, at now: ContinuousClock.Instant) -> Action {
        let outage = begin(reason, since: since, seen: seen, at: now)
        let fault = enter(outage, showing: .recovering(outage.reason), Fault(reason: reason, message: message))
        return .reopen(after: nextDelay(seen), fault)
    }

    /// The watcher saw something while the thread waited to reopen: a card's node or a
    /// server's socket ends the wait (after ``settleDelay``); nothing seen changes nothing.
    mutating func sawWhileWaiting(_ seen: DeviceChanges) -> Action {
        guard case .outage(var outage) = state else {
            preconditionFailure("the thread waits to reopen only in an outage")
        }
        outage.note(seen)
        state = .outage(outage)
        return seen.isEmpty ? .none : .reopen(after: Self.settleDelay, nil)
    }

    /// The watcher saw something while the stream played: a sound server's socket created again
    /// means the server restarted under the stream; reopen now rather than when its plug-in
    /// notices (at keepalived's next write, up to half the buffer later, for pulse and pipewire).
    mutating func sawWhilePlaying(_ seen: DeviceChanges, at now: ContinuousClock.Instant) -> Action {
        if case .stopped = state { preconditionFailure("the watcher read after the output stopped") }
        guard seen.contains(.server) else { return .none }
        return lost(.serverGone, "the sound server's socket was created again (server restarted)", since: nil, seen: seen, at: now)
    }

    /// The thread was asked to stop.
    mutating func stopped() -> Action {
        if case .stopped = state { preconditionFailure("the output stopped twice") }
        state = .stopped
        return .stop
    }

    /// A new configuration took over: its retry policy applies from now on.
    mutating func reconfigured(retry: RetryPolicy, seed: UInt64) {
        backoff = Backoff(policy: retry, seed: seed)
    }

    // MARK: - Rules

    /// The outage a fault belongs to. The first fault of an outage starts its clock (at `since`,
    /// or now) and, after a stable period of playback, resets the backoff; later faults of the
    /// same outage only sharpen its reason. Not stored yet: ``enter(_:showing:_:)`` does.
    private mutating func begin(_ reason: InterruptionReason, since: ContinuousClock.Instant?,
                                seen: DeviceChanges, at now: ContinuousClock.Instant) -> Outage {
        var outage: Outage
        switch state {
        case .starting(let announced):
            outage = Outage(reason: reason, since: since ?? now, shown: .starting, announced: announced)
        case .playing(let playingSince, let announced):
            if playingSince.duration(to: now) >= backoff.policy.stablePeriod { backoff.reset() }
            outage = Outage(reason: reason, since: since ?? now, shown: .playing, announced: announced)
        case .outage(let current):
            outage = current
            if reason.specificity > outage.reason.specificity { outage.reason = reason }
        case .stopped:
            preconditionFailure("a fault after the output stopped")
        }
        // A server socket created since the last look, whether before this fault (a plug-in may
        // notice a replaced server only at its next period) or during an in-place repair: the
        // server is back already.
        outage.note(seen)
        return outage
    }

    /// Stores `outage`, showing `shown`; the fault to report carries the state when it changed.
    private mutating func enter(_ outage: Outage, showing shown: KeepAliveState, _ fault: Fault) -> Fault {
        var outage = outage
        var fault = fault
        if shown != outage.shown { fault.state = shown }
        outage.shown = shown
        state = .outage(outage)
        return fault
    }

    /// The wait before the next open: a server whose socket appeared is back already, so no
    /// backoff step, just time to settle.
    private mutating func nextDelay(_ seen: DeviceChanges) -> Duration {
        seen.contains(.server) ? Self.settleDelay : backoff.next()
    }
}

extension RecoveryStateMachine.Outage {
    /// A sound server's socket (re)created since the device was opened shows the server
    /// restarted: the outage is `server-gone` even if the stream only reported an underrun and
    /// the reopen works at once (PipeWire restarts in about 100 ms), and the next attempt comes
    /// without a backoff step, however far the backoff had grown over earlier crashes.
    mutating func note(_ seen: DeviceChanges) {
        if seen.contains(.server), InterruptionReason.serverGone.specificity > reason.specificity { reason = .serverGone }
    }
}
