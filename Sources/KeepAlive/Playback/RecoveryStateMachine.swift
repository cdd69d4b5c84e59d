/// Every decision one output makes about faults: what a fault means, whether it can be repaired
/// on the open stream, how long to wait before reopening, when an outage starts and ends, and
/// what to tell the manager. A value type without I/O: the playback thread feeds it what
/// happened and carries out the ``Step`` it returns, in the manner of swift-nio's state machines.
///
/// ```swift
/// var machine = RecoveryStateMachine(retry: RetryPolicy(), seed: 1)
/// let step = machine.streamFailed(-EPIPE, message: "write: Broken pipe", dryAt: nil, seen: [], at: now)
/// // step.action == .prepare, step.state == .recovering(.underrun)
/// ```
///
/// The rules:
/// - A fault seen on the stream that the stream can survive (an underrun, a suspend) is repaired
///   in place: ``Action/prepare`` or ``Action/resume``. A second such fault before audio flowed
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
///   (``Step/announceOpen``) once, not on every retry.
struct RecoveryStateMachine {
    /// What the playback thread does next.
    enum Action: Equatable {
        /// Nothing: go on as before.
        case none
        /// Empty the buffer and start the stream again from the signal's first frame.
        case prepare
        /// Continue a suspended stream (prepare when the device cannot resume).
        case resume
        /// Close the device and open it again after `delay` (a card or server appearing may
        /// end the wait sooner).
        case reopen(after: Duration)
        /// Stop playing: the thread ends.
        case stop
    }

    /// What happened, for the manager: each field set only when there is something to say.
    struct Step: Equatable {
        var action: Action = .none
        /// The output's new state, when it changed.
        var state: KeepAliveState?
        /// A fault to report (every fault is reported; the manager logs each distinct one once).
        var fault: Fault?
        /// An outage that ended.
        var recovered: Recovery?
        /// The device opened and is worth announcing.
        var announceOpen = false
    }

    struct Fault: Equatable {
        var reason: InterruptionReason
        var message: String
    }

    struct Recovery: Equatable {
        var reason: InterruptionReason
        var downtime: Duration
    }

    private struct Outage {
        var reason: InterruptionReason
        var since: ContinuousClock.Instant
    }

    private(set) var state: KeepAliveState = .starting
    private var outage: Outage?
    private var playingSince: ContinuousClock.Instant?
    private var backoff: Backoff
    private let retry: RetryPolicy
    /// A sound server's socket appeared since the last attempt to open: try again at once.
    private var serverAppeared = false
    private var announceNextOpen = true
    /// In-place repairs since audio last flowed; a second one means they do not work.
    private var repairsSinceFlow = 0

    /// How long to let udev finish a new node's permissions, or a restarted server settle,
    /// before opening.
    static let settleDelay: Duration = .milliseconds(10)

    init(retry: RetryPolicy, seed: UInt64) {
        self.retry = retry
        self.backoff = Backoff(policy: retry, seed: seed)
    }

    /// Whether an outage is under way (the output is not known to play).
    var isInOutage: Bool { outage != nil }

    // MARK: - Events

    /// About to open the device. Only what the watcher sees from now on may cut the next wait
    /// short; `seen` is what it saw before.
    mutating func attemptingOpen(seen: DeviceWatcher.Seen) {
        noteServer(seen)
        serverAppeared = false
    }

    /// The device opened (and its parameters were accepted).
    mutating func opened() -> Step {
        var step = Step()
        if announceNextOpen {
            announceNextOpen = false
            step.announceOpen = true
        }
        return step
    }

    /// Opening or configuring failed with `code`.
    mutating func openFailed(_ code: Int32, message: String, seen: DeviceWatcher.Seen, at now: ContinuousClock.Instant) -> Step {
        let reason = InterruptionReason(openError: code)
        var step = begin(reason, message, since: nil, seen: seen, at: now)
        // An unplugged device or a vanished server's socket is missing until it comes back; say
        // what happened rather than the symptom.
        var shown = reason
        if reason == .noDevice, let current = outage?.reason, current == .unplugged || current == .serverGone { shown = current }
        step.state = transition(.waitingForDevice(shown))
        step.action = .reopen(after: nextDelay())
        return step
    }

    /// The signal cannot be played in the device's format (a sine at or above half its rate):
    /// a setting to change, not a fault to retry quickly.
    mutating func cannotRender(message: String, at now: ContinuousClock.Instant) -> Step {
        var step = begin(.unknown, message, since: nil, seen: [], at: now)
        step.state = transition(.waitingForDevice(.unknown))
        step.action = .reopen(after: retry.maximumDelay)
        return step
    }

    /// Audio reached the device (a write went through, a ring started, a held device is
    /// ready). The steady-state call: it allocates nothing once the output plays.
    mutating func flowing(at now: ContinuousClock.Instant) -> Step {
        repairsSinceFlow = 0
        guard outage != nil || state != .playing else { return Step() }
        var step = Step()
        if let outage {
            step.recovered = Recovery(reason: outage.reason, downtime: outage.since.duration(to: now))
            self.outage = nil
        }
        if state != .playing {
            playingSince = now
            announceNextOpen = true
            step.state = transition(.playing)
        }
        return step
    }

    /// The open stream failed with `code` (a write, an avail, a poll's error). `dryAt`: when the
    /// buffer ran out, if that was before now (the start of an underrun's silence).
    mutating func streamFailed(_ code: Int32, message: String, dryAt: ContinuousClock.Instant?,
                               seen: DeviceWatcher.Seen, at now: ContinuousClock.Instant) -> Step {
        let reason = InterruptionReason(streamError: code)
        // No prepare on the old connection survives a server that restarted under the stream
        // (its socket was created again): reopen.
        guard reason == .underrun || reason == .suspended, !seen.contains(.server) else {
            return lost(reason, message, since: reason == .underrun ? dryAt : nil, seen: seen, at: now)
        }
        repairsSinceFlow += 1
        if repairsSinceFlow > 1 {
            return lost(reason, "\(message), again right after recovering in place", since: nil, seen: seen, at: now)
        }
        var step = begin(reason, message, since: reason == .underrun ? dryAt : nil, seen: seen, at: now)
        step.state = transition(.recovering(outage?.reason ?? reason))
        step.action = reason == .underrun ? .prepare : .resume
        return step
    }

    /// An in-place repair (prepare, resume) failed with `code`: the device must be reopened.
    mutating func repairFailed(_ code: Int32, message: String, at now: ContinuousClock.Instant) -> Step {
        lost(InterruptionReason(streamError: code), message, since: nil, seen: [], at: now)
    }

    /// The device must be closed and opened again. `since` is when playback really stopped,
    /// when that was before the fault was seen (a stall); nil means now.
    mutating func lost(_ reason: InterruptionReason, _ message: String, since: ContinuousClock.Instant?,
                       seen: DeviceWatcher.Seen, at now: ContinuousClock.Instant) -> Step {
        var step = begin(reason, message, since: since, seen: seen, at: now)
        step.state = transition(.recovering(outage?.reason ?? reason))
        step.action = .reopen(after: nextDelay())
        return step
    }

    /// The watcher saw something while the thread waited to reopen: a card's node or a
    /// server's socket ends the wait (after ``settleDelay``); nothing seen changes nothing.
    mutating func sawWhileWaiting(_ seen: DeviceWatcher.Seen) -> Action {
        noteServer(seen)
        guard !seen.isEmpty else { return .none }
        serverAppeared = false
        return .reopen(after: Self.settleDelay)
    }

    /// The watcher saw something while the stream played: a sound server's socket created again
    /// means the server restarted under the stream; reopen now rather than when its plug-in
    /// notices (at keepalived's next write, up to half the buffer later, for pulse and pipewire).
    mutating func sawWhilePlaying(_ seen: DeviceWatcher.Seen, at now: ContinuousClock.Instant) -> Step {
        guard seen.contains(.server) else { return Step() }
        return lost(.serverGone, "the sound server's socket was created again (server restarted)", since: nil, seen: seen, at: now)
    }

    /// The thread was asked to stop.
    mutating func stopped() -> Step {
        var step = Step(action: .stop)
        step.state = transition(.stopped)
        return step
    }

    /// A new configuration took over: its retry policy applies from now on.
    mutating func reconfigured(retry: RetryPolicy, seed: UInt64) {
        backoff = Backoff(policy: retry, seed: seed)
    }

    // MARK: - Rules

    private mutating func transition(_ next: KeepAliveState) -> KeepAliveState? {
        guard next != state else { return nil }
        state = next
        return next
    }

    /// Records a fault. The first fault of an outage starts its clock (at `since`, or now) and,
    /// after a stable period of playback, resets the backoff; later faults of the same outage
    /// only sharpen its reason.
    private mutating func begin(_ reason: InterruptionReason, _ message: String, since: ContinuousClock.Instant?,
                                seen: DeviceWatcher.Seen, at now: ContinuousClock.Instant) -> Step {
        if var current = outage {
            if reason.specificity > current.reason.specificity {
                current.reason = reason
                outage = current
            }
        } else {
            outage = Outage(reason: reason, since: since ?? now)
            if let playingSince, playingSince.duration(to: now) >= backoff.policy.stablePeriod {
                backoff.reset()
            }
        }
        // A server socket created since the last look, whether before this fault (a plug-in may
        // notice a replaced server only at its next period) or during an in-place repair: the
        // server is back already.
        noteServer(seen)
        playingSince = nil
        return Step(fault: Fault(reason: reason, message: message))
    }

    /// A sound server's socket (re)created since the device was opened shows the server
    /// restarted: the outage is `server-gone` even if the stream only reported an underrun and
    /// the reopen works at once (PipeWire restarts in about 100 ms), and the next attempt comes
    /// without a backoff step, however far the backoff had grown over earlier crashes.
    private mutating func noteServer(_ seen: DeviceWatcher.Seen) {
        guard seen.contains(.server), var current = outage else { return }
        serverAppeared = true
        guard InterruptionReason.serverGone.specificity > current.reason.specificity else { return }
        current.reason = .serverGone
        outage = current
    }

    private mutating func nextDelay() -> Duration {
        if serverAppeared {
            // The server is back already: no backoff step, just let it settle.
            serverAppeared = false
            return Self.settleDelay
        }
        return backoff.next()
    }
}
