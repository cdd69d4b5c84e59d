import _KeepalivedControlProtocol
import CKeepAliveLinuxCEC
import Glibc
import KeepAlive
import Logging

/// The one owner of the CEC adapter's node, on ``CECFollower``'s thread (`keepalive-cec`): opens
/// it, asks the kernel for keepalived's Playback logical address, and waits in one `poll` on the
/// adapter (messages, transmit results, state changes) and on the follower's doorbell (the box,
/// a reload, the stop). Every event goes to its ``CECStateMachine``, and the ``CECStateMachine/Action``
/// it returns is carried out here: nothing else touches the descriptor, as ``owner`` checks.
///
/// The adapter is opened non-blocking, so a transmission never holds the thread: its result
/// comes back through `CEC_RECEIVE` with the sequence number `CEC_TRANSMIT` gave it. A missing
/// or refused node is tried again when its directory changes (``CECNodeWatcher``) or after
/// ``retryInterval``, each reason logged once; an adapter
/// without a physical address yet (no HDMI sink, no EDID) is open and waits for the kernel's
/// state change, which also tells an HDMI replug's new address (the kernel claims the logical
/// address again itself); an unplugged adapter (ENODEV, POLLERR) is closed and waited for.
///
/// ```swift
/// let thread = try startThread(named: "keepalive-cec") { CECAdapter(follower: follower).run() }
/// ```
final class CECAdapter {
    /// The name the TV's menus show, at most 14 bytes.
    static let osdName = "keepalived"
    /// How often a missing or refused node is tried again besides when its directory says it
    /// changed (``CECNodeWatcher``); without inotify, ``pollInterval``.
    static let retryInterval: Duration = .seconds(30)
    static let pollInterval: Duration = .seconds(2)

    let follower: CECFollower
    let logger: Logger
    let owner = ThreadOwner("the CEC adapter's thread")
    private var machine = CECStateMachine(settings: .init())
    private var device: String?
    private var descriptor: Int32 = -1
    private var adapterName: String?
    /// The node's directory while the node is missing or refused.
    private var watcher: CECNodeWatcher?
    /// The last reason the node could not be opened, so that a retry does not log it again.
    private var openFailure: String?
    /// The messages transmitted and not yet answered, by their sequence number.
    private var pending: [UInt32: CECMessage] = [:]
    /// Whether the handle follows the adapter's messages (CEC_MODE_FOLLOWER): only while
    /// keepalived owns a logical address.
    private var following = false
    /// The last reason the handle could not become a follower, said once.
    private var followFailure: Int32?
    /// Players' opens held until the audio system's wake is confirmed (`--power-on-wait` with
    /// `--cec` alone).
    private var gates: [PowerOnGate] = []

    init(follower: CECFollower) {
        self.follower = follower
        logger = follower.logger
    }

    /// Runs until the follower stops.
    func run() {
        owner.claim()
        while true {
            let inbox = follower.take()
            if inbox.stopping { break }
            follow(inbox.settings)
            for change in inbox.box {
                carryOut(change.active ? machine.boxActive(now: .now) : machine.boxIdle())
                if let gate = change.gate { gates.append(gate) }
            }
            if descriptor < 0, device != nil { open() }
            followIfOwned()
            openGates()
            publish()
            wait()
        }
        if descriptor >= 0 { close(descriptor) }
        for gate in gates { gate.runEnded(at: .now) }
    }

    /// A held open goes on once the wake is confirmed, or once nothing is under way any more
    /// (another program has the adapter, the user switched the receiver off).
    private func openGates() {
        guard !gates.isEmpty, !machine.waking else { return }
        for gate in gates { gate.runEnded(at: .now) }
        gates = []
    }

    /// Follows the adapter's messages only while keepalived owns a logical address: as a
    /// follower it must answer what is sent to that address, and while another program's
    /// configuration is left alone (or none is claimed yet) a follower that answers nothing
    /// would keep the kernel from answering Feature Abort for that program's address.
    private func followIfOwned() {
        guard descriptor >= 0 else { return }
        let owned = machine.report.addresses != nil
        guard owned != following else { return }
        guard clinuxcec_set_mode(descriptor, owned ? 1 : 0) == 0 else {
            let code = errno
            if code == ENODEV { return lost(code) }
            if followFailure != code {
                followFailure = code
                logger.warning("CEC: cannot \(owned ? "follow" : "stop following") the adapter's messages: \(Errno(code))", metadata: ["device": "\(device ?? "")"])
            }
            return
        }
        followFailure = nil
        following = owned
    }

    /// A reload's settings: another node replaces the open one, which is let go before the
    /// new settings apply (a `--cec-take-over` they add is for the new adapter only).
    private func follow(_ settings: CECFollower.Settings) {
        owner.preconditionOwned("CECAdapter.follow")
        let otherAdapter = settings.device != device
        if settings.machine != machine.settings || otherAdapter { carryOut(machine.reload(settings.machine, otherAdapter: otherAdapter)) }
        guard otherAdapter else { return }
        if descriptor >= 0 { letGo() }
        device = settings.device
        adapterName = nil
        openFailure = nil
        watcher = nil
    }

    private func open() {
        owner.preconditionOwned("CECAdapter.open")
        guard let device else { return }
        // Watching first: a node created between a failed open and the watch is not missed.
        if watcher == nil { watcher = CECNodeWatcher(device: device) }
        let fd = Glibc.open(device, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return openFailed(errno, "cannot open it") }
        // A follower only once keepalived owns an address (followIfOwned).
        guard clinuxcec_set_mode(fd, 0) == 0 else {
            let code = errno
            close(fd)
            return openFailed(code, "cannot follow its messages")
        }
        var state = clinuxcec_adapter()
        guard clinuxcec_adapter_state(fd, Self.osdName, &state) == 0 else {
            let code = errno
            close(fd)
            return openFailed(code, "cannot read its state")
        }
        let name = withUnsafeBytes(of: state.name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard state.ours != 0 || state.capabilities & UInt32(CEC_CAP_LOG_ADDRS) != 0 else {
            close(fd)
            return openFailed(EOPNOTSUPP, "its driver does not let a program claim a logical address")
        }
        descriptor = fd
        following = false
        followFailure = nil
        adapterName = name
        openFailure = nil
        watcher = nil
        logger.notice("CEC: adapter open", metadata: ["device": "\(device)", "adapter": "\(name)",
                                                       "physical-address": "\(Self.describe(state.physical_address))"])
        carryOut(machine.adapterOpened(configuration: Self.configuration(state), physicalAddress: Self.physical(state.physical_address)))
        // Claimed before (keepalived's own configuration, kept by the kernel across restarts):
        // ready now. Otherwise the claim's state change says when.
        if state.ours != 0 { addressesChanged(physical: state.physical_address, mask: state.logical_address_mask) }
    }

    private static func configuration(_ state: clinuxcec_adapter) -> CECStateMachine.Configuration {
        state.ours != 0 ? .ours : state.configured == 0 ? .none : .foreign
    }

    private static func physical(_ address: UInt16) -> UInt16? {
        address == UInt16(CEC_PHYS_ADDR_INVALID) ? nil : address
    }

    /// The configuration read again for the machine (left alone, or after a lost address).
    private func lookAgain() {
        var state = clinuxcec_adapter()
        guard clinuxcec_adapter_state(descriptor, Self.osdName, &state) == 0 else { return lost(errno) }
        carryOut(machine.adapterConfiguration(Self.configuration(state), physicalAddress: Self.physical(state.physical_address)))
        if state.ours != 0 { addressesChanged(physical: state.physical_address, mask: state.logical_address_mask) }
    }

    /// `again`: keepalived's own claim ended without an address, and its configuration is dropped first.
    private func claim(clearFirst: Bool, again: Bool = false) {
        guard descriptor >= 0 else { return }
        if again {
            logger.notice("CEC: the claim of a logical address ended without one; claiming it again", metadata: ["device": "\(device ?? "")"])
        } else if clearFirst {
            logger.notice("CEC: the adapter had another program's configuration; --cec-take-over: keepalived claims it as a Playback device", metadata: ["device": "\(device ?? "")"])
        }
        guard clinuxcec_claim_playback(descriptor, Self.osdName, clearFirst ? 1 : 0) == 0 else {
            let code = errno
            if code == ENODEV { return lost(code) }
            // Another program configured it in between (EBUSY): looked at again on its next state change.
            logger.warning("CEC: cannot claim a Playback logical address: \(Errno(code))", metadata: ["device": "\(device ?? "")"])
            return
        }
    }

    private func openFailed(_ code: Int32, _ what: String) {
        var why = "\(what): \(Errno(code))"
        switch code {
        // The node missing, or still there for a moment while its adapter goes away: one line.
        case ENOENT, ENXIO, ENODEV: why = "no such adapter (yet); waiting for it"
        case EACCES, EPERM: why += " (the node is usually root:video 0660: run keepalived in group video; the system service needs the drop-in in docs/systemd.md, HDMI-CEC and the sandbox)"
        default: break
        }
        guard why != openFailure else { return }
        openFailure = why
        let level: Logger.Level = [ENOENT, ENXIO, ENODEV].contains(code) ? .notice : .warning
        let again = (watcher?.descriptor ?? -1) >= 0 ? "tried again when the node changes, or in \(Self.retryInterval.components.seconds) s"
            : "tried again every \(Self.pollInterval.components.seconds) s"
        logger.log(level: level, "CEC: adapter unavailable, \(again): \(why)", metadata: ["device": "\(device ?? "")"])
    }

    /// Sleeps until the adapter or the doorbell has something (or the next try at the node).
    private func wait() {
        owner.preconditionOwned("CECAdapter.wait")
        let node = descriptor < 0 ? watcher?.descriptor ?? -1 : -1
        var fds = [pollfd(fd: follower.doorbell.descriptor, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: descriptor, events: Int16(POLLIN | POLLPRI), revents: 0),
                   pollfd(fd: node, events: Int16(POLLIN), revents: 0)]
        let retry = node >= 0 ? Self.retryInterval : Self.pollInterval
        var timeout: Int32 = descriptor < 0 && device != nil ? retry.pollTimeout : -1
        if descriptor >= 0, let deadline = machine.deadline {
            timeout = min(ContinuousClock.now.duration(to: deadline).pollTimeout, 60_000)
        }
        let woken = poll(&fds, 3, timeout)
        // The machine's timers are its events too: whatever woke the poll, one that is due fires.
        if descriptor >= 0, let deadline = machine.deadline, ContinuousClock.now >= deadline {
            carryOut(machine.timerFired(now: .now))
        }
        guard woken > 0 else { return }
        if fds[0].revents != 0 { follower.doorbell.drain() }
        // The loop's next turn tries the node.
        if fds[2].revents != 0 { watcher?.drain() }
        let ready = fds[1].revents
        guard descriptor >= 0, ready != 0 else { return }
        // Events first: a state change may make the messages after it sendable.
        if ready & Int16(POLLPRI) != 0, !takeEvents() { return }
        if ready & Int16(POLLIN) != 0, !takeMessages() { return }
        // The kernel's poll says an unregistered (unplugged) adapter with POLLERR | POLLHUP.
        if ready & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { lost(ENODEV) }
    }

    /// The adapter's state changes; false once it is gone.
    private func takeEvents() -> Bool {
        while true {
            var event = clinuxcec_event()
            guard clinuxcec_dequeue_event(descriptor, &event) == 0 else { return gone(errno) }
            switch event.event {
            case UInt32(CEC_EVENT_STATE_CHANGE):
                stateChanged()
            case UInt32(CEC_EVENT_LOST_MSGS):
                logger.debug("CEC: the kernel dropped messages keepalived did not read in time", metadata: ["device": "\(device ?? "")"])
            default:
                break
            }
        }
    }

    /// Received messages and our transmissions' results; false once the adapter is gone.
    private func takeMessages() -> Bool {
        while true {
            var received = clinuxcec_message()
            guard clinuxcec_receive(descriptor, &received) == 0 else { return gone(errno) }
            let bytes = withUnsafeBytes(of: received.bytes) { Array($0.prefix(Int(received.length))) }
            if received.sequence != 0, received.tx_status != 0 {
                guard let message = pending.removeValue(forKey: received.sequence) ?? CECMessage(bytes: bytes) else { continue }
                carryOut(machine.transmitResult(message, Self.outcome(received.tx_status)))
            } else if let message = CECMessage(bytes: bytes) {
                logger.debug("CEC: received \(message)", metadata: ["device": "\(device ?? "")"])
                carryOut(machine.messageReceived(message))
            }
        }
    }

    /// After a failed take: true when there was simply nothing more (EAGAIN); anything else
    /// (ENODEV: unplugged) closes the adapter, to be opened again, and returns false.
    private func gone(_ code: Int32) -> Bool {
        if code == EAGAIN || code == EWOULDBLOCK { return true }
        lost(code)
        return false
    }

    /// Closes the adapter on a reload that names another one; the machine has let it go already.
    private func letGo() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
        pending = [:]
        logger.notice("CEC: adapter let go (the options changed)", metadata: ["device": "\(device ?? "")"])
    }

    private func lost(_ code: Int32) {
        owner.preconditionOwned("CECAdapter.lost")
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
        pending = [:]
        adapterName = nil
        logger.notice("CEC: adapter gone (\(Errno(code))); waiting for it", metadata: ["device": "\(device ?? "")"])
        carryOut(machine.adapterLost())
    }

    /// After each of the adapter's state changes: whose configuration it is now (another
    /// program may have cleared keepalived's and claimed its own), then, if keepalived's or
    /// none, its addresses, all as the adapter has them now rather than as the event said.
    private func stateChanged() {
        var state = clinuxcec_adapter()
        guard clinuxcec_adapter_state(descriptor, Self.osdName, &state) == 0 else { return lost(errno) }
        let configuration = Self.configuration(state)
        carryOut(machine.configurationChanged(configuration, physicalAddress: Self.physical(state.physical_address), now: .now))
        guard descriptor >= 0, configuration != .foreign, !machine.leftAlone else { return }
        addressesChanged(physical: state.physical_address, mask: state.ours != 0 ? state.logical_address_mask : 0)
    }

    /// The kernel's word on the adapter's addresses: ready once it has both.
    private func addressesChanged(physical: UInt16, mask: UInt16) {
        let before = machine.report.addresses
        if physical != UInt16(CEC_PHYS_ADDR_INVALID), mask != 0 {
            let logical = UInt8(mask.trailingZeroBitCount)
            carryOut(machine.adapterReady(physicalAddress: physical, logicalAddress: logical, now: .now))
            guard before != machine.report.addresses else { return }
            if logical == CECMessage.Address.unregistered {
                logger.notice("CEC: on the bus as Unregistered (every Playback logical address is taken): keepalived can send, but nobody can answer it", metadata: ["device": "\(device ?? "")", "physical-address": "\(Self.describe(physical))"])
            } else {
                logger.notice("CEC: on the bus as a Playback device", metadata: ["device": "\(device ?? "")", "physical-address": "\(Self.describe(physical))",
                                                                                "logical-address": "\(logical)"])
            }
        } else {
            carryOut(machine.adapterUnclaimed(physicalAddress: Self.physical(physical), now: .now))
            if before != nil, physical == UInt16(CEC_PHYS_ADDR_INVALID) {
                logger.notice("CEC: no physical address (HDMI unplugged, or a TV in standby that pulls hotplug low); waiting for one", metadata: ["device": "\(device ?? "")"])
            }
        }
    }

    private func carryOut(_ action: CECStateMachine.Action) {
        owner.preconditionOwned("CECAdapter.carryOut")
        switch action {
        case .none:
            break
        case .announce(let messages):
            for message in messages {
                // What changes a device's state is news; the power status questions around it are not.
                let level: Logger.Level = CECMessage.Opcode.announced.contains(message.opcode ?? 0) ? .notice : .info
                logger.log(level: level, "CEC: \(message)", metadata: ["device": "\(device ?? "")"])
                transmit(message)
            }
        case .answer(let message):
            logger.debug("CEC: answering \(message)", metadata: ["device": "\(device ?? "")"])
            transmit(message)
        case .noReceiver(let message):
            logger.notice("CEC: nothing acknowledged \(message): no device answers at logical address \(message.destination) (\(CECMessage.name(of: message.destination))); said once until one does",
                          metadata: ["device": "\(device ?? "")"])
        case .transmitFailed(let message, let why):
            logger.warning("CEC: cannot send \(message): \(why)", metadata: ["device": "\(device ?? "")"])
        case .retry(let message, let why):
            logger.info("CEC: \(message) not sent (\(why)); sending it again, once", metadata: ["device": "\(device ?? "")"])
            transmit(message)
        case .refused(let abort):
            let opcode = abort.operands.first.map { CECMessage.name(ofOpcode: $0) } ?? "a message"
            let reason = abort.operands.count > 1 ? CECMessage.describe(abortReason: abort.operands[1]) : "no reason given"
            logger.notice("CEC: \(CECMessage.name(of: abort.initiator)) refused keepalived's \(opcode) (Feature Abort: \(reason))", metadata: ["device": "\(device ?? "")"])
        case .claim(let clearFirst):
            claim(clearFirst: clearFirst)
        case .leaveAlone:
            logger.notice("CEC: another program configured the adapter (Kodi's libcec, cec-ctl?); keepalived leaves it alone and waits for it to let go (--cec-take-over takes it)", metadata: ["device": "\(device ?? "")"])
        case .addressLost(let wait):
            logger.notice("CEC: no logical address any more (another program cleared it?); claiming it again in \(wait.components.seconds) s", metadata: ["device": "\(device ?? "")"])
        case .lookAgain:
            lookAgain()
        case .letGo:
            letGo()
        case .claimAgain:
            var state = clinuxcec_adapter()
            guard clinuxcec_adapter_state(descriptor, Self.osdName, &state) == 0 else { return lost(errno) }
            switch Self.configuration(state) {
            case .ours where state.logical_address_mask != 0:
                addressesChanged(physical: state.physical_address, mask: state.logical_address_mask)
            case .foreign:
                stateChanged()
            case .ours, .none:
                claim(clearFirst: state.configured != 0, again: true)
            }
        }
    }

    private func transmit(_ message: CECMessage) {
        guard descriptor >= 0 else { return }
        var sequence: UInt32 = 0
        let bytes = message.bytes
        guard clinuxcec_transmit(descriptor, bytes, UInt32(bytes.count), &sequence) == 0 else {
            let code = errno
            if code == ENODEV { return lost(code) }
            return carryOut(machine.transmitResult(message, .failed("\(Errno(code))")))
        }
        pending[sequence] = message
    }

    private func publish() {
        guard let device else { return follower.publish(nil) }
        let report = machine.report
        let acknowledged: Bool? = switch machine.last?.outcome {
        case .acknowledged: true
        case .notAcknowledged, .failed, .refused: false
        case nil: nil
        }
        follower.publish(CECReport(device: device, state: report.state, adapter: adapterName,
                                   physicalAddress: report.addresses.map { Self.describe($0.physical) },
                                   logicalAddress: report.addresses.map { Int($0.logical) },
                                   lastMessage: machine.last.map { "\($0.message)" }, acknowledged: acknowledged,
                                   systemAudioMode: machine.systemAudioMode))
    }

    /// The transmit status bits as an outcome: acknowledged, nobody there, or why it failed.
    static func outcome(_ status: UInt8) -> CECStateMachine.Outcome {
        // A busy bus (another initiator won, or the frame timed out) may take it a moment later.
        let retry = status & UInt8(CEC_TX_STATUS_ARB_LOST | CEC_TX_STATUS_TIMEOUT) != 0
        if status & UInt8(CEC_TX_STATUS_OK) != 0 { return .acknowledged }
        if status & UInt8(CEC_TX_STATUS_NACK) != 0 { return .notAcknowledged }
        var why: [String] = []
        if status & UInt8(CEC_TX_STATUS_ARB_LOST) != 0 { why.append("arbitration lost") }
        if status & UInt8(CEC_TX_STATUS_LOW_DRIVE) != 0 { why.append("low drive on the bus") }
        if status & UInt8(CEC_TX_STATUS_ERROR) != 0 { why.append("transmit error") }
        if status & UInt8(CEC_TX_STATUS_TIMEOUT) != 0 { why.append("timed out") }
        if status & UInt8(CEC_TX_STATUS_ABORTED) != 0 { why.append("aborted") }
        return .failed(why.isEmpty ? "status 0x\(String(status, radix: 16))" : why.joined(separator: ", "), retry: retry)
    }

    /// `2.0.0.0`, or `none` for the invalid address.
    static func describe(_ physical: UInt16) -> String {
        physical == UInt16(CEC_PHYS_ADDR_INVALID) ? "none" : CECMessage.describe(physicalAddress: physical)
    }
}
