/// Which card devices keepalived let players have, and when each comes back: the decisions
/// behind the `keepalived:` PCM, without I/O.
///
/// A device is keepalived's until a player asks for it (``releaseAsked(_:by:outputs:at:)``): then
/// it is **lent**, its outputs closed, while the player opens it; **playing** once the kernel
/// shows it open; keepalived's again once the kernel shows it closed after that, or when the
/// player never opened it within ``openWindow`` or died first (``observed(_:_:holderAlive:at:)``).
/// The last format seen while it played goes back with it, so that keepalived keeps the device
/// running as the player left it.
///
/// ```swift
/// var loans = LoanStateMachine()
/// if case .close(let outputs) = loans.releaseAsked(device, by: holder, outputs: ["hw:CARD=0,DEV=0"], at: now) { close(outputs) }
/// if case .takeBack(_, let format) = loans.observed(device, SubstreamState.read(device), holderAlive: true, at: later) { reopen(in: format) }
/// ```
struct LoanStateMachine: Sendable {
    /// How long a player has to open the device after its release.
    static let openWindow: Duration = .seconds(2)

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
    }

    private var states: [HardwareDevice: State] = [:]

    init() {}

    /// What to do about a release.
    enum ReleaseAction: Equatable, Sendable {
        /// Close these outputs, then answer.
        case close([String])
        /// Answer at once: the device is lent already (the same player again, or another whose
        /// open the hardware will refuse as busy, as `hw:` would).
        case alreadyLent
        /// Answer at once: keepalived plays nothing there.
        case nothingHeld
    }

    /// A player asks for `device`, on which keepalived plays `outputs` now.
    mutating func releaseAsked(_ device: HardwareDevice, by holder: Holder, outputs: [String], at now: ContinuousClock.Instant) -> ReleaseAction {
        guard states[device] == nil else { return .alreadyLent }
        guard !outputs.isEmpty else { return .nothingHeld }
        states[device] = .lent(Loan(holder: holder, since: now, outputs: outputs), openBy: now + Self.openWindow)
        return .close(outputs)
    }

    /// What to do after a look at a lent device.
    enum ObservationAction: Equatable, Sendable {
        case none
        /// The device is keepalived's again: reopen its outputs, in the player's last format.
        case takeBack(outputs: [String], format: PlayerFormat?)
    }

    /// The kernel's view of lent `device` now, and whether its player still runs.
    mutating func observed(_ device: HardwareDevice, _ substream: SubstreamState, holderAlive: Bool,
                           at now: ContinuousClock.Instant) -> ObservationAction {
        switch states[device] {
        case nil:
            preconditionFailure("observed \(device), which is not lent")
        case .lent(var loan, let openBy):
            if substream.openBy != nil {
                loan.format = substream.format ?? loan.format
                states[device] = .playing(loan)
                return .none
            }
            guard !holderAlive || now >= openBy else { return .none }
            states[device] = nil
            return .takeBack(outputs: loan.outputs, format: loan.format)
        case .playing(var loan):
            if substream.openBy != nil {
                loan.format = substream.format ?? loan.format
                states[device] = .playing(loan)
                return .none
            }
            states[device] = nil
            return .takeBack(outputs: loan.outputs, format: loan.format)
        }
    }

    /// The devices lent now.
    var devices: [HardwareDevice] { states.keys.sorted() }

    /// Whether `device` is lent now.
    func isLent(_ device: HardwareDevice) -> Bool { states[device] != nil }

    /// The earliest moment a lent device's player runs out of time to open it.
    var nextDeadline: ContinuousClock.Instant? {
        states.values.compactMap { state -> ContinuousClock.Instant? in
            if case .lent(_, let openBy) = state { return openBy }
            return nil
        }.min()
    }

    /// Each lent device's loan, and whether its player has it open.
    var loans: [(device: HardwareDevice, loan: Loan, playing: Bool)] {
        devices.map { device in
            switch states[device]! {
            case .lent(let loan, _): (device, loan, false)
            case .playing(let loan): (device, loan, true)
            }
        }
    }
}
