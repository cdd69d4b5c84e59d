/// Every decision `--cec` makes, without I/O: which messages go on the HDMI-CEC bus when the box
/// becomes active or idle, what it learns from the bus (who is on, who is the active source,
/// who the user switched off), and what the adapter must do about its configuration.
/// ``CECAdapter`` feeds it one event at a time, on its own thread, and carries out the
/// ``Action`` each returns; its timers are the ``deadline`` the adapter's `poll` waits for.
///
/// The box is **active** from the first output with real audio to the last one going idle
/// (``BoxActivity``): an **active period**. Becoming active it first asks who is on (Give
/// Device Power Status to the audio system, and to the TV with ``Settings/wakeTV``), as libcec
/// does, then wakes: System Audio Mode Request to the audio system, then Image View On and
/// Active Source with ``Settings/wakeTV``. A device that said it was on is not counted as woken
/// by keepalived, so ``Settings/standby`` never switches off what someone else switched on.
/// Standby at idle also needs that nobody else became the active source since the wake (Kodi's
/// rule: standby only while still the source) and that the user did not switch it off (a
/// Standby heard, a power status of standby): what the user switched off is never woken again
/// in the same period, not even when the adapter gets its address back (a TV that pulls the
/// hotplug line low in standby, libcec #239/#403).
///
/// Doing no harm (issue 58): only an acknowledged wake counts as one (a refused or aborted
/// step goes again once the adapter is ready); from Unregistered, where no answer can reach
/// keepalived, nothing is woken or put in standby; another program's configuration, found after
/// any of the adapter's state changes, is stepped aside from at once, forgetting what was woken;
/// Image View On from Unregistered goes only to a TV found in standby at the period's start;
/// the power-on key never follows the user's Standby and has a deadline.
///
/// ```swift
/// var machine = CECStateMachine(settings: .init())
/// machine.adapterOpened(configuration: .none, physicalAddress: 0x2000)  // .claim(clearFirst: false)
/// machine.adapterReady(physicalAddress: 0x2000, logicalAddress: 4, now: now)   // .none
/// machine.boxActive(now: now)        // .announce([4→5 Give Device Power Status])
/// machine.timerFired(now: later)     // .announce([4→5 System Audio Mode Request (2.0.0.0), 4→5 Give Device Power Status])
/// ```
struct CECStateMachine: Sendable {
    typealias Instant = ContinuousClock.Instant

    /// What the options ask for.
    struct Settings: Equatable, Sendable {
        /// `--cec-wake-tv`: also Image View On to the TV and Active Source.
        var wakeTV = false
        /// `--cec-standby`: Standby to what keepalived woke once the box is idle.
        var standby = false
        /// `--cec-take-over`: replace another program's configuration of the adapter.
        var takeOver = false
    }

    /// How long the power statuses asked before a wake are waited for: a device that does not
    /// answer by then counts as off (and so as woken by keepalived).
    static let powerStatusWait: Duration = .seconds(1)
    /// How long the audio system's power status after System Audio Mode Request is waited for
    /// before the power-on key: CEC gives a follower 1 s to answer, after the two messages'
    /// own time on the bus. A report later than this is the user's doing, never a reason for
    /// the key.
    static let confirmWait: Duration = .seconds(2)
    /// The first wait before claiming a lost logical address again, doubled up to ``reclaimMaximum``
    /// while it keeps being lost: another program clearing it again is not fought in a loop.
    static let reclaimFirst: Duration = .seconds(2)
    static let reclaimMaximum: Duration = .seconds(60)
    /// How long a claim may take at a physical address before it is made again: the kernel's
    /// claim of a Playback address (a poll of each of three addresses) takes well under a
    /// second, and it claims again by itself only when the physical address changes, so a claim
    /// that failed at a steady address (a driver's error) would otherwise leave keepalived off
    /// the bus for good. Doubled up to ``reclaimMaximum`` while it keeps failing.
    static let claimWait: Duration = .seconds(10)

    /// What became of a transmitted message.
    enum Outcome: Equatable, Sendable {
        /// The destination acknowledged it (a broadcast: nobody refused it).
        case acknowledged
        /// Nothing acknowledged it: no device at that logical address.
        case notAcknowledged
        /// The adapter could not send it; `retry`: a bus that may well take it a moment later
        /// (arbitration lost, timed out).
        case failed(String, retry: Bool = false)
        /// The destination answered Feature Abort with this reason.
        case refused(String)
    }

    /// What the adapter found configured when it opened the node or looked again.
    enum Configuration: Equatable, Sendable {
        /// Nothing: keepalived may claim its address.
        case none
        /// keepalived's own, kept by the kernel across restarts.
        case ours
        /// Another program's (Kodi's libcec, `cec-ctl --tv`): left alone without `--cec-take-over`.
        case foreign
    }

    /// What the adapter must do.
    enum Action: Equatable, Sendable {
        case none
        /// Transmit these, in order, and log each: they follow the box's activity.
        case announce([CECMessage])
        /// Transmit this answer to a message another device sent (logged at debug).
        case answer(CECMessage)
        /// No device acknowledged this announcement: say so once (at notice) until one does.
        case noReceiver(CECMessage)
        /// The adapter could not send this announcement: say so.
        case transmitFailed(CECMessage, String)
        /// Send this announcement again, once: the bus was busy (why).
        case retry(CECMessage, String)
        /// A device refused one of keepalived's messages (the Feature Abort received): say so
        /// at notice.
        case refused(CECMessage)
        /// Configure the adapter as keepalived's Playback device, dropping what is configured
        /// first when `clearFirst`.
        case claim(clearFirst: Bool)
        /// Another program configured the adapter: say so once and leave it alone.
        case leaveAlone
        /// The logical address is gone while the physical one is there (another program
        /// cleared it): say so once; it is claimed again after this wait.
        case addressLost(reclaimIn: Duration)
        /// Read the adapter's configuration again and report it (``adapterConfiguration(_:physicalAddress:)``).
        case lookAgain
        /// The claim did not end with an address: unless the adapter has one by now, claim again,
        /// dropping the configuration the failed claim left.
        case claimAgain
        /// Close the adapter without touching its configuration: a reload names another one.
        case letGo
    }

    /// Where keepalived is on the bus, once the kernel claimed its logical address.
    struct Addresses: Equatable, Sendable {
        var physical: UInt16
        var logical: UInt8
    }

    /// The messages of a wake, each sent at most once per active period.
    private enum Step: Hashable, Sendable {
        case systemAudioModeRequest, imageViewOn, activeSource, powerOn
    }

    /// Where an active period's wake is.
    private enum Phase: Equatable, Sendable {
        /// Nothing asked yet (the box is idle, or the adapter was not ready).
        case idle
        /// The power statuses asked, until this deadline: nil for each still unanswered, else
        /// the status it reported.
        case asking(until: Instant, statuses: [UInt8: UInt8?])
        /// The wake sent; the audio system's power status asked again to see it woke, until this
        /// deadline.
        case confirming(until: Instant)
        /// Nothing more to do until the box goes idle.
        case settled
    }

    /// One active period: what keepalived did and learnt since the box became active.
    private struct Period: Equatable, Sendable {
        var active = false
        var phase = Phase.idle
        var sent: Set<Step> = []
        /// What was off (or silent) before keepalived's wake, the audio system first.
        var woke: [UInt8] = []
        /// What the user switched off in this period: never woken again in it.
        var switchedOff: Set<UInt8> = []
        /// Another device became the active source since the wake.
        var otherSource = false
        /// keepalived itself found the TV in standby at the period's start (it reported standby,
        /// or the period began with the hotplug line low): the one case Image View On may go
        /// from Unregistered to a TV whose hotplug line is low.
        var tvFoundOff = false
        /// keepalived's System Audio Mode Request went out and the audio system has not said
        /// Set System Audio Mode since: that answer is keepalived's, any other is someone else's.
        var awaitingAudioMode = false
        /// The audio system turned System Audio Mode on for someone else in this period (the TV,
        /// for its own sound over ARC): it is theirs, and never put in standby.
        var audioInUseByOthers = false
    }

    /// What keepalived knows, whatever the adapter's state.
    private struct Memory: Equatable, Sendable {
        var period = Period()
        /// Whether keepalived is the active source: after its own Active Source, until another
        /// device's Active Source, Routing Change or Set Stream Path away, or a Standby.
        var source = false
        /// The last announcement sent and what became of it (nil while the adapter has not said).
        var last: CECMessage?
        var lastOutcome: Outcome?
        /// Whether the audio system said it plays the box's sound (Set System Audio Mode).
        var systemAudioMode: Bool?
        /// Destinations whose silence (no acknowledgement) was logged, until one answers again.
        var unheard: Set<UInt8> = []
        /// Announcements sent again after a busy bus in this period: once each.
        var retried: [CECMessage] = []
        /// The physical address of another device that said it is the active source, until a
        /// Standby, its Inactive Source or keepalived's own Active Source.
        var sourceElsewhere: UInt16?
    }

    private enum State: Equatable, Sendable {
        /// No adapter open: the node is missing, refused, or was unplugged.
        case closed(Memory)
        /// The adapter is open, without a logical address yet; its physical address, nil while
        /// the sink holds the hotplug line low (a TV in standby, or no HDMI); at `retryAt` the
        /// claim is made again (armed while there is a physical address).
        case claiming(Memory, physical: UInt16?, retryAt: Instant? = nil)
        /// Another program's configuration, left alone (no `--cec-take-over`).
        case leftAlone(Memory)
        /// The logical address was taken away; claimed again at `at`, after `backOff`.
        case lost(Memory, physical: UInt16, at: Instant, backOff: Duration)
        /// keepalived has its logical address and may send.
        case ready(Addresses, Memory)

        var memory: Memory {
            get {
                switch self {
                case .closed(let memory), .claiming(let memory, _, _), .leftAlone(let memory), .lost(let memory, _, _, _), .ready(_, let memory): memory
                }
            }
            set {
                switch self {
                case .closed: self = .closed(newValue)
                case .claiming(_, let physical, let retryAt): self = .claiming(newValue, physical: physical, retryAt: retryAt)
                case .leftAlone: self = .leftAlone(newValue)
                case .lost(_, let physical, let at, let backOff): self = .lost(newValue, physical: physical, at: at, backOff: backOff)
                case .ready(let addresses, _): self = .ready(addresses, newValue)
                }
            }
        }
    }

    private(set) var settings: Settings
    private var state = State.closed(Memory())
    /// The back-off before the next re-claim: it grows while another program keeps clearing
    /// the address, and starts over once keepalived kept it for ``reclaimMaximum``.
    private var nextBackOff = reclaimFirst
    /// When keepalived last became ready.
    private var readySince: Instant?
    /// The wait before a claim without an address is made again: it grows while claims keep
    /// failing, and starts over once one succeeds.
    private var nextClaimWait = claimWait

    init(settings: Settings) {
        self.settings = settings
    }

    /// The last announcement sent and what became of it.
    var last: (message: CECMessage, outcome: Outcome?)? {
        state.memory.last.map { ($0, state.memory.lastOutcome) }
    }

    /// Whether the audio system said it plays the box's sound, nil until it said anything.
    var systemAudioMode: Bool? { state.memory.systemAudioMode }

    /// Whether another program's configuration is left alone: its state changes mean a look again.
    var leftAlone: Bool {
        if case .leftAlone = state { true } else { false }
    }

    /// When ``timerFired(now:)`` is due, if anything waits for time.
    var deadline: Instant? {
        switch state {
        case .lost(_, _, let at, _): return at
        case .claiming(_, _, let retryAt?): return retryAt
        case .ready(_, let memory):
            switch memory.period.phase {
            case .asking(let until, _), .confirming(let until): return until
            case .idle, .settled: return nil
            }
        default: return nil
        }
    }

    /// Whether the active period's wake of the audio system is still under way: asked, or sent
    /// and not yet confirmed, or due as soon as the adapter has its address. A player's open
    /// held for it (`--power-on-wait` with `--cec` alone) goes on once this is false. Nothing is
    /// under way while another program has the adapter, or without an adapter at all.
    var waking: Bool {
        let period = state.memory.period
        guard period.active, !period.switchedOff.contains(CECMessage.Address.audioSystem) else { return false }
        switch (state, period.phase) {
        case (_, .asking), (_, .confirming): return true
        case (.ready, .idle), (.claiming(_, physical: .some, _), .idle), (.lost, .idle): return true
        default: return false
        }
    }

    /// A reload's settings on the same adapter: they apply from the next change of the box;
    /// nothing is sent now. A `--cec-take-over` given now takes the adapter left alone.
    mutating func apply(_ settings: Settings) -> Action {
        self.settings = settings
        if settings.takeOver, case .leftAlone = state { return .lookAgain }
        return .none
    }

    /// A reload's settings. `otherAdapter`: they name another adapter, so the open one is let go
    /// first, as it is: another program's configuration on it is not keepalived's to clear,
    /// whatever the new settings say of the next adapter.
    mutating func reload(_ settings: Settings, otherAdapter: Bool) -> Action {
        guard otherAdapter else { return apply(settings) }
        self.settings = settings
        if case .closed = state { return .none }
        state = .closed(state.memory)
        return .letGo
    }

    /// The adapter's node was opened and its configuration read.
    mutating func adapterOpened(configuration: Configuration, physicalAddress: UInt16?) -> Action {
        guard case .closed(let memory) = state else { preconditionFailure("adapterOpened while \(state)") }
        state = .claiming(memory, physical: physicalAddress)
        return configure(configuration)
    }

    /// The configuration as read again after each of the adapter's state changes: whoever
    /// configured the adapter last owns it, and a configuration that is not keepalived's means
    /// another program took the adapter (libcec clears it and claims its own, then follows
    /// every message exclusively): keepalived steps aside as at its start, since whatever it sent
    /// now would go out from that program's address and hear nothing back. What it woke in
    /// the period is forgotten (never put in standby) and nothing more is woken in it. With
    /// `--cec-take-over` it takes the adapter back after the back-off of a lost address.
    mutating func configurationChanged(_ configuration: Configuration, physicalAddress: UInt16?, now: Instant) -> Action {
        switch state {
        case .closed: preconditionFailure("configurationChanged while closed")
        case .leftAlone: return adapterConfiguration(configuration, physicalAddress: physicalAddress)
        case .claiming, .ready, .lost:
            guard configuration == .foreign else { return .none }
            var memory = state.memory
            if memory.period.active {
                memory.period.woke = []
                memory.period.phase = .settled
            }
            memory.source = false
            guard settings.takeOver else {
                state = .leftAlone(memory)
                return .leaveAlone
            }
            if case .lost(_, let physical, let at, let backOff) = state {
                state = .lost(memory, physical: physical, at: at, backOff: backOff)
                return .none
            }
            state = .claiming(memory, physical: physicalAddress)
            return addressTakenAway(physicalAddress: physicalAddress ?? 0, now: now)
        }
    }

    /// The configuration read again, after ``Action/lookAgain`` (left alone, or the address lost).
    mutating func adapterConfiguration(_ configuration: Configuration, physicalAddress: UInt16?) -> Action {
        switch state {
        case .closed, .claiming, .ready: preconditionFailure("adapterConfiguration while \(state)")
        case .leftAlone(let memory), .lost(let memory, _, _, _):
            let wasLeftAlone = leftAlone
            state = .claiming(memory, physical: physicalAddress)
            let action = configure(configuration)
            // Said once: the same program still there is no news.
            return wasLeftAlone && action == .leaveAlone ? .none : action
        }
    }

    private mutating func configure(_ configuration: Configuration) -> Action {
        switch configuration {
        case .ours: return .none
        case .none: return .claim(clearFirst: false)
        case .foreign:
            if settings.takeOver { return .claim(clearFirst: true) }
            state = .leftAlone(state.memory)
            return .leaveAlone
        }
    }

    /// The adapter has a physical address and keepalived's logical address (again, or other
    /// ones after an HDMI replug). An active box that has not woken anything in this period yet
    /// starts its wake; one that has sends nothing again.
    mutating func adapterReady(physicalAddress: UInt16, logicalAddress: UInt8, now: Instant) -> Action {
        let addresses = Addresses(physical: physicalAddress, logical: logicalAddress)
        switch state {
        case .closed, .leftAlone:
            preconditionFailure("adapterReady while \(state)")
        case .claiming(let memory, _, _), .lost(let memory, _, _, _), .ready(_, let memory):
            if case .ready = state {} else { readySince = now }
            nextClaimWait = Self.claimWait
            state = .ready(addresses, memory)
            guard memory.period.active, memory.period.phase == .idle else { return .none }
            return startWake(at: addresses, now: now)
        }
    }

    /// The adapter has no logical address (any more). Without a physical address the sink
    /// holds hotplug low: an active box with `--cec-wake-tv` wakes the TV from Unregistered, as
    /// the kernel allows an unconfigured adapter, only when keepalived itself found it in
    /// standby at the period's start and has not sent it Image View On yet: a TV the user
    /// switches off mid-period may pull hotplug low too, and is not woken again. With a
    /// physical address after being ready, the address was taken away: claimed again after a
    /// back-off.
    mutating func adapterUnclaimed(physicalAddress: UInt16?, now: Instant) -> Action {
        switch state {
        case .closed, .leftAlone:
            preconditionFailure("adapterUnclaimed while \(state)")
        case .lost:
            return .none
        case .claiming(let memory, _, _):
            // A physical address without a logical one: the claim starts now, or failed.
            state = .claiming(memory, physical: physicalAddress, retryAt: physicalAddress.map { _ in now + nextClaimWait })
            return physicalAddress == nil ? wakeUnplugged() : .none
        case .ready(_, let memory):
            guard let physicalAddress else {
                state = .claiming(memory, physical: nil)
                return wakeUnplugged()
            }
            state = .claiming(memory, physical: physicalAddress)
            return addressTakenAway(physicalAddress: physicalAddress, now: now)
        }
    }

    /// Claimed again after a back-off that grows while another program keeps taking it.
    private mutating func addressTakenAway(physicalAddress: UInt16, now: Instant) -> Action {
        if let readySince, readySince.duration(to: now) >= Self.reclaimMaximum { nextBackOff = Self.reclaimFirst }
        let backOff = nextBackOff
        nextBackOff = min(backOff * 2, Self.reclaimMaximum)
        state = .lost(state.memory, physical: physicalAddress, at: now + backOff, backOff: backOff)
        return .addressLost(reclaimIn: backOff)
    }

    /// The adapter is gone (unplugged, ENODEV, or let go on a reload) and its node was closed.
    mutating func adapterLost() -> Action {
        if case .closed = state { preconditionFailure("adapterLost while closed") }
        state = .closed(state.memory)
        return .none
    }

    /// The poll's timeout: the power statuses waited for long enough, or a lost address is due
    /// to be claimed again. Early or spurious calls do nothing.
    mutating func timerFired(now: Instant) -> Action {
        switch state {
        case .lost(_, _, let at, _):
            return now >= at ? .lookAgain : .none
        case .claiming(let memory, let physical, let retryAt?):
            guard now >= retryAt else { return .none }
            nextClaimWait = min(nextClaimWait * 2, Self.reclaimMaximum)
            state = .claiming(memory, physical: physical)
            return .claimAgain
        case .ready(let addresses, var memory):
            switch memory.period.phase {
            case .asking(let until, _) where now >= until:
                return wake(at: addresses)
            case .confirming(let until) where now >= until:
                // No answer in time: the wake stands as sent, without the key.
                memory.period.phase = .settled
                state = .ready(addresses, memory)
                return .none
            default:
                return .none
            }
        default:
            return .none
        }
    }

    /// The first output with real audio: the box is active.
    mutating func boxActive(now: Instant) -> Action {
        var memory = state.memory
        precondition(!memory.period.active, "boxActive while active")
        memory.period = Period(active: true)
        memory.retried = []
        state.memory = memory
        switch state {
        case .ready(let addresses, _): return startWake(at: addresses, now: now)
        case .claiming(_, physical: nil, _):
            // The period begins with the hotplug line low: all keepalived can know of a TV in standby.
            state.memory.period.tvFoundOff = true
            return wakeUnplugged()
        default: return .none
        }
    }

    /// The last output went idle. Standby, if asked for, goes only to what keepalived woke in
    /// this period, that the user did not switch off, and only while nobody else became the
    /// active source; not to an audio system someone else turned System Audio Mode on with
    /// (the TV, for its own sound over ARC), and never from Unregistered, where nothing
    /// keepalived woke could be confirmed. What it could not reach is forgotten. keepalived is
    /// no longer the active source: it stops answering Request Active Source, so that a TV
    /// switched on later stays where it is rather than jumping to an idle box, and it sends no
    /// Inactive Source, which would take a TV someone still watches off the box's input.
    mutating func boxIdle() -> Action {
        var memory = state.memory
        precondition(memory.period.active, "boxIdle while idle")
        let period = memory.period
        memory.period = Period()
        memory.retried = []
        memory.source = false
        state.memory = memory
        guard settings.standby, case .ready(let addresses, _) = state, addresses.logical != CECMessage.Address.unregistered,
              !period.otherSource else { return .none }
        let targets = period.woke.filter {
            !period.switchedOff.contains($0) && !($0 == CECMessage.Address.audioSystem && period.audioInUseByOthers)
        }
        guard !targets.isEmpty else { return .none }
        return announce(targets.map { CECMessage.standby(from: addresses.logical, to: $0) })
    }

    /// The adapter's word on a message keepalived sent (announcement or answer).
    mutating func transmitResult(_ message: CECMessage, _ outcome: Outcome) -> Action {
        if case .closed = state { preconditionFailure("transmitResult while closed") }
        if message.opcode == CECMessage.Opcode.giveDevicePowerStatus {
            // Nobody there to ask: its status is unknown, which is what a missing answer means.
            guard outcome != .acknowledged else { return .none }
            return powerStatus(message.destination, nil)
        }
        guard CECMessage.Opcode.announced.contains(message.opcode ?? 0) else { return .none }
        if state.memory.last == message { state.memory.lastOutcome = outcome }
        switch outcome {
        case .acknowledged:
            state.memory.unheard.remove(message.destination)
            return .none
        case .notAcknowledged:
            notSent(message)
            guard state.memory.unheard.insert(message.destination).inserted else { return .none }
            return .noReceiver(message)
        case .failed(let why, let retry):
            if retry, !state.memory.retried.contains(message), case .ready = state {
                state.memory.retried.append(message)
                return .retry(message, why)
            }
            notSent(message)
            return .transmitFailed(message, why)
        case .refused:
            return .none
        }
    }

    /// Only an acknowledged message counts: one nobody took (refused by the kernel while it
    /// configures the adapter, aborted when a hotplug bounce unconfigures it, not acknowledged)
    /// woke nothing, so its target is not put in standby for it, and its step of the wake is
    /// due again: the wake starts over (asking first) once the adapter is ready again.
    private mutating func notSent(_ message: CECMessage) {
        var memory = state.memory
        guard memory.period.active, let opcode = message.opcode else { return }
        let step: Step? = switch opcode {
        case CECMessage.Opcode.systemAudioModeRequest: .systemAudioModeRequest
        case CECMessage.Opcode.imageViewOn: .imageViewOn
        case CECMessage.Opcode.activeSource: .activeSource
        case CECMessage.Opcode.userControlPressed: .powerOn
        default: nil
        }
        guard let step, memory.period.sent.remove(step) != nil else { return }
        switch step {
        case .systemAudioModeRequest:
            memory.period.woke.removeAll { $0 == CECMessage.Address.audioSystem }
            memory.period.awaitingAudioMode = false
        case .imageViewOn: memory.period.woke.removeAll { $0 == CECMessage.Address.tv }
        case .activeSource: memory.source = false
        case .powerOn: break
        }
        if memory.period.phase != .idle, step != .powerOn { memory.period.phase = .idle }
        state.memory = memory
    }

    /// Another device's message to keepalived, or a broadcast: what it says of the bus is
    /// remembered whatever the adapter's state; it is answered only once keepalived is ready.
    mutating func messageReceived(_ message: CECMessage) -> Action {
        if case .closed = state { preconditionFailure("messageReceived while closed") }
        guard let opcode = message.opcode else { return .none }
        let own: Addresses? = if case .ready(let addresses, _) = state { addresses } else { nil }
        let toUs = message.isBroadcast || message.destination == own?.logical
        switch opcode {
        case CECMessage.Opcode.standby where toUs:
            // The user switched the system off: nothing is woken again, or put in standby, in
            // this period.
            if state.memory.period.active { state.memory.period.switchedOff.formUnion([CECMessage.Address.tv, CECMessage.Address.audioSystem]) }
            state.memory.source = false
            state.memory.sourceElsewhere = nil
            return .none
        case CECMessage.Opcode.reportPowerStatus where toUs:
            return powerStatus(message.initiator, message.operands.first ?? CECMessage.PowerStatus.standby)
        case CECMessage.Opcode.setSystemAudioMode where message.initiator == CECMessage.Address.audioSystem:
            let on = message.operands.first == 1
            state.memory.systemAudioMode = on
            // Not the answer to keepalived's request: someone else (the TV, for ARC) uses it.
            if on, state.memory.period.active, !state.memory.period.awaitingAudioMode { state.memory.period.audioInUseByOthers = true }
            state.memory.period.awaitingAudioMode = false
            return .none
        case CECMessage.Opcode.activeSource:
            if let address = message.physicalAddress, address != own?.physical { tookOver(by: address) }
            return .none
        case CECMessage.Opcode.routingChange:
            guard message.operands.count >= 4 else { return .none }
            let address = UInt16(message.operands[2]) << 8 | UInt16(message.operands[3])
            if address != own?.physical { tookOver(by: address) }
            return .none
        case CECMessage.Opcode.setStreamPath:
            guard let address = message.physicalAddress else { return .none }
            guard let own, address == own.physical else {
                tookOver(by: address)
                return .none
            }
            // The TV routes to the box: it is the source now and says so, as a Playback device
            // must (cec-follower does; cec-compliance expects it), whether it was or not.
            guard own.logical != CECMessage.Address.unregistered else { return .none }
            state.memory.source = true
            state.memory.sourceElsewhere = nil
            return .answer(.activeSource(from: own.logical, physicalAddress: own.physical))
        case CECMessage.Opcode.requestActiveSource:
            guard let own, state.memory.source else { return .none }
            return .answer(.activeSource(from: own.logical, physicalAddress: own.physical))
        case CECMessage.Opcode.featureAbort where own != nil && message.destination == own?.logical:
            guard let refused = message.operands.first, CECMessage.Opcode.sent.contains(refused) else { return .none }
            if let last = state.memory.last, last.opcode == refused, last.destination == message.initiator {
                state.memory.lastOutcome = .refused(CECMessage.describe(abortReason: message.operands.count > 1 ? message.operands[1] : 0))
            }
            return .refused(message)
        default:
            guard let own else { return .none }
            return message.answer(at: own.logical).map { .answer($0) } ?? .none
        }
    }

    private mutating func tookOver(by address: UInt16) {
        state.memory.source = false
        state.memory.sourceElsewhere = address
        if state.memory.period.active { state.memory.period.otherSource = true }
    }

    /// A power status reported (nil: nobody answered the question).
    private mutating func powerStatus(_ device: UInt8, _ status: UInt8?) -> Action {
        guard case .ready(let addresses, var memory) = state else { return .none }
        let off = status.map { [CECMessage.PowerStatus.standby, CECMessage.PowerStatus.toStandby].contains($0) } ?? true
        switch memory.period.phase {
        case .asking(let until, var statuses):
            guard statuses.keys.contains(device), statuses[device]! == nil else { return .none }
            statuses[device] = .some(status ?? CECMessage.PowerStatus.unknown)
            if device == CECMessage.Address.tv, status != nil, off { memory.period.tvFoundOff = true }
            memory.period.phase = .asking(until: until, statuses: statuses)
            state = .ready(addresses, memory)
            return statuses.values.contains(where: { $0 == nil }) ? .none : wake(at: addresses)
        case .confirming:
            guard device == CECMessage.Address.audioSystem else { return .none }
            // Unanswered, the question is closed too: a standby reported later is the user's.
            memory.period.phase = .settled
            // SAMR alone left it in standby (Debian 12's cec-follower, some receivers): the
            // power-on key, as cec-compliance wakes a device that is not a TV; never after the
            // user's Standby, which its report may well follow.
            guard status != nil, off, !memory.period.sent.contains(.powerOn), !memory.period.switchedOff.contains(device) else {
                state = .ready(addresses, memory)
                return .none
            }
            memory.period.sent.insert(.powerOn)
            state = .ready(addresses, memory)
            return announce([.userControlPressed(from: addresses.logical, to: device, key: CECMessage.Key.powerOnFunction),
                             .userControlReleased(from: addresses.logical, to: device)])
        case .idle, .settled:
            // A device keepalived woke, reported off: the user switched it off.
            guard status != nil, off, memory.period.active, memory.period.woke.contains(device) else { return .none }
            memory.period.switchedOff.insert(device)
            state = .ready(addresses, memory)
            return .none
        }
    }

    /// Asks who is on before waking anything. From Unregistered nobody's answer can reach
    /// keepalived (the kernel drops a directed reply to 15, and a broadcast Report Power Status
    /// is CEC 2.0's), so nothing could be confirmed: nothing is woken.
    private mutating func startWake(at addresses: Addresses, now: Instant) -> Action {
        guard addresses.logical != CECMessage.Address.unregistered else {
            state.memory.period.phase = .settled
            return .none
        }
        var devices = [CECMessage.Address.audioSystem]
        if settings.wakeTV { devices.append(CECMessage.Address.tv) }
        devices.removeAll { state.memory.period.switchedOff.contains($0) }
        guard !devices.isEmpty else {
            state.memory.period.phase = .settled
            return .none
        }
        state.memory.period.phase = .asking(until: now + Self.powerStatusWait, statuses: Dictionary(uniqueKeysWithValues: devices.map { ($0, nil) }))
        return .announce(devices.map { .giveDevicePowerStatus(from: addresses.logical, to: $0) })
    }

    /// The wake, once the power statuses are in (or waited for long enough): each step at most
    /// once per period; what was not on before it is remembered as woken by keepalived.
    private mutating func wake(at addresses: Addresses) -> Action {
        var period = state.memory.period
        guard case .asking(let asked, let statuses) = period.phase else { preconditionFailure("wake while \(period.phase)") }
        func wasOff(_ device: UInt8) -> Bool {
            ![CECMessage.PowerStatus.on, CECMessage.PowerStatus.toOn].contains((statuses[device] ?? nil) ?? CECMessage.PowerStatus.unknown)
        }
        var messages: [CECMessage] = []
        period.phase = .settled
        let audio = CECMessage.Address.audioSystem, tv = CECMessage.Address.tv
        // A receiver that is on while another device is the active source plays that source:
        // asking it for the box's sound would take it from whoever listens. With --cec-wake-tv
        // the box takes the TV too (Active Source), and the receiver follows.
        let servesAnother = !wasOff(audio) && state.memory.sourceElsewhere != nil && !settings.wakeTV
        if !period.switchedOff.contains(audio), !servesAnother, period.sent.insert(.systemAudioModeRequest).inserted {
            messages.append(.systemAudioModeRequest(from: addresses.logical, physicalAddress: addresses.physical))
            period.awaitingAudioMode = true
            if wasOff(audio) {
                period.woke.append(audio)
                messages.append(.giveDevicePowerStatus(from: addresses.logical, to: audio))
                // From the questions' deadline: at most a second later than from now.
                period.phase = .confirming(until: asked + Self.confirmWait)
            }
        }
        if settings.wakeTV, !period.switchedOff.contains(tv) {
            if wasOff(tv), period.sent.insert(.imageViewOn).inserted {
                messages.append(.imageViewOn(from: addresses.logical))
                period.woke.append(tv)
            }
            if period.sent.insert(.activeSource).inserted {
                messages.append(.activeSource(from: addresses.logical, physicalAddress: addresses.physical))
                state.memory.source = true
                state.memory.sourceElsewhere = nil
            }
        }
        state.memory.period = period
        return messages.isEmpty ? .none : announce(messages)
    }

    /// Image View On from Unregistered to a TV that holds hotplug low, once per period, and only
    /// to one keepalived found in standby at the period's start.
    private mutating func wakeUnplugged() -> Action {
        var period = state.memory.period
        guard settings.wakeTV, period.active, period.tvFoundOff, !period.switchedOff.contains(CECMessage.Address.tv),
              period.sent.insert(.imageViewOn).inserted else { return .none }
        period.woke.append(CECMessage.Address.tv)
        state.memory.period = period
        return announce([.imageViewOn(from: CECMessage.Address.unregistered)])
    }

    /// Announcements, the last of them shown in `status`.
    private mutating func announce(_ messages: [CECMessage]) -> Action {
        if let shown = messages.last(where: { CECMessage.Opcode.announced.contains($0.opcode ?? 0) }) {
            state.memory.last = shown
            state.memory.lastOutcome = nil
        }
        return .announce(messages)
    }

    /// What status shows, and all the tests see of the state.
    struct Report: Equatable, Sendable {
        /// `waiting for the adapter`, `claiming a logical address`, `left alone: …`,
        /// `logical address lost: …` or `ready`.
        var state: String
        /// keepalived's addresses once ready.
        var addresses: Addresses?
        /// Whether the box is active.
        var active: Bool
        /// What keepalived woke in this active period, for Standby.
        var woke: [UInt8] = []
        /// Whether keepalived is the active source.
        var source = false
        /// What the user switched off in this period, sorted.
        var switchedOff: [UInt8] = []
    }

    var report: Report {
        let memory = state.memory
        var report = Report(state: "", active: memory.period.active, woke: memory.period.woke, source: memory.source,
                            switchedOff: memory.period.switchedOff.sorted())
        switch state {
        case .closed: report.state = "waiting for the adapter"
        case .claiming: report.state = "claiming a logical address"
        case .leftAlone: report.state = "left alone: another program configured the adapter (--cec-take-over takes it)"
        case .lost: report.state = "logical address lost (another program cleared it?): claiming it again"
        case .ready(let addresses, _):
            report.state = "ready"
            report.addresses = addresses
        }
        return report
    }
}
