import KeepAlive
/// Which card devices keepalived let players have, and when each comes back: the decisions
/// behind the `keepalived:` PCM, without I/O.
///
/// A device is keepalived's until a player asks for it (``releaseAsked(_:by:outputs:at:)``): then
/// it is **lent**, its outputs held closed (``outputsClosed(_:at:)`` once they are), while the
/// player opens it; **playing** once the
/// kernel shows it open; **closing** once the kernel shows it closed after that, for
/// ``reopenGrace``, in which the player may open it again (MPD closes and reopens the card between
/// two tracks of different formats); keepalived's again after that, at once when its player is
/// gone, or when the player never opened it within ``openWindow`` (``observed(_:_:holderAlive:at:)``).
/// The format the loan's player set goes back with it; after a loan that never set one (a probe's
/// open, a player that died before `hw_params`) the outputs keep the format an earlier player set
/// (``OutputScanner``'s record of it), so that keepalived keeps the device running as the last
/// real audio left it.
///
/// ```swift
/// var loans = LoanStateMachine()
/// if case .close(let outputs) = loans.releaseAsked(device, by: holder, outputs: ["hw:CARD=0,DEV=0"], at: now) { hold(outputs) }
/// if case .takeBack(_, let format, _) = loans.observed(device, SubstreamState.read(device), holderAlive: true, at: later) { reopen(in: format) }
/// ```
struct LoanStateMachine: Sendable {
    /// How long a player has to open the device after its release.
    static let openWindow: Duration = .seconds(2)
    /// How long a device stays lent after its player closed it. MPD closes and reopens the card
    /// within milliseconds between tracks of different formats; taken back at once, keepalived
    /// would open it in that gap and be asked to release it again while the player waits.
    static let reopenGrace: Duration = .milliseconds(250)

    /// The process a device was released for.
    struct Holder: Equatable, Sendable {
        var pid: Int32
        var program: String?
    }

    /// One device lent, and what comes back with it.
    struct Loan: Equatable, Sendable {
        var holder: Holder
        var since: ContinuousClock.Instant
        /// keepalived's outputs closed for it.
        var outputs: [String]
        /// The player's format, once seen.
        var format: PlayerFormat?
    }

    private enum State: Equatable, Sendable {
        /// Released; the player has not been seen with it open yet, and has until `openBy`.
        case lent(Loan, openBy: ContinuousClock.Instant)
        /// The player has it open.
        case playing(Loan)
        /// The player closed it; it comes back at `returnAt` unless a player opens it again.
        case closing(Loan, returnAt: ContinuousClock.Instant)
    }

    // The format a player left on a device beyond its loan is the outputs' to keep, and one
    // record holds it: OutputScanner's (`askFor`), which a take-back's format updates.
    private var states: [HardwareDevice: State] = [:]
    /// Lent devices whose outputs are still being closed (off the control socket's thread: a
    /// playback thread may be inside an open, keepalived's own front door's among them). Their
    /// player's window starts when they are closed, nothing is looked at before, and a second
    /// player is answered once they are closed.
    private var closing: Set<HardwareDevice> = []

    init() {}

    /// What to do about a release.
    enum ReleaseAction: Equatable, Sendable {
        /// Close these outputs (then ``outputsClosed(_:at:)``), then answer.
        case close([String])
        /// Answer once the outputs an earlier release is closing are closed: the device is lent
        /// already, and its player's open, like this one's, must not find keepalived there.
        case afterClose
        /// Answer at once: the device is lent already (the same player again, or another whose
        /// open the hardware will refuse as busy, as `hw:` would).
        case alreadyLent
        /// Answer at once: the device was on its way back after its player closed it, and is
        /// this player's now (follow the new holder).
        case lentAgain
        /// Answer at once: keepalived plays nothing there.
        case nothingHeld
    }

    /// A player asks for `device`, on which keepalived plays `outputs` now.
    mutating func releaseAsked(_ device: HardwareDevice, by holder: Holder, outputs: [String], at now: ContinuousClock.Instant) -> ReleaseAction {
        switch states[device] {
        case .lent?, .playing?:
            return closing.contains(device) ? .afterClose : .alreadyLent
        case .closing(var loan, _)?:
            loan.holder = holder
            states[device] = .lent(loan, openBy: now + Self.openWindow)
            return .lentAgain
        case nil:
            guard !outputs.isEmpty else { return .nothingHeld }
            states[device] = .lent(Loan(holder: holder, since: now, outputs: outputs), openBy: now + Self.openWindow)
            closing.insert(device)
            return .close(outputs)
        }
    }

    /// The outputs a ``ReleaseAction/close(_:)`` named are closed, at `now`: the player's window
    /// to open the device starts.
    mutating func outputsClosed(_ device: HardwareDevice, at now: ContinuousClock.Instant) {
        guard closing.remove(device) != nil, case .lent(let loan, _)? = states[device] else {
            preconditionFailure("outputsClosed(\(device)) without a release closing them")
        }
        states[device] = .lent(loan, openBy: now + Self.openWindow)
    }

    /// Outputs that opened on lent `device` after its release (a name that tells no device,
    /// `default` say, whose first open came while the player had the device): held closed with
    /// the others from now on, and reopened with them. Returns the ones new to the loan.
    mutating func found(_ outputs: [String], on device: HardwareDevice) -> [String] {
        guard let state = states[device] else { return [] }
        switch state {
        case .lent(var loan, let openBy):
            let new = outputs.filter { !loan.outputs.contains($0) }
            loan.outputs += new
            states[device] = .lent(loan, openBy: openBy)
            return new
        case .playing(var loan):
            let new = outputs.filter { !loan.outputs.contains($0) }
            loan.outputs += new
            states[device] = .playing(loan)
            return new
        case .closing(var loan, let returnAt):
            let new = outputs.filter { !loan.outputs.contains($0) }
            loan.outputs += new
            states[device] = .closing(loan, returnAt: returnAt)
            return new
        }
    }

    /// Why a lent device is keepalived's again: said in the journal, so that a user (and a test)
    /// can tell a player that died from one that never opened what it asked for.
    enum TakeBackReason: Equatable, Sendable, CustomStringConvertible {
        /// Its player is gone (exited or killed), whatever it had done with the device.
        case playerGone
        /// Its player did not open it within ``LoanStateMachine/openWindow``.
        case neverOpened
        /// Its player closed it and did not open it again within ``LoanStateMachine/reopenGrace``.
        case closed

        var description: String {
            switch self {
            case .playerGone: "its player is gone"
            case .neverOpened: "its player did not open it within its window"
            case .closed: "its player closed it"
            }
        }
    }

    /// What to do after a look at a lent device.
    enum ObservationAction: Equatable, Sendable {
        case none
        /// The device is keepalived's again: reopen its outputs, in the format this loan's player
        /// set (nil: it set none; the outputs keep the one they had).
        case takeBack(outputs: [String], format: PlayerFormat?, because: TakeBackReason)
    }

    /// The kernel's view of lent `device` now, and whether its player still runs.
    mutating func observed(_ device: HardwareDevice, _ substream: SubstreamState, holderAlive: Bool,
                           at now: ContinuousClock.Instant) -> ObservationAction {
        guard let state = states[device] else { preconditionFailure("observed \(device), which is not lent") }
        // keepalived's own outputs may still hold it: nothing the kernel shows is the player's yet.
        guard !closing.contains(device) else { return .none }
        var loan: Loan
        switch state {
        case .lent(let lent, let openBy):
            loan = lent
            if substream.openBy == nil {
                guard !holderAlive || now >= openBy else { return .none }
                return takeBack(device, loan, because: holderAlive ? .neverOpened : .playerGone)
            }
        case .playing(let playing):
            loan = playing
            if substream.openBy == nil {
                // Nobody left to open it again: no reason to wait.
                guard holderAlive else { return takeBack(device, loan, because: .playerGone) }
                states[device] = .closing(loan, returnAt: now + Self.reopenGrace)
                return .none
            }
        case .closing(let closing, let returnAt):
            loan = closing
            if substream.openBy == nil {
                guard holderAlive, now < returnAt else { return takeBack(device, loan, because: holderAlive ? .closed : .playerGone) }
                return .none
            }
        }
        if let format = substream.format { loan.format = format }
        states[device] = .playing(loan)
        return .none
    }

    private mutating func takeBack(_ device: HardwareDevice, _ loan: Loan, because reason: TakeBackReason) -> ObservationAction {
        states[device] = nil
        return .takeBack(outputs: loan.outputs, format: loan.format, because: reason)
    }

    /// The devices lent now.
    var devices: [HardwareDevice] { states.keys.sorted() }

    /// Whether `device` is lent now.
    func isLent(_ device: HardwareDevice) -> Bool { states[device] != nil }

    /// The earliest moment something changes without an event: a lent device's player runs out
    /// of time to open it, or a closed one's grace ends.
    var nextDeadline: ContinuousClock.Instant? {
        states.filter { !closing.contains($0.key) }.values.compactMap { state -> ContinuousClock.Instant? in
            switch state {
            case .lent(_, let openBy): openBy
            case .closing(_, let returnAt): returnAt
            case .playing: nil
            }
        }.min()
    }

    /// Each lent device's loan, and whether its player has it open.
    var loans: [(device: HardwareDevice, loan: Loan, playing: Bool)] {
        devices.map { device in
            switch states[device]! {
            case .lent(let loan, _), .closing(let loan, _): (device, loan, false)
            case .playing(let loan): (device, loan, true)
            }
        }
    }
}
