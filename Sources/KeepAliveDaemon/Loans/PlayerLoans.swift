import _KeepalivedControlProtocol
import KeepAlive
import Logging
import Glibc

/// The card devices lent to players through the `keepalived:` PCM: answers their `release`,
/// watches the kernel for the moment each is free again and takes it back, in the player's last
/// format. Decisions are ``LoanStateMachine``'s; this runs its I/O on the daemon's main loop
/// (``descriptor`` and ``timer`` join its `poll`), and only ``reports`` may be read from any
/// thread.
///
/// ```swift
/// let loans = PlayerLoans(scanner: scanner, logger: logger)
/// loans.release(ReleaseRequest(card: 0, device: 0, program: "mpd"), pid: 812) { reply in request.fulfil(reply) }
/// loans.process()   // after poll found `descriptor` or `timer.descriptor` readable
/// ```
final class PlayerLoans: @unchecked Sendable {
    /// How often a lent device is looked at while nothing happens: its player's format (set
    /// after its open, which no event reports) and its player's life.
    static let lookEvery: Duration = .seconds(1)
    /// How often, and how long, after a close: the kernel reports it just before the driver's
    /// release has run.
    static let settleEvery: Duration = .milliseconds(5)
    static let settleFor: Duration = .seconds(1)

    let logger: Logger
    private let scanner: OutputScanner
    private let watcher = LoanWatcher()
    let timer: IntervalTimer
    private var machine = LoanStateMachine()
    private var settlingUntil: ContinuousClock.Instant?
    private let published = Locked<[LoanReport]>([])
    private let proc: String

    /// - Throws: `Errno` when the system refuses a timer.
    init(scanner: OutputScanner, logger: Logger, proc: String = "/proc") throws(Errno) {
        self.scanner = scanner
        self.logger = logger
        self.proc = proc
        timer = try IntervalTimer()
    }

    /// The inotify descriptor, -1 without inotify.
    var descriptor: Int32 { watcher.descriptor }

    /// The loans now, for `status` (any thread).
    var reports: [LoanReport] { published.withLock { $0 } }

    /// Closes keepalived's outputs on the card device `request` names for process `pid`, and
    /// `answer`s as soon as they are closed, before the bookkeeping: the player's open is waiting
    /// for it, and gives up after 200 ms (main loop).
    func release(_ request: ReleaseRequest, pid: Int32, answer: (ControlReply) -> Void) {
        let started = ContinuousClock.now
        let device = HardwareDevice(card: request.card, device: request.device)
        let holder = LoanStateMachine.Holder(pid: pid, program: request.program)
        let outputs = scanner.outputs(on: device)
        switch machine.releaseAsked(device, by: holder, outputs: outputs, at: started) {
        case .nothingHeld, .alreadyLent:
            answer(ControlReply(ok: true, released: []))
        case .close(let closing):
            watcher.follow(device, pid: pid)
            scanner.lend(device, to: "\(request.program ?? "a player") (pid \(pid))")
            scanner.rescan()
            answer(ControlReply(ok: true, released: closing))
            let took = ContinuousClock.now - started
            logger.info("released a card device for a player", metadata: [
                "device": "\(device)", "player": "\(request.program ?? "?") (pid \(pid))", "outputs": "\(closing.joined(separator: ", "))",
                "ms": "\(took.milliseconds)"])
            schedule(closeSeen: false, now: ContinuousClock.now)
            publish()
        }
    }

    /// Looks at every lent device after its events or the timer, and takes back the free ones
    /// (main loop).
    func process() {
        timer.acknowledge()
        let closeSeen = watcher.take()
        let now = ContinuousClock.now
        var returned: [(HardwareDevice, PlayerFormat?)] = []
        for device in machine.devices {
            let state = SubstreamState.read(device, proc: proc)
            let action = machine.observed(device, state, holderAlive: watcher.holderAlive(device), at: now)
            if case .takeBack(_, let format) = action {
                watcher.forget(device)
                returned.append((device, format))
            }
        }
        if !returned.isEmpty {
            for (device, format) in returned { scanner.takeBack(device, format: format?.deviceFormat) }
            scanner.rescan()
            for (device, format) in returned {
                logger.info("took a card device back from its player", metadata: [
                    "device": "\(device)", "format": "\(format.map { "\($0)" } ?? "keepalived's own")",
                    "ms": "\((ContinuousClock.now - now).milliseconds)"])
            }
        }
        schedule(closeSeen: closeSeen, now: now)
        publish()
    }

    /// Looks often right after a close, once a second while anything is lent, never otherwise.
    private func schedule(closeSeen: Bool, now: ContinuousClock.Instant) {
        if closeSeen { settlingUntil = now + Self.settleFor }
        if machine.devices.isEmpty {
            settlingUntil = nil
            timer.disarm()
        } else if let until = settlingUntil, now < until {
            timer.arm(after: Self.settleEvery, every: Self.settleEvery)
        } else {
            settlingUntil = nil
            let deadline = machine.nextDeadline.map { now.duration(to: $0) } ?? Self.lookEvery
            timer.arm(after: min(max(deadline, .milliseconds(1)), Self.lookEvery), every: Self.lookEvery)
        }
    }

    private func publish() {
        let now = ContinuousClock.now
        let reports = machine.loans.map { device, loan, playing in
            LoanReport(pcm: device.pcm, card: device.card, device: device.device, pid: loan.holder.pid, program: loan.holder.program,
                       state: playing ? "playing" : "lent", sinceSeconds: (now - loan.since).secondsValue, outputs: loan.outputs,
                       format: loan.format?.name, rate: loan.format?.rate, channels: loan.format?.channels)
        }
        published.withLock { $0 = reports }
    }
}

private extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
