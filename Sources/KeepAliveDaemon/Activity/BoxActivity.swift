import _KeepalivedControlProtocol
import KeepAlive
import Logging
import Glibc

/// The one record of whether real audio plays on each output, and what follows from it: the
/// `--on-active` and `--on-idle` hooks, `keepalived events`, and `status`. Real audio is what
/// keepalived is told of by those who see it: the player loans (``PlayerLoans``: a player opened
/// the card device through `keepalived:`) and the sound server's listing (``ActivityWatcher``:
/// another stream plays on a sink keepalived keeps awake). Whether each output is active is the
/// library's ``OutputActivityTracker``'s to say (the one model, which embedders of the library
/// use too): this feeds it who plays where, carries out each change it returns, and wakes it at
/// its deadline through a timer in the main loop's `poll` (``timer``).
///
/// Each output's hooks and idle time are its own `--output` options' where it has them
/// (``Settings/outputs``), the global ones otherwise.
///
/// On `dmix` nothing else is known: the kernel shows one substream, opened by whichever client
/// came first, so another program's sound on the same dmix cannot be told from keepalived's own.
///
/// Hooks run one after another on a thread of their own (``SerialCalls``), never on the thread
/// that reported the audio: a hook that takes seconds delays nothing but the next hook. Per
/// output only the latest change waits to run: one that reverses a change whose hook has not
/// run yet replaces it. With
/// `--power-on-wait` a player arriving through `keepalived:` at an idle output makes it active
/// at once and waits for its `on-active` hook (``holdForPower(_:player:)``: a ``PowerOnGate``),
/// while keepalived's own stream still plays there, so the card stays awake as the amplifier
/// comes on; the release follows (``playerArrived(_:)``). A stream on a sound server's sink
/// plays as it comes: nobody's open can be held there.
///
/// ```swift
/// let activity = try BoxActivity(settings: settings, logger: logger)
/// activity.loansChanged(["hw:CARD=0,DEV=0": .init(program: "mpd", card: 0, device: 0)])
/// activity.timerFired(on: runtime.mainLoop)   // on the main loop, when `timer.descriptor` is readable
/// ```
final class BoxActivity: Sendable {
    /// What the options ask for.
    struct Settings: Equatable, Sendable {
        var idleAfter: Duration = .seconds(300)
        var onActive: Hook?
        var onIdle: Hook?
        /// How long a player's open may be held for `onActive` (`--power-on-wait`); nil: never.
        var powerOnWait: Duration?
        /// How long after `onActive` ends the open still waits (`--power-on-settle`); without
        /// `onActive`, how long after `--cec` wakes the receiver.
        var powerOnSettle: Duration = .zero
        /// `--cec`: the box's first active output wakes a receiver (``CECFollower``).
        var cecWakes = false
        /// The outputs' own hooks and idle times (`--output 'NAME --on-active …'`), by output.
        var outputs: [String: OutputHooks] = [:]
        /// `--carry`: a player's audio is carried on keepalived's own stream (``PlayerCarrying``).
        var carriesPlayers = false

        /// `output`'s `--on-active`: its own, else the global one.
        func onActive(for output: String) -> Hook? { outputs[output]?.onActive ?? onActive }
        /// `output`'s `--on-idle`: its own, else the global one.
        func onIdle(for output: String) -> Hook? { outputs[output]?.onIdle ?? onIdle }
        /// `output`'s `--on-idle-after`: its own, else the global one.
        func idleAfter(for output: String) -> Duration { outputs[output]?.idleAfter ?? idleAfter }
    }

    /// What one `--output` says of its own activity; nil follows the global option.
    struct OutputHooks: Equatable, Sendable {
        var onActive: Hook?
        var onIdle: Hook?
        var idleAfter: Duration?
    }

    /// Who plays on an output, and where that is.
    struct Player: Equatable, Sendable {
        var program: String
        var card: Int?
        var device: Int?
        var sink: String?
    }

    let logger: Logger
    let timer: IntervalTimer
    /// The lines for `keepalived events`, read by the control socket's thread.
    let events: EventLines

    private struct State: Sendable {
        var settings: Settings
        var loans: [String: Player] = [:]
        var streams: [String: Player] = [:]
        /// Players whose audio an output carries on its own stream and sends sound (``PlayerCarrying``), by output.
        var carried: [String: Player] = [:]
        /// Who played last on each output: what an `idle` names.
        var last: [String: Player] = [:]
        /// Players held at an output's door while the power comes on, before their loan.
        var arriving: [String: Player] = [:]
        /// The hold each of those outputs is under: a second player at the same door waits for
        /// the same one.
        var holds: [String: PowerOnGate] = [:]
        /// Outputs woken by a "power on now" (``wake(_:program:)``), for the moment of the wake.
        var woken: [String: Player] = [:]
    }

    private let state: Locked<State>
    /// Active or idle, by output: fed and advanced only with ``state``'s lock held, so its
    /// changes are carried out in the order they happen.
    let tracker: OutputActivityTracker
    private let hooks = SerialCalls(threadName: "keepalive-hook")
    /// The hook runs waiting for the hook thread: one per output, the latest change's. A change
    /// that comes before the one it reverses had its hook run replaces it (flapping with slow
    /// hooks queues nothing more), and a run whose event is the last one run on its output is
    /// skipped (the amplifier is already as it asks).
    private let pendingHooks = Locked(PendingHooks())
    /// The power path as `--mqtt` publishes it: the last hook's run, set by the hook thread.
    private let lastHook = Locked<PowerReport.HookRun?>(nil)
    /// Told when a hook starts or ends (`--mqtt`'s publisher): they must not wait.
    private let powerObservers = Locked<[@Sendable () -> Void]>([])

    private struct PendingHook: Sendable {
        var event: String
        var hook: Hook
        var environment: [String: String]
        var gate: PowerOnGate?
    }

    private struct PendingHooks: Sendable {
        /// Outputs with a run waiting, in the order their first change came.
        var order: [String] = []
        var byOutput: [String: PendingHook] = [:]
        /// The event whose hook ran last on each output.
        var lastRun: [String: String] = [:]
    }
    /// Told when the box as a whole becomes active (the first output) or idle (the last one),
    /// under the lock, so in order: `--cec` (``CECFollower``). It must not wait. `gate`: a
    /// player's open held for the receiver's wake, for it to end one run of once the wake is
    /// confirmed (or nothing is under way).
    private let boxChanged: (@Sendable (_ active: Bool, _ gate: PowerOnGate?) -> Void)?

    /// - Throws: `Errno` when the system refuses a timer.
    init(settings: Settings, logger: Logger, boxChanged: (@Sendable (_ active: Bool, _ gate: PowerOnGate?) -> Void)? = nil) throws(Errno) {
        self.logger = logger
        timer = try IntervalTimer()
        events = try EventLines()
        state = Locked(State(settings: settings), order: .boxActivity)
        tracker = OutputActivityTracker(idleAfter: settings.idleAfter, idleAfterByOutput: settings.outputs.compactMapValues(\.idleAfter))
        self.boxChanged = boxChanged
    }

    /// A reload's settings: a new `--on-idle-after` applies from the next silence.
    func apply(_ settings: Settings) {
        state.withLock { state in
            guard state.settings != settings else { return }
            state.settings = settings
            // Kept as they are (active or idle); a silence under way is timed anew from now.
            tracker.setIdleAfter(settings.idleAfter, byOutput: settings.outputs.compactMapValues(\.idleAfter))
            armTimer()
        }
    }

    /// The outputs players have through `keepalived:` now (any thread).
    func loansChanged(_ loans: [String: Player]) {
        update { $0.loans = loans }
    }

    /// Why a player at `outputs` is handed the card rather than carried (`--carry`); nil when it
    /// may be carried. Not while its open is to be held for the power (`--power-on-wait` on idle
    /// outputs), which the hand-over's release does.
    func whyNotCarried(at outputs: [String]) -> String? {
        state.withLock { state in
            guard state.settings.carriesPlayers else { return "--no-carry" }
            guard !outputs.isEmpty else { return "no output of keepalived's plays on that device" }
            guard state.settings.powerOnWait == nil || outputs.contains(where: { tracker.activity(of: $0).isActive }) else {
                return "the box was idle: its open is held while the power comes on (--power-on-wait)"
            }
            return nil
        }
    }

    /// A player whose audio `outputs` carry is sound now (`sounding`), or silence, or gone (any
    /// thread): the samples decide, not the open (``CarriedSoundStateMachine``).
    func carriedChanged(_ outputs: [String], player: Player, sounding: Bool) {
        update { state in
            for output in outputs {
                if sounding { state.carried[output] = player } else if state.carried[output] == player { state.carried[output] = nil }
            }
        }
    }

    /// The outputs on whose sink another stream plays now (any thread).
    func streamsChanged(_ streams: [String: Player]) {
        update { $0.streams = streams }
    }

    /// A player asks for `outputs` (the card device it opens): with `--power-on-wait`, when they
    /// are all idle, they become active now, `on-active` runs, and the gate returned says when
    /// the player may have them (the hook's end and `--power-on-settle`; with `--cec` and no
    /// hook, the receiver's wake confirmed, then the settle: it is woken as the box becomes
    /// active). nil when
    /// nothing is held: no `--power-on-wait`, no output, one already active (once per active
    /// period, not per track), or nothing to switch on (no hook, and `--cec` has nothing to
    /// wake on a box already active). Until ``playerArrived(_:)`` the player counts as
    /// playing there, and a second player at the same outputs meanwhile gets the same gate.
    func holdForPower(_ outputs: [String], player: Player) -> PowerOnGate? {
        let now = ContinuousClock.now
        return state.withLock { state in
            // A player arriving while another is held for the same output waits for the same
            // power: released at once, it would play before the amplifier is on.
            for output in outputs { if let held = state.holds[output], !held.isOpen(at: now) { return held } }
            guard let wait = state.settings.powerOnWait, !outputs.isEmpty,
                  outputs.allSatisfy({ !tracker.activity(of: $0).isActive }) else { return nil }
            let hook = outputs.contains { state.settings.onActive(for: $0) != nil }
            guard hook || (state.settings.cecWakes && tracker.activeOutputs.isEmpty) else { return nil }
            let gate: PowerOnGate
            do {
                gate = try PowerOnGate(deadline: now + wait, settle: state.settings.powerOnSettle,
                                       waitingFor: hook ? "--on-active still runs" : "the receiver's wake is not confirmed (--cec)")
            } catch {
                logger.warning("cannot hold the player's open while the power comes on: it plays at once", metadata: ["error": "\(error)"])
                return nil
            }
            // Without a hook the wait is --cec's: the wake goes out as the box becomes active,
            // below, and its confirmation ends this run (CECAdapter).
            if !hook { gate.addRun() }
            let handed = update(&state, now: now, gate: gate, cecGate: hook ? nil : gate) { state in
                for output in outputs {
                    state.arriving[output] = player
                    state.holds[output] = gate
                }
            }
            if !hook, !handed { gate.runEnded(at: now) }
            return gate
        }
    }

    /// The players held by ``holdForPower(_:player:)`` on `outputs` went on: their loans (told
    /// before this) take over, or, when the release was not applied, the outputs fall silent.
    func playerArrived(_ outputs: [String]) {
        update { state in
            for output in outputs {
                state.arriving[output] = nil
                state.holds[output] = nil
            }
        }
    }

    /// The program a wake names in the hooks' `KEEPALIVED_PROGRAM`, `status` and `events`.
    static let wakeProgram = "home-automation"

    /// "Power on now" (home automation's button): `outputs` become active as if `program` had
    /// played there a moment, so the `on-active` hooks and `--cec`'s wake run as at the box's
    /// own active, and they go idle after their `--on-idle-after` unless real audio plays
    /// meanwhile. An output where real audio plays is left as it is.
    func wake(_ outputs: [String], program: String) {
        let now = ContinuousClock.now
        state.withLock { state in
            update(&state, now: now, gate: nil) { state in
                for output in outputs { state.woken[output] = Player(program: program) }
            }
            update(&state, now: now, gate: nil) { $0.woken = [:] }
        }
    }

    /// "Standby now" (home automation's button): outputs whose audio stopped go idle at once,
    /// their `on-idle` hooks and `--cec`'s standby running as at the end of their silence;
    /// outputs where real audio plays stay active. Returns those, with who plays there.
    @discardableResult
    func endSilences() -> [String: String] {
        let now = ContinuousClock.now
        return state.withLock { state in
            let activeBefore = tracker.activeOutputs
            carryOut(tracker.endSilences(at: now), activeBefore: activeBefore, &state, cutShort: true)
            armTimer()
            return Self.players(state).mapValues(\.program)
        }
    }

    /// The idle timer fired: on the main loop, whose `poll` watches the timer.
    func timerFired(on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("BoxActivity.timerFired")
        _ = timer.acknowledge()
        state.withLock { state in
            let activeBefore = tracker.activeOutputs
            carryOut(tracker.advance(), activeBefore: activeBefore, &state)
            armTimer()
        }
    }

    /// The power path: the hooks' last run, and the outputs whose players wait for the power.
    struct PowerReport: Codable, Equatable, Sendable {
        struct HookRun: Codable, Equatable, Sendable {
            /// `active` or `idle`: which hook.
            var event: String
            var output: String
            /// `running`, `done`, or why it failed (`exit 3`, `signal 9`, `timed out`, …).
            var state: String
        }
        var hook: HookRun?
        /// Outputs whose players are held while the power comes on (`--power-on-wait`).
        var held: [String]?
    }

    /// The power path now; nil while no hook has run and nothing is held.
    var powerReport: PowerReport? {
        let now = ContinuousClock.now
        let held = state.withLock { state in state.holds.filter { !$0.value.isOpen(at: now) }.keys.sorted() }
        let hook = lastHook.withLock { $0 }
        guard hook != nil || !held.isEmpty else { return nil }
        return PowerReport(hook: hook, held: held.isEmpty ? nil : held)
    }

    /// Calls `observer` when a hook starts or ends, on the hook thread.
    func observePower(_ observer: @escaping @Sendable () -> Void) {
        powerObservers.withLock { $0.append(observer) }
    }

    private func hookRan(_ run: PowerReport.HookRun) {
        lastHook.withLock { $0 = run }
        for observer in powerObservers.withLock({ $0 }) { observer() }
    }

    /// What `status` shows of `output`: idle, with no time, until real audio was first seen there.
    func report(for output: String) -> ActivityReport {
        let now = ContinuousClock.now
        func seconds(_ duration: Duration) -> Double { (max(0, duration.seconds) * 10).rounded() / 10 }
        switch tracker.activity(of: output) {
        case .idle(let since):
            return ActivityReport(state: "idle", sinceSeconds: since.map { seconds($0.duration(to: now)) })
        case .active(let since, let program, let idleAt):
            return ActivityReport(state: "active", sinceSeconds: seconds(since.duration(to: now)), program: program,
                                  idleInSeconds: idleAt.map { seconds(now.duration(to: $0)) })
        }
    }

    /// Waits for the hooks queued so far (tests).
    func finishHooks() { hooks.waitUntilDone() }

    /// Waits for the hooks running or queued at the daemon's stop, at most `timeout`: an
    /// on-idle that a change just queued still switches the amplifier off. False when some
    /// still ran then.
    func finishHooks(within timeout: Duration) -> Bool { hooks.waitUntilDone(within: timeout) }

    private func update(_ change: (inout State) -> Void) {
        let now = ContinuousClock.now
        _ = state.withLock { state in update(&state, now: now, gate: nil, change) }
    }

    /// `gate`: what the `on-active` hooks this change sets off open (one for the outputs of one
    /// card device); `cecGate`: what `--cec`'s wake opens. True when `cecGate` was handed on.
    @discardableResult
    private func update(_ state: inout State, now: ContinuousClock.Instant, gate: PowerOnGate?, cecGate: PowerOnGate? = nil,
                        _ change: (inout State) -> Void) -> Bool {
        change(&state)
        let players = Self.players(state)
        for (output, player) in players { state.last[output] = player }
        let activeBefore = tracker.activeOutputs
        let handed = carryOut(tracker.update(players.mapValues(\.program), at: now), activeBefore: activeBefore, &state, gate: gate, cecGate: cecGate)
        armTimer()
        return handed
    }

    /// A loan's player first: it has the card itself; then one keepalived carries; one at the
    /// door is about to; a stream on the sink is the server's.
    private static func players(_ state: State) -> [String: Player] {
        state.woken.merging(state.streams) { _, stream in stream }.merging(state.arriving) { _, arriving in arriving }.merging(state.carried) { _, carried in carried }
            .merging(state.loans) { _, loan in loan }
    }

    /// The tracker's changes, in order: the log, `keepalived events`, the hooks; and the box as
    /// a whole (`--cec`) once its first output became active or its last one idle.
    /// `gate`: the held open that waits for the `on-active` hooks, if any; `cecGate`: the one
    /// that waits for `--cec`'s wake, handed on with the box becoming active (true then);
    /// `cutShort`: the idle changes are a "standby now", not a silence's end.
    /// `activeBefore`: the tracker's active outputs before the call that made `changes` (read
    /// under the same lock, so nothing changed them in between).
    @discardableResult
    private func carryOut(_ changes: [OutputActivityTracker.Change], activeBefore: Set<String>, _ state: inout State, gate: PowerOnGate? = nil,
                          cecGate: PowerOnGate? = nil, cutShort: Bool = false) -> Bool {
        guard !changes.isEmpty else { return false }
        let activeNow = tracker.activeOutputs
        for change in changes {
            let output = change.output
            let player = state.last[output] ?? Player(program: change.program)
            switch change.kind {
            case .active where change.program == Self.wakeProgram:
                logger.notice("woken by home automation: active", metadata: ["device": "\(output)"])
                announce("active", output: output, player: player, hook: state.settings.onActive(for: output), gate: gate)
            case .active:
                logger.notice("real audio plays: active", metadata: ["device": "\(output)", "program": "\(change.program)"])
                announce("active", output: output, player: player, hook: state.settings.onActive(for: output), gate: gate)
            case .idle where cutShort:
                logger.notice("standby asked by home automation: idle", metadata: ["device": "\(output)"])
                announce("idle", output: output, player: player, hook: state.settings.onIdle(for: output))
            case .idle:
                logger.notice("no real audio for \(state.settings.idleAfter(for: output).spoken): idle", metadata: ["device": "\(output)"])
                announce("idle", output: output, player: player, hook: state.settings.onIdle(for: output))
            }
        }
        guard activeBefore.isEmpty != activeNow.isEmpty, let boxChanged else { return false }
        let handed = activeBefore.isEmpty ? cecGate : nil
        boxChanged(!activeNow.isEmpty, handed)
        return handed != nil
    }

    private func announce(_ event: String, output: String, player: Player, hook: Hook?, gate: PowerOnGate? = nil) {
        let now = Duration.reading(of: CLOCK_REALTIME)
        let line = ActivityEvent(event: event, output: output, program: player.program, card: player.card, device: player.device,
                                 sink: player.sink, time: Double(now.wholeMilliseconds) / 1000)
        events.publish(line)
        guard let hook else { return }
        var environment = ["KEEPALIVED_EVENT": event, "KEEPALIVED_OUTPUT": output, "KEEPALIVED_PROGRAM": player.program]
        if let card = player.card { environment["KEEPALIVED_CARD"] = "\(card)" }
        if let device = player.device { environment["KEEPALIVED_DEVICE"] = "\(device)" }
        if let sink = player.sink { environment["KEEPALIVED_SINK"] = sink }
        gate?.addRun()
        let (superseded, first) = pendingHooks.withLock { pending -> (PendingHook?, Bool) in
            let superseded = pending.byOutput.updateValue(PendingHook(event: event, hook: hook, environment: environment, gate: gate), forKey: output)
            if superseded == nil { pending.order.append(output) }
            return (superseded, superseded == nil)
        }
        if let superseded {
            logger.info("a hook that had not run yet is superseded by a newer change", metadata: [
                "device": "\(output)", "superseded": "\(superseded.event)", "event": "\(event)"])
            superseded.gate?.runEnded(at: .now)
        }
        // One call per output waiting: the queue is bounded by the outputs.
        guard first else { return }
        hooks.enqueue { [self] in runNextHook() }
    }

    /// Runs the hook of the output that waited longest (the hook thread).
    private func runNextHook() {
        let next = pendingHooks.withLock { pending -> (String, PendingHook, Bool)? in
            guard !pending.order.isEmpty else { return nil }
            let output = pending.order.removeFirst()
            guard let run = pending.byOutput.removeValue(forKey: output) else { return nil }
            return (output, run, pending.lastRun[output] == run.event)
        }
        guard let (output, run, repeated) = next else { return }
        if repeated {
            logger.info("hook not run again: its output is already \(run.event)", metadata: ["device": "\(output)", "event": "\(run.event)"])
        } else {
            hookRan(PowerReport.HookRun(event: run.event, output: output, state: "running"))
            let outcome = run.hook.run(environment: run.environment, logger: logger)
            hookRan(PowerReport.HookRun(event: run.event, output: output, state: Self.words(outcome)))
            // Only a hook that did its work counts as the output's state: a failed one runs again
            // at the next change to the same event.
            pendingHooks.withLock { $0.lastRun[output] = outcome == .exited(0) ? run.event : nil }
        }
        run.gate?.runEnded(at: .now)
    }

    /// A hook's outcome as the power path says it.
    static func words(_ outcome: Hook.Outcome) -> String {
        switch outcome {
        case .exited(0): "done"
        case .exited(let code): "exit \(code)"
        case .signaled(let signal): "signal \(signal)"
        case .timedOut: "timed out"
        case .notStarted(let error): "not started: \(error)"
        case .abandoned: "abandoned past its timeout"
        }
    }

    private func armTimer() {
        guard let deadline = tracker.nextDeadline else { return timer.disarm() }
        timer.arm(after: max(ContinuousClock.now.duration(to: deadline), .milliseconds(1)))
    }
}
