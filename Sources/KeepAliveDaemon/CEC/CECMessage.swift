/// One CEC frame: a header block (initiator and destination, four bits each), an opcode and its
/// operands, as HDMI-CEC 1.4 (HDMI 1.4b Supplement 1, CEC 12) lays them out on the wire. Only the
/// messages keepalived sends or answers have a constructor here; any other received frame is
/// still read (``init(bytes:)``) so that it can be answered with Feature Abort.
///
/// ```swift
/// let request = CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x2000)
/// request.bytes          // [0x45, 0x70, 0x20, 0x00]
/// request.description    // "4→5 System Audio Mode Request (2.0.0.0)"
/// ```
struct CECMessage: Equatable, Sendable, CustomStringConvertible {
    /// The logical address that sends (0-15; 15 is Unregistered).
    var initiator: UInt8
    /// The logical address it goes to; 15 is the broadcast.
    var destination: UInt8
    /// Absent in a poll (a header alone, used to find who answers at an address).
    var opcode: UInt8?
    var operands: [UInt8]

    /// The logical addresses the box addresses.
    enum Address {
        static let tv: UInt8 = 0
        static let audioSystem: UInt8 = 5
        static let broadcast: UInt8 = 15
        /// As an initiator: an adapter without a logical address (the same nibble as broadcast).
        static let unregistered: UInt8 = 15
    }

    /// <Report Power Status>'s operand.
    enum PowerStatus {
        static let on: UInt8 = 0
        static let standby: UInt8 = 1
        static let toOn: UInt8 = 2
        static let toStandby: UInt8 = 3
        /// Not on the wire: nobody answered.
        static let unknown: UInt8 = 0xFF
    }

    /// <User Control Pressed>'s keys keepalived presses.
    enum Key {
        /// Power On Function: on, never a toggle (unlike Power, 0x40).
        static let powerOnFunction: UInt8 = 0x6D
    }

    /// The opcodes keepalived sends, answers or names in its log.
    enum Opcode {
        static let featureAbort: UInt8 = 0x00
        static let imageViewOn: UInt8 = 0x04
        static let userControlPressed: UInt8 = 0x44
        static let userControlReleased: UInt8 = 0x45
        static let standby: UInt8 = 0x36
        static let systemAudioModeRequest: UInt8 = 0x70
        static let setSystemAudioMode: UInt8 = 0x72
        static let routingChange: UInt8 = 0x80
        static let activeSource: UInt8 = 0x82
        static let requestActiveSource: UInt8 = 0x85
        static let setStreamPath: UInt8 = 0x86
        static let giveDevicePowerStatus: UInt8 = 0x8F
        static let reportPowerStatus: UInt8 = 0x90
        static let abort: UInt8 = 0xFF

        /// What keepalived announces: its results are logged and shown in `status`.
        static let announced: Set<UInt8> = [systemAudioModeRequest, imageViewOn, activeSource, standby, userControlPressed]
        /// Everything keepalived sends on its own: a Feature Abort of one of these is logged.
        static let sent: Set<UInt8> = announced.union([giveDevicePowerStatus, userControlReleased])
    }

    init(initiator: UInt8, destination: UInt8, opcode: UInt8?, operands: [UInt8] = []) {
        precondition(initiator < 16 && destination < 16 && operands.count <= 14, "not a CEC frame")
        self.initiator = initiator
        self.destination = destination
        self.opcode = opcode
        self.operands = operands
    }

    /// A frame as the adapter delivered it; nil when empty or longer than the 16 bytes CEC allows.
    init?(bytes: [UInt8]) {
        guard let header = bytes.first, bytes.count <= 16 else { return nil }
        self.init(initiator: header >> 4, destination: header & 0x0F, opcode: bytes.count > 1 ? bytes[1] : nil, operands: Array(bytes.dropFirst(2)))
    }

    /// The frame's bytes, header first.
    var bytes: [UInt8] {
        [initiator << 4 | destination] + (opcode.map { [$0] } ?? []) + operands
    }

    var isBroadcast: Bool { destination == Address.broadcast }

    /// The physical address a message's first two operands carry (Active Source, Set Stream Path).
    var physicalAddress: UInt16? {
        operands.count >= 2 ? UInt16(operands[0]) << 8 | UInt16(operands[1]) : nil
    }

    /// <Feature Abort>'s reason, as CEC 1.4 names it.
    static func describe(abortReason: UInt8) -> String {
        switch abortReason {
        case 0: "unrecognized opcode"
        case 1: "not in correct mode to respond"
        case 2: "cannot provide source"
        case 3: "invalid operand"
        case 4: "refused"
        case 5: "unable to determine"
        default: "reason \(abortReason)"
        }
    }

    /// An opcode's name for the log.
    static func name(ofOpcode opcode: UInt8) -> String {
        CECMessage(initiator: 0, destination: 0, opcode: opcode).description.replacingPrefix("0→0 ")
    }

    /// "the audio system" for 5: what the log names as the other end.
    static func name(of address: UInt8) -> String {
        switch address {
        case Address.tv: "the TV"
        case Address.audioSystem: "the audio system"
        case Address.broadcast: "every device"
        default: "logical address \(address)"
        }
    }

    /// `2.0.0.0` for 0x2000.
    static func describe(physicalAddress: UInt16) -> String {
        "\(physicalAddress >> 12).\(physicalAddress >> 8 & 0xF).\(physicalAddress >> 4 & 0xF).\(physicalAddress & 0xF)"
    }

    /// `4→5 System Audio Mode Request (2.0.0.0)`, the opcode named when keepalived knows it.
    var description: String {
        let head = "\(initiator == Address.unregistered ? "unregistered" : "\(initiator)")→\(destination == Address.broadcast ? "all" : "\(destination)")"
        guard let opcode else { return "\(head) poll" }
        let physical = operands.count >= 2 ? " (\(Self.describe(physicalAddress: UInt16(operands[0]) << 8 | UInt16(operands[1]))))" : ""
        switch opcode {
        case Opcode.systemAudioModeRequest: return "\(head) System Audio Mode Request\(physical)"
        case Opcode.imageViewOn: return "\(head) Image View On"
        case Opcode.activeSource: return "\(head) Active Source\(physical)"
        case Opcode.standby: return "\(head) Standby"
        case Opcode.setSystemAudioMode: return "\(head) Set System Audio Mode (\(operands.first == 1 ? "on" : "off"))"
        case Opcode.reportPowerStatus:
            let status = ["on", "standby", "standby→on", "on→standby"]
            return "\(head) Report Power Status\(operands.first.map { $0 < 4 ? " (\(status[Int($0)]))" : "" } ?? "")"
        case Opcode.giveDevicePowerStatus: return "\(head) Give Device Power Status"
        case Opcode.userControlPressed:
            return "\(head) User Control Pressed\(operands.first == Key.powerOnFunction ? " (Power On Function)" : "")"
        case Opcode.userControlReleased: return "\(head) User Control Released"
        case Opcode.routingChange: return "\(head) Routing Change"
        case Opcode.requestActiveSource: return "\(head) Request Active Source"
        case Opcode.setStreamPath: return "\(head) Set Stream Path\(physical)"
        case Opcode.featureAbort:
            guard operands.count >= 2 else { return "\(head) Feature Abort" }
            return "\(head) Feature Abort (\(Self.name(ofOpcode: operands[0])): \(Self.describe(abortReason: operands[1])))"
        default:
            let hex = String(opcode, radix: 16, uppercase: true)
            return "\(head) opcode 0x\(hex.count == 1 ? "0" : "")\(hex)"
        }
    }

    /// <System Audio Mode Request> with the box's physical address: asks the audio system to
    /// turn on and play the box's sound itself. The TV is not addressed, so its screen stays off.
    static func systemAudioModeRequest(from initiator: UInt8, physicalAddress: UInt16) -> CECMessage {
        CECMessage(initiator: initiator, destination: Address.audioSystem, opcode: Opcode.systemAudioModeRequest, operands: physicalAddress.bigEndianBytes)
    }

    /// <Image View On>: turns the TV on (it shows its current input).
    static func imageViewOn(from initiator: UInt8) -> CECMessage {
        // From Unregistered (0xF0) too: the kernel lets an unconfigured adapter send just this.
        CECMessage(initiator: initiator, destination: Address.tv, opcode: Opcode.imageViewOn)
    }

    /// <Active Source>, broadcast: the TV switches to the box's input.
    static func activeSource(from initiator: UInt8, physicalAddress: UInt16) -> CECMessage {
        CECMessage(initiator: initiator, destination: Address.broadcast, opcode: Opcode.activeSource, operands: physicalAddress.bigEndianBytes)
    }

    /// <Give Device Power Status>: is it on?
    static func giveDevicePowerStatus(from initiator: UInt8, to destination: UInt8) -> CECMessage {
        CECMessage(initiator: initiator, destination: destination, opcode: Opcode.giveDevicePowerStatus)
    }

    /// <User Control Pressed> of one key.
    static func userControlPressed(from initiator: UInt8, to destination: UInt8, key: UInt8) -> CECMessage {
        CECMessage(initiator: initiator, destination: destination, opcode: Opcode.userControlPressed, operands: [key])
    }

    /// <User Control Released>: the key pressed before is let go.
    static func userControlReleased(from initiator: UInt8, to destination: UInt8) -> CECMessage {
        CECMessage(initiator: initiator, destination: destination, opcode: Opcode.userControlReleased)
    }

    /// <Standby> to one device.
    static func standby(from initiator: UInt8, to destination: UInt8) -> CECMessage {
        CECMessage(initiator: initiator, destination: destination, opcode: Opcode.standby)
    }

    /// <Report Power Status> "on" (0x00): keepalived runs while the box does.
    static func reportPowerStatusOn(from initiator: UInt8, to destination: UInt8) -> CECMessage {
        CECMessage(initiator: initiator, destination: destination, opcode: Opcode.reportPowerStatus, operands: [0x00])
    }

    /// <Feature Abort> of `opcode`, reason "Unrecognized opcode" (0x00).
    static func featureAbort(from initiator: UInt8, to destination: UInt8, opcode: UInt8) -> CECMessage {
        CECMessage(initiator: initiator, destination: destination, opcode: Opcode.featureAbort, operands: [opcode, 0x00])
    }

    /// What a follower at `own` must answer to this received frame, if anything. The kernel
    /// answers the core's messages itself while passthrough is off (Give Physical Address, Give
    /// OSD Name, Give Device Vendor ID, Get CEC Version, Abort, Give Features) and hands over the
    /// rest: Give Device Power Status is answered "on", every other directed message a follower
    /// does not handle gets Feature Abort, as CEC 1.4 requires. Broadcasts, replies (Feature
    /// Abort itself) and frames from Unregistered (an answer could not reach it) get nothing.
    func answer(at own: UInt8) -> CECMessage? {
        guard let opcode, destination == own, !isBroadcast, initiator != Address.broadcast, initiator != own else { return nil }
        switch opcode {
        case Opcode.giveDevicePowerStatus:
            return .reportPowerStatusOn(from: own, to: initiator)
        case Opcode.featureAbort, Opcode.setSystemAudioMode, Opcode.reportPowerStatus, Opcode.standby, Opcode.userControlReleased:
            // Feature Abort is never answered; the next two answer what keepalived asked; a
            // Standby is heard (keepalived has no screen or amplifier to turn off), not refused.
            return nil
        default:
            return .featureAbort(from: own, to: initiator, opcode: opcode)
        }
    }
}

extension String {
    fileprivate func replacingPrefix(_ prefix: String) -> String {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : self
    }
}

extension UInt16 {
    /// A physical address as CEC sends it: its high byte first.
    fileprivate var bigEndianBytes: [UInt8] { [UInt8(self >> 8), UInt8(self & 0xFF)] }
}
