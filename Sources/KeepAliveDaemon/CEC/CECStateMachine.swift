/// Every decision `--cec` makes, without I/O: which messages go on the HDMI-CEC bus when the box
/// becomes active or idle, and how the adapter's comings and goings change that. ``CECFollower``
/// feeds it one event at a time, on its own thread, and carries out the ``Action`` each returns.
///
/// The box is **active** from the first output with real audio to the last one going idle
/// (``OutputActivity``). Becoming active, it asks the audio system (logical address 5) to play
/// the box's sound (System Audio Mode Request), which leaves a TV's screen off; with
/// ``Settings/wakeTV`` it also turns the TV on (Image View On) and makes the box its input
/// (Active Source, broadcast). Becoming idle, with ``Settings/standby``, it sends Standby to what
/// it woke and nothing else. Nothing is sent at start, on reload or when the adapter comes back
/// unless the box is active then: a message only ever follows real audio.
///
/// ```swift
/// var machine = CECStateMachine(settings: .init())
/// machine.adapterOpened()                                        // .none
/// machine.adapterReady(physicalAddress: 0x2000, logicalAddress: 4)   // .none: nothing plays
/// machine.boxActive()       // .announce([4→5 System Audio Mode Request (2.0.0.0)])
/// machine.boxIdle()         // .none: no --cec-standby
/// ```
struct CECStateMachine: Sendable {
    /// What the options ask for.
    struct Settings: Equatable, Sendable {
        /// `--cec-wake-tv`: also Image View On to the TV and Active Source.
        var wakeTV = false
        /// `--cec-standby`: Standby to what was woken once the box is idle.
        var standby = false
    }

    /// What became of a transmitted message.
    enum Outcome: Equatable, Sendable {
        /// The destination acknowledged it (a broadcast: nobody refused it).
        case acknowledged
        /// Nothing acknowledged it: no device at that logical address.
        case notAcknowledged
        /// The adapter could not send it (arbitration lost, a low drive, a refused ioctl).
        case failed(String)
    }

    /// What the follower must do.
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
    }

    /// Where keepalived is on the bus, once the kernel claimed its logical address.
    struct Addresses: Equatable, Sendable {
        var physical: UInt16
        var logical: UInt8
    }

    /// What a box's activity left to undo: the devices keepalived woke, for `--cec-standby`.
    private struct Box: Equatable, Sendable {
        var active = false
        /// The logical addresses woken since the box became active, the audio system first.
        var woke: [UInt8] = []
    }

    private enum State: Equatable, Sendable {
        /// No adapter open: the node is missing, refused, or was unplugged.
        case closed(Box)
        /// The adapter is open, but has no logical address (no physical address yet, or the
        /// claim is under way).
        case claiming(Box)
        /// keepalived has its logical address and may send.
        case ready(Addresses, Box)
    }

    private(set) var settings: Settings
    private var state = State.closed(Box())
    /// The last announcement sent and what became of it (nil while the adapter has not said).
    private(set) var last: (message: CECMessage, outcome: Outcome?)?
    /// Whether the audio system said it plays the box's sound (Set System Audio Mode), nil
    /// until it said anything.
    private(set) var systemAudioMode: Bool?
    /// Destinations whose silence (no acknowledgement) was logged, until one answers again.
    private var unheard: Set<UInt8> = []

    init(settings: Settings) {
        self.settings = settings
    }

    /// A reload's settings: they apply from the next change of the box; nothing is sent now.
    mutating func apply(_ settings: Settings) -> Action {
        self.settings = settings
        return .none
    }

    /// The adapter's node was opened.
    mutating func adapterOpened() -> Action {
        guard case .closed(let box) = state else { preconditionFailure("adapterOpened while \(state)") }
        state = .claiming(box)
        return .none
    }

    /// The adapter has a physical address and keepalived's logical address (again, or other
    /// ones after an HDMI replug). An active box announces itself at the new address.
    mutating func adapterReady(physicalAddress: UInt16, logicalAddress: UInt8) -> Action {
        let addresses = Addresses(physical: physicalAddress, logical: logicalAddress)
        switch state {
        case .closed:
            preconditionFailure("adapterReady while closed")
        case .claiming(var box):
            let action = box.active ? wake(&box, at: addresses) : .none
            state = .ready(addresses, box)
            return action
        case .ready(let old, var box):
            guard old != addresses else { return .none }
            let action = box.active ? wake(&box, at: addresses) : .none
            state = .ready(addresses, box)
            return action
        }
    }

    /// The adapter lost its addresses (HDMI unplugged: no physical address) but is still open.
    mutating func adapterUnclaimed() -> Action {
        switch state {
        case .closed: preconditionFailure("adapterUnclaimed while closed")
        case .claiming: return .none
        case .ready(_, let box): state = .claiming(box)
        }
        return .none
    }

    /// The adapter is gone (unplugged, ENODEV) and its node was closed.
    mutating func adapterLost() -> Action {
        switch state {
        case .closed: preconditionFailure("adapterLost while closed")
        case .claiming(let box), .ready(_, let box): state = .closed(box)
        }
        return .none
    }

    /// The first output with real audio: the box is active.
    mutating func boxActive() -> Action {
        switch state {
        case .closed(var box):
            precondition(!box.active, "boxActive while active")
            box.active = true
            state = .closed(box)
            return .none
        case .claiming(var box):
            precondition(!box.active, "boxActive while active")
            box.active = true
            state = .claiming(box)
            return .none
        case .ready(let addresses, var box):
            precondition(!box.active, "boxActive while active")
            box.active = true
            let action = wake(&box, at: addresses)
            state = .ready(addresses, box)
            return action
        }
    }

    /// The last output went idle: the box is idle. Standby, if asked for, goes only to what the
    /// box woke, and only while the adapter can send; what it could not reach is forgotten.
    mutating func boxIdle() -> Action {
        switch state {
        case .closed(let box), .claiming(let box):
            precondition(box.active, "boxIdle while idle")
            if case .closed = state { state = .closed(Box()) } else { state = .claiming(Box()) }
            return .none
        case .ready(let addresses, let box):
            precondition(box.active, "boxIdle while idle")
            state = .ready(addresses, Box())
            guard settings.standby, !box.woke.isEmpty else { return .none }
            let messages = box.woke.map { CECMessage.standby(from: addresses.logical, to: $0) }
            last = (messages.last!, nil)
            return .announce(messages)
        }
    }

    /// The adapter's word on a message keepalived sent (announcement or answer).
    mutating func transmitResult(_ message: CECMessage, _ outcome: Outcome) -> Action {
        if case .closed = state { preconditionFailure("transmitResult while closed") }
        let announced = [CECMessage.Opcode.systemAudioModeRequest, CECMessage.Opcode.imageViewOn,
                         CECMessage.Opcode.activeSource, CECMessage.Opcode.standby].contains(message.opcode)
        guard announced else { return .none }
        if last?.message == message { last = (message, outcome) }
        switch outcome {
        case .acknowledged:
            unheard.remove(message.destination)
            return .none
        case .notAcknowledged:
            guard unheard.insert(message.destination).inserted else { return .none }
            return .noReceiver(message)
        case .failed(let why):
            return .transmitFailed(message, why)
        }
    }

    /// Another device's message to keepalived (or a broadcast): answered as a follower must.
    mutating func messageReceived(_ message: CECMessage) -> Action {
        switch state {
        case .closed:
            preconditionFailure("messageReceived while closed")
        case .claiming:
            return .none
        case .ready(let addresses, _):
            if message.opcode == CECMessage.Opcode.setSystemAudioMode, message.initiator == CECMessage.Address.audioSystem {
                systemAudioMode = message.operands.first == 1
            }
            return message.answer(at: addresses.logical).map { .answer($0) } ?? .none
        }
    }

    /// The messages that wake what the settings ask for, remembered for Standby.
    private mutating func wake(_ box: inout Box, at addresses: Addresses) -> Action {
        var messages = [CECMessage.systemAudioModeRequest(from: addresses.logical, physicalAddress: addresses.physical)]
        box.woke = [CECMessage.Address.audioSystem]
        if settings.wakeTV {
            messages.append(.imageViewOn(from: addresses.logical))
            messages.append(.activeSource(from: addresses.logical, physicalAddress: addresses.physical))
            box.woke.append(CECMessage.Address.tv)
        }
        last = (messages.last!, nil)
        return .announce(messages)
    }

    /// What status shows, and all the tests see of the state.
    struct Report: Equatable, Sendable {
        /// `waiting for the adapter`, `claiming a logical address` or `ready`.
        var state: String
        /// keepalived's addresses once ready.
        var addresses: Addresses?
        /// Whether the box is active.
        var active: Bool
        /// What the box woke in this active period, for Standby.
        var woke: [UInt8] = []
    }

    var report: Report {
        switch state {
        case .closed(let box): Report(state: "waiting for the adapter", active: box.active, woke: box.woke)
        case .claiming(let box): Report(state: "claiming a logical address", active: box.active, woke: box.woke)
        case .ready(let addresses, let box): Report(state: "ready", addresses: addresses, active: box.active, woke: box.woke)
        }
    }
}
