import _KeepalivedControlProtocol
import KeepAlive
import Logging
import Glibc

/// The card devices lent to players through the `keepalived:` PCM: the one record of what is
/// lent. It decides on their `release` on the control socket's thread, without waiting for the
/// main loop (a reload or a rescan there may take seconds; the player's open waits for the answer
/// at most 200 ms), and closes keepalived's outputs on the device on a thread of its own
/// (`keepalive-lend`): each close waits for an output's playback thread, which may be inside an
/// open that asks the control socket itself (keepalived's own front door), so the control
/// socket's thread never waits for one; it sends the reply once they are closed
/// (``OutputsClosing``). It watches the kernel on the main loop (``descriptor`` and ``timer``
/// join its `poll`) for the moment each device is free again and takes it back, in the last
/// format a player set on it.
///
/// A lent output is held closed by a ``PauseReason/lent`` pause of its own: it stays in the
/// configuration, planning never needs to know about loans, and a reload or rescan meanwhile
/// cannot reopen it. Decisions are ``LoanStateMachine``'s, taken under this object's lock.
///
/// ```swift
/// let loans = try PlayerLoans(manager: manager, scanner: scanner, logger: logger)
/// let answer = loans.release(ReleaseRequest(card: 0, device: 0, program: "mpd"), pid: 812, arrived: .now) { false }
/// loans.process(on: runtime.mainLoop)   // after poll found `descriptor` or `timer.descriptor` readable
/// ```
final class PlayerLoans: Sendable {
    /// How often a lent device is looked at while nothing happens: its player's format (set
    /// after its open, which no event reports) and its player's life.
    static let lookEvery: Duration = .seconds(1)
    /// How often, and how long, after a close: the kernel reports it just before the driver's
    /// release has run.
    static let settleEvery: Duration = .milliseconds(5)
    static let settleFor: Duration = .seconds(1)

    let logger: Logger
    private let manager: KeepAliveManager
    private let scanner: OutputScanner
    /// Told of every change of what is lent: a loan is real audio on its outputs.
    private let activity: BoxActivity?
    let timer: IntervalTimer
    private let proc: String
    /// The inotify descriptor, -1 without inotify.
    let descriptor: Int32

    /// `@unchecked Sendable`: its ``LoanWatcher`` (an inotify descriptor and pidfds, not
    /// thread-safe) is used only inside ``state``'s lock.
    private struct State: @unchecked Sendable {
        var machine = LoanStateMachine()
        /// Confined to this lock: its maps change with each release and each look.
        let watcher: LoanWatcher
        var settlingUntil: ContinuousClock.Instant?
        var reports: [LoanReport] = []
        /// The closings under way, by device: a second player's reply waits for its device's.
        var closings: [HardwareDevice: OutputsClosing] = [:]
        /// Why the last player that asked to be carried on each device was not (its release
        /// follows): shown with its loan.
        var notCarried: [HardwareDevice: (pid: Int32, why: String)] = [:]
    }

    /// Where outputs are closed for a release, one release after another: off the control
    /// socket's thread (a thread of its own while there is work, none while idle).
    private let closer = SerialCalls(threadName: "keepalive-lend")

    private let state: Locked<State>

    /// - Throws: `Errno` when the system refuses a timer.
    init(manager: KeepAliveManager, scanner: OutputScanner, activity: BoxActivity? = nil, logger: Logger, proc: String = "/proc") throws(Errno) {
        self.manager = manager
        self.scanner = scanner
        self.activity = activity
        self.logger = logger
        self.proc = proc
        timer = try IntervalTimer()
        let watcher = LoanWatcher()
        descriptor = watcher.descriptor
        state = Locked(State(watcher: watcher), order: .playerLoans)
    }

    /// The loans now, for `status` (any thread).
    var reports: [LoanReport] { state.withLock { $0.reports } }

    /// Answers a player's release on the control socket's thread: at once, or, with
    /// `--power-on-wait`, once the amplifier of an idle output is on (``BoxActivity``'s
    /// ``PowerOnGate``; keepalived still plays there meanwhile), then releases.
    func answer(_ request: ReleaseRequest, pid: Int32, arrived: ContinuousClock.Instant, hungUp: () -> Bool) -> ReleaseAnswer {
        let device = HardwareDevice(card: request.card, device: request.device)
        // A player carried there has the device as the hardware's one opener would: a second
        // one gets "busy" from the hardware, and the carried stream goes on.
        if let carried = manager.carriedPlayer(on: device) {
            return .reply(.failure("busy: keepalived carries \(carried) on this card device (--carry)"))
        }
        let player = BoxActivity.Player(program: request.program ?? "pid \(pid)", card: request.card, device: request.device)
        let outputs = scanner.outputs(on: device)
        guard let activity, let gate = activity.holdForPower(outputs, player: player) else {
            return release(request, pid: pid, arrived: arrived, hungUp: hungUp)
        }
        return .afterPowerOn(gate) { hungUp in
            defer { activity.playerArrived(outputs) }
            return self.release(request, pid: pid, arrived: .now, hungUp: hungUp)
        }
    }

    /// Decides on the release of the card device `request` names for process `pid` (the control
    /// socket's thread, without waiting for anything): answered at once when nothing is to be
    /// closed, else once keepalived's outputs there are closed, which ``closer``'s thread does.
    /// `hungUp` says whether the player has stopped waiting: a release it no longer waits for is
    /// not applied (its open went on to the hardware without it, and dropping keepalived's
    /// stream now would only leave the card without its keep-alive).
    /// The player `pid` asked to be carried on `device` and was not, `because`: its release
    /// follows, and its loan shows why (any thread).
    func notCarried(_ device: HardwareDevice, pid: Int32, because why: String) {
        state.withLock { $0.notCarried[device] = (pid, why) }
    }

    func release(_ request: ReleaseRequest, pid: Int32, arrived: ContinuousClock.Instant, hungUp: () -> Bool) -> ReleaseAnswer {
        let device = HardwareDevice(card: request.card, device: request.device)
        let holder = LoanStateMachine.Holder(pid: pid, program: request.program)
        let player = "\(request.program ?? "?") (pid \(pid))"
        guard !hungUp() else {
            logger.notice("a player's release came after it stopped waiting: not applied", metadata: [
                "device": "\(device)", "player": "\(player)", "ms": "\((ContinuousClock.now - arrived).wholeMilliseconds)"])
            return .reply(.failure("the player stopped waiting"))
        }
        // Made before anything is decided: without a descriptor to wait on, nothing is released.
        let closed: OutputsClosing
        do { closed = try OutputsClosing() } catch {
            logger.warning("cannot release a card device for a player", metadata: ["device": "\(device)", "player": "\(player)", "error": "\(error)"])
            return .reply(.failure("cannot release the device now: \(error)"))
        }
        let outputs = scanner.outputs(on: device)
        let (action, underWay) = state.withLock { state in
            let action = state.machine.releaseAsked(device, by: holder, outputs: outputs, at: ContinuousClock.now)
            switch action {
            case .lentAgain: state.watcher.follow(device, pid: pid)
            case .close:
                state.closings[device] = closed
                // Lent from now on, in status too, while its outputs close.
                publish(&state)
            case .afterClose, .alreadyLent, .nothingHeld: break
            }
            return (action, state.closings[device])
        }
        switch action {
        case .close(let closing):
            closer.enqueue { [self] in close(closing, on: device, for: pid, player: player, arrived: arrived, closed: closed) }
            return .afterClose(closed, reply: ControlReply(ok: true, released: closing))
        case .afterClose:
            guard let underWay else { preconditionFailure("a closing of \(device) the machine knows and the loans do not") }
            return .afterClose(underWay, reply: ControlReply(ok: true, released: []))
        case .alreadyLent, .lentAgain, .nothingHeld:
            return .reply(ControlReply(ok: true, released: []))
        }
    }

    /// Closes `outputs` for a release of `device` (``closer``'s thread: each returns once its
    /// output's playback thread has closed the device), then lets the replies go.
    private func close(_ outputs: [String], on device: HardwareDevice, for pid: Int32, player: String, arrived: ContinuousClock.Instant, closed: OutputsClosing) {
        for output in outputs { manager.pause(.lent, output: output) }
        let took = ContinuousClock.now - arrived
        state.withLock { state in
            state.machine.outputsClosed(device, at: ContinuousClock.now)
            state.closings[device] = nil
            state.watcher.follow(device, pid: pid)
            schedule(&state, closeSeen: false, now: ContinuousClock.now)
            publish(&state)
        }
        logger.info("released a card device for a player", metadata: [
            "device": "\(device)", "player": "\(player)", "outputs": "\(outputs.joined(separator: ", "))",
            "ms": "\(took.wholeMilliseconds)"])
        closed.finish()
    }

    /// Waits for the releases under way to close their outputs (at the daemon's stop, once the
    /// control socket is closed: nothing asks for more).
    func finishReleases() {
        closer.waitUntilDone()
    }

    /// Looks at every lent device after its events or the timer, and takes back the free ones
    /// (on `mainLoop`, the thread that applies configurations: a take-back rescans).
    func process(on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("PlayerLoans.process")
        timer.acknowledge()
        let now = ContinuousClock.now
        // The close events first, then the kernel's view: a close seen is in what /proc shows.
        let (closeSeen, lent) = state.withLock { state in (state.watcher.take(), state.machine.devices) }
        // /proc is read outside the lock, which a player's release waits for.
        let substreams = lent.map { (device: $0, substream: SubstreamState.read($0, proc: proc)) }
        var looks: [Logger.Metadata] = []
        let returned = state.withLock { state -> [TakeBack] in
            var returned: [TakeBack] = []
            // A device taken back meanwhile is looked at no more; one lent meanwhile, next time.
            for (device, substream) in substreams where state.machine.isLent(device) {
                let alive = state.watcher.holderAlive(device)
                let action = state.machine.observed(device, substream, holderAlive: alive, at: now)
                if closeSeen || action != .none {
                    looks.append([
                        "device": "\(device)", "open-by": "\(substream.openBy.map(String.init) ?? "nobody")",
                        "player": "\(alive ? "running" : "gone")", "close-seen": "\(closeSeen)", "action": "\(action)"])
                }
                if case .takeBack(let outputs, let format, let reason) = action {
                    state.watcher.forget(device)
                    returned.append(TakeBack(device: device, outputs: outputs, format: format, reason: reason))
                }
            }
            schedule(&state, closeSeen: closeSeen, now: now)
            publish(&state)
            return returned
        }
        for look in looks { logger.debug("looked at a lent card device", metadata: look) }
        holdLateOpeners()
        guard !returned.isEmpty else { return }
        var formatsChanged = false
        for back in returned {
            if let format = back.format, scanner.askFor(format.deviceFormat, on: back.device) { formatsChanged = true }
        }
        // A new format reaches the held outputs' settings before they open again.
        if formatsChanged { scanner.applyPlayerFormats() }
        for back in returned {
            for output in back.outputs { manager.resume(.lent, output: output) }
            logger.info("took a card device back from its player", metadata: [
                "device": "\(back.device)", "because": "\(back.reason)",
                "format": "\(back.format.map { "\($0)" } ?? scanner.playerFormat(on: back.device).map { "\($0), a player's before" } ?? "keepalived's own")",
                "ms": "\((ContinuousClock.now - now).wholeMilliseconds)"])
        }
    }

    /// A card device the loans' machine gave back: its outputs resume, in the player's format.
    private struct TakeBack {
        let device: HardwareDevice
        let outputs: [String]
        let format: PlayerFormat?
        let reason: LoanStateMachine.TakeBackReason
    }

    /// Holds outputs that opened on a lent device after its release: their name said nothing of
    /// the device, their handle did.
    private func holdLateOpeners() {
        let lent = state.withLock { $0.machine.devices }
        for device in lent {
            let playing = scanner.outputs(on: device)
            guard !playing.isEmpty else { continue }
            let new = state.withLock { $0.machine.found(playing, on: device) }
            for output in new {
                manager.pause(.lent, output: output)
                logger.info("held an output that opened on a lent card device", metadata: ["device": "\(device)", "output": "\(output)"])
            }
        }
    }

    /// Looks often right after a close, once a second while anything is lent, never otherwise.
    private func schedule(_ state: inout State, closeSeen: Bool, now: ContinuousClock.Instant) {
        if closeSeen { state.settlingUntil = now + Self.settleFor }
        if state.machine.devices.isEmpty {
            state.settlingUntil = nil
            timer.disarm()
        } else if let until = state.settlingUntil, now < until {
            timer.arm(after: Self.settleEvery, every: Self.settleEvery)
        } else {
            state.settlingUntil = nil
            let deadline = state.machine.nextDeadline.map { now.duration(to: $0) } ?? Self.lookEvery
            timer.arm(after: min(max(deadline, .milliseconds(1)), Self.lookEvery), every: Self.lookEvery)
        }
    }

    private func publish(_ state: inout State) {
        let now = ContinuousClock.now
        let loans = state.machine.loans
        let notCarried = state.notCarried
        state.reports = loans.map { device, loan, playing in
            var report = LoanReport(pcm: device.pcm, card: device.card, device: device.device, pid: loan.holder.pid, program: loan.holder.program,
                                    state: playing ? "playing" : "lent", sinceSeconds: (now - loan.since).seconds, outputs: loan.outputs,
                                    format: loan.format?.name, rate: loan.format?.rate, channels: loan.format?.channels)
            report.notCarriedBecause = notCarried[device].flatMap { $0.pid == loan.holder.pid ? $0.why : nil }
            return report
        }
        // Kept only for the devices lent now: the next player's ask replaces each.
        state.notCarried = state.notCarried.filter { device, _ in loans.contains { $0.0 == device } || state.closings[device] != nil }
        guard let activity else { return }
        // From the release on: the player opens the device next, and what comes back after its
        // close waits the loan's grace (a track of another format reopens within it).
        var players: [String: BoxActivity.Player] = [:]
        for (device, loan, _) in loans {
            for output in loan.outputs {
                players[output] = BoxActivity.Player(program: loan.holder.program ?? "pid \(loan.holder.pid)", card: device.card, device: device.device)
            }
        }
        activity.loansChanged(players)
    }
}
