import ServiceLifecycle

/// Whether *real* audio plays on each output, from what its callers see of it: **active** from
/// the first real audio, **idle** once none has played for an idle time (default 5 minutes).
/// Pauses between tracks, skips and format changes stay active, so whatever follows it (an
/// amplifier's relay, a receiver) is switched once per listening session, not per track.
///
/// Real audio is what others play, never the keep-alive itself: the tracker is told of it by
/// whoever sees it (``update(_:at:)``: every output that plays now, and by which program). The
/// keepalived daemon tells it of each player's open through `keepalived:` and of each other
/// stream on a sound server's sink it keeps awake; a daemon that embeds ``KeepAliveManager``
/// tells it what it knows itself, such as its own player starting and stopping.
///
/// Each change is returned by the call that caused it and published on ``changes``, in order.
/// Idle comes with time: ``run()`` (a `Service` for a `ServiceGroup`) advances the tracker at
/// each deadline, or a caller that waits in `poll` calls ``advance(to:)`` at ``nextDeadline``.
///
/// ```swift
/// let activity = OutputActivityTracker(idleAfter: .seconds(600))
/// Task {
///     for await change in activity.changes {
///         print(change)   // active output=hw:CARD=DAC,DEV=0 program=announcer
///     }
/// }
/// activity.update(["hw:CARD=DAC,DEV=0": "announcer"])   // the announcement starts
/// activity.update([:])                                  // and ends: idle 10 minutes later
/// try await activity.run()                              // until cancelled or shut down
/// ```
public final class OutputActivityTracker: Service, Sendable {
    /// One output becoming active or idle.
    public struct Change: Sendable, Equatable, CustomStringConvertible {
        /// Which way the output went.
        public enum Kind: String, Sendable, Equatable {
            /// Real audio started on an idle output.
            case active
            /// No real audio played for the output's idle time.
            case idle
        }

        /// The output, as its caller named it (a device or sink name).
        public let output: String
        public let kind: Kind
        /// Who plays (``Kind/active``) or played last (``Kind/idle``).
        public let program: String
        /// When it changed.
        public let at: ContinuousClock.Instant

        /// Made by the tracker; public for tests of code that reads changes.
        ///
        /// ```swift
        /// let change = OutputActivityTracker.Change(output: "hw:0,0", kind: .active, program: "mpd", at: .now)
        /// ```
        public init(output: String, kind: Kind, program: String, at: ContinuousClock.Instant) {
            self.output = output
            self.kind = kind
            self.program = program
            self.at = at
        }

        /// One line for a log.
        ///
        /// ```swift
        /// print(change)   // idle output=hw:0,0 program=mpd
        /// ```
        public var description: String { "\(kind.rawValue) output=\(output) program=\(program)" }
    }

    /// One output's activity now.
    public enum Activity: Sendable, Equatable {
        /// Nothing plays; `since` is nil until real audio was first seen there.
        case idle(since: ContinuousClock.Instant?)
        /// Real audio plays (`idleAt` nil), or played until a moment ago and the output goes idle
        /// at `idleAt` unless it plays again; `program` plays, or played last.
        case active(since: ContinuousClock.Instant, program: String, idleAt: ContinuousClock.Instant?)

        /// Whether the output is active.
        ///
        /// ```swift
        /// if activity.activity(of: "hw:0,0").isActive { print("listening") }
        /// ```
        public var isActive: Bool { if case .active = self { true } else { false } }
    }

    private struct State {
        var idleAfter: Duration
        var idleAfterByOutput: [String: Duration]
        var machines: [String: ActivityStateMachine] = [:]
        /// Who plays now, by output: the last ``update(_:at:)``. (Who played last, which an idle
        /// change names, is each output's machine's.)
        var playing: [String: String] = [:]
        /// ``run()``'s wait for a new deadline, and whether one came while it was not waiting.
        var waiter: CheckedContinuation<Void, Never>?
        var rearmed = false
        var running = false

        func idleAfter(for output: String) -> Duration { idleAfterByOutput[output] ?? idleAfter }

        var nextDeadline: ContinuousClock.Instant? { machines.values.compactMap(\.idleAt).min() }
    }

    private let state: Locked<State>
    private let broadcaster = EventBroadcaster<Change>()

    /// - Parameters:
    ///   - idleAfter: how long no real audio must play before an output is idle.
    ///   - idleAfterByOutput: outputs that take another time.
    ///
    /// ```swift
    /// let activity = OutputActivityTracker(idleAfter: .seconds(300), idleAfterByOutput: ["hdmi:CARD=PCH,DEV=0": .seconds(60)])
    /// ```
    public init(idleAfter: Duration = .seconds(300), idleAfterByOutput: [String: Duration] = [:]) {
        state = Locked(State(idleAfter: idleAfter, idleAfterByOutput: idleAfterByOutput), order: .activityTracker)
    }

    /// Every change from now on, in order; each subscriber has its own bounded buffer (the
    /// newest 256 changes are kept for one that does not keep up), and publishing never waits.
    ///
    /// ```swift
    /// for await change in activity.changes where change.kind == .idle { print("\(change.output) idle") }
    /// ```
    public var changes: AsyncStream<Change> { broadcaster.subscribe() }

    /// Which outputs have real audio now, by the program that plays there: the whole picture
    /// (an output left out plays nothing). Returns the changes it caused, also published.
    ///
    /// ```swift
    /// activity.update(["hw:0,0": "mpd", "pulse:DEVICE=tv": "Firefox"])
    /// ```
    @discardableResult
    public func update(_ playing: [String: String], at now: ContinuousClock.Instant = .now) -> [Change] {
        state.withLock { state in
            let deadline = state.nextDeadline
            let before = state.playing
            state.playing = playing
            var changes: [Change] = []
            for output in Set(before.keys).union(playing.keys).sorted() where before[output] != playing[output] {
                if state.machines[output] == nil { state.machines[output] = ActivityStateMachine(idleAfter: state.idleAfter(for: output)) }
                let action: ActivityStateMachine.Action
                if let program = playing[output] {
                    action = state.machines[output]!.audioStarted(by: program, at: now)
                } else {
                    action = state.machines[output]!.audioStopped(at: now)
                }
                changes += Self.changes(action, output: output, at: now)
            }
            return finish(&state, changes, deadlineBefore: deadline)
        }
    }

    /// Outputs whose silence lasted their idle time go idle. Returns the changes, also published.
    ///
    /// ```swift
    /// if let deadline = activity.nextDeadline, deadline <= .now { activity.advance() }
    /// ```
    @discardableResult
    public func advance(to now: ContinuousClock.Instant = .now) -> [Change] {
        state.withLock { state in
            let deadline = state.nextDeadline
            var changes: [Change] = []
            for output in state.machines.keys.sorted() {
                changes += Self.changes(state.machines[output]!.timerFired(at: now), output: output, at: now)
            }
            return finish(&state, changes, deadlineBefore: deadline)
        }
    }

    /// Outputs whose audio stopped go idle now, without waiting out their idle time (a user's
    /// "standby now"); outputs where real audio plays stay active. Returns the changes, also
    /// published.
    ///
    /// ```swift
    /// let idled = activity.endSilences()   // the amplifier may go off now
    /// ```
    @discardableResult
    public func endSilences(at now: ContinuousClock.Instant = .now) -> [Change] {
        state.withLock { state in
            let deadline = state.nextDeadline
            var changes: [Change] = []
            for output in state.machines.keys.sorted() {
                changes += Self.changes(state.machines[output]!.silenceEnded(at: now), output: output, at: now)
            }
            return finish(&state, changes, deadlineBefore: deadline)
        }
    }

    /// New idle times (a reload). Active and idle outputs stay as they are; a silence under way
    /// is timed anew from `now` with its output's new time.
    ///
    /// ```swift
    /// activity.setIdleAfter(.seconds(60))
    /// ```
    public func setIdleAfter(_ idleAfter: Duration, byOutput: [String: Duration] = [:], at now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            let deadline = state.nextDeadline
            state.idleAfter = idleAfter
            state.idleAfterByOutput = byOutput
            for (output, old) in state.machines where old.idleAfter != state.idleAfter(for: output) {
                let report = old.report
                var machine = ActivityStateMachine(idleAfter: state.idleAfter(for: output))
                if report.active { _ = machine.audioStarted(by: report.program ?? "?", at: report.since ?? now) }
                if report.active, state.playing[output] == nil { _ = machine.audioStopped(at: now) }
                state.machines[output] = machine
            }
            _ = finish(&state, [], deadlineBefore: deadline)
        }
    }

    /// When the next output goes idle if nothing plays meanwhile; nil when none is quieting.
    ///
    /// ```swift
    /// let wait = activity.nextDeadline.map { ContinuousClock.now.duration(to: $0) }
    /// ```
    public var nextDeadline: ContinuousClock.Instant? { state.withLock { $0.nextDeadline } }

    /// The outputs active now.
    ///
    /// ```swift
    /// let amplifierOn = !activity.activeOutputs.isEmpty
    /// ```
    public var activeOutputs: Set<String> {
        state.withLock { state in Set(state.machines.filter { $0.value.report.active }.keys) }
    }

    /// `output`'s activity now.
    ///
    /// ```swift
    /// if case .active(let since, let program, _) = activity.activity(of: "hw:0,0") { print("\(program) since \(since)") }
    /// ```
    public func activity(of output: String) -> Activity {
        state.withLock { state in
            guard let machine = state.machines[output] else { return .idle(since: nil) }
            let report = machine.report
            guard report.active, let since = report.since else { return .idle(since: report.since) }
            return .active(since: since, program: report.program ?? "?", idleAt: machine.idleAt)
        }
    }

    /// Advances the tracker at each deadline until the task is cancelled or its service group
    /// shuts down gracefully; for a caller that does not call ``advance(to:)`` itself. One run
    /// at a time.
    ///
    /// ```swift
    /// let group = ServiceGroup(services: [activity, KeepAliveService(manager: manager)], logger: logger)
    /// try await group.run()
    /// ```
    public func run() async throws {
        state.withLock { state in
            precondition(!state.running, "OutputActivityTracker.run() is already running")
            state.running = true
        }
        defer { state.withLock { $0.running = false } }
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                self.advance()
                let deadline = self.nextDeadline
                await withTaskGroup(of: Void.self) { group in
                    if let deadline { group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) } }
                    group.addTask { await self.rearmed() }
                    await group.next()
                    group.cancelAll()
                }
            }
        }
    }

    // MARK: - Private

    /// The change an action reports.
    private static func changes(_ action: ActivityStateMachine.Action, output: String, at now: ContinuousClock.Instant) -> [Change] {
        switch action {
        case .none, .armTimer, .cancelTimer: []
        case .becameActive(let program): [Change(output: output, kind: .active, program: program, at: now)]
        case .becameIdle(let program): [Change(output: output, kind: .idle, program: program, at: now)]
        }
    }

    /// Publishes `changes` in order (under the lock: two callers' changes never cross), and
    /// wakes ``run()`` when the earliest deadline moved.
    private func finish(_ state: inout State, _ changes: [Change], deadlineBefore: ContinuousClock.Instant?) -> [Change] {
        for change in changes { broadcaster.publish(change) }
        if state.nextDeadline != deadlineBefore {
            if let waiter = state.waiter {
                state.waiter = nil
                waiter.resume()
            } else {
                state.rearmed = true
            }
        }
        return changes
    }

    /// Returns when a deadline moved (or at once if one moved since the last wait), or when the
    /// task is cancelled.
    private func rearmed() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.rearmed || Task.isCancelled {
                        state.rearmed = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
