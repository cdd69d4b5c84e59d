import Testing

@testable import KeepAliveDaemon

/// The sequences of issue 58's second audit, one test per item: what `--cec` must not do to a
/// TV or receiver beside another CEC program, on a bus that refuses or aborts, or when the user
/// switched something off.
@Suite("CEC state machine, doing no harm")
struct CECStateMachineHarmTests {
    static let t0 = ContinuousClock.now
    static let later = t0 + .seconds(5)
    static let request = CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x1000)
    static let broadcastStandby = CECMessage(initiator: 0, destination: 15, opcode: CECMessage.Opcode.standby)

    static func report(_ from: UInt8, _ status: UInt8) -> CECMessage {
        CECMessage(initiator: from, destination: 4, opcode: CECMessage.Opcode.reportPowerStatus, operands: [status])
    }

    static func audioMode(on: Bool) -> CECMessage {
        CECMessage(initiator: 5, destination: 15, opcode: CECMessage.Opcode.setSystemAudioMode, operands: [on ? 1 : 0])
    }

    /// Opened, claimed and ready at 1.0.0.0, logical address 4.
    static func ready(wakeTV: Bool = false, standby: Bool = true, takeOver: Bool = false) -> CECStateMachine {
        var machine = CECStateMachine(settings: .init(wakeTV: wakeTV, standby: standby, takeOver: takeOver))
        _ = machine.adapterOpened(configuration: .none, physicalAddress: 0x1000)
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: t0)
        return machine
    }

    @Test("item 1: another program takes the adapter mid-period: keepalived steps aside, forgets what it woke, sends no Standby; back once it lets go")
    func takenMidPeriod() {
        var machine = Self.ready(wakeTV: true)
        _ = machine.boxActive(now: Self.t0)
        _ = machine.timerFired(now: Self.later)
        #expect(machine.report.woke == [5, 0])
        // libcec clears keepalived's configuration and claims its own (Kodi at 4, as Playback 1).
        #expect(machine.configurationChanged(.foreign, physicalAddress: 0x1000, now: Self.later) == .leaveAlone)
        #expect(machine.leftAlone)
        #expect(machine.report.state.hasPrefix("left alone: another program configured the adapter"))
        #expect(machine.report.woke == [] && !machine.report.source && machine.report.addresses == nil)
        #expect(!machine.waking)
        // Its state changes while it has the adapter: still its own, nothing said again.
        #expect(machine.configurationChanged(.foreign, physicalAddress: 0x1000, now: Self.later) == .none)
        #expect(machine.boxIdle() == .none)
        // It lets go: keepalived claims its address, and the next period wakes as ever.
        #expect(machine.configurationChanged(.none, physicalAddress: 0x1000, now: Self.later) == .claim(clearFirst: false))
        #expect(machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: Self.later) == .none)
        #expect(machine.boxActive(now: Self.later) == .announce([.giveDevicePowerStatus(from: 4, to: 5), .giveDevicePowerStatus(from: 4, to: 0)]))
        // Taken while the address was being claimed, or while it was lost: the same.
        var claiming = CECStateMachine(settings: .init(standby: true))
        _ = claiming.adapterOpened(configuration: .none, physicalAddress: 0x1000)
        #expect(claiming.configurationChanged(.foreign, physicalAddress: 0x1000, now: Self.t0) == .leaveAlone)
        var lost = Self.ready()
        _ = lost.adapterUnclaimed(physicalAddress: 0x1000, now: Self.t0)
        #expect(lost.configurationChanged(.foreign, physicalAddress: 0x1000, now: Self.t0) == .leaveAlone)
        // keepalived's own configuration, or none, is no news: the addresses follow.
        var ours = Self.ready()
        #expect(ours.configurationChanged(.ours, physicalAddress: 0x1000, now: Self.t0) == .none)
        #expect(ours.configurationChanged(.none, physicalAddress: 0x1000, now: Self.t0) == .none)
        #expect(ours.report.state == "ready")
    }

    @Test("item 1: with --cec-take-over the adapter is taken back after the back-off of a lost address, not fought in a loop")
    func takenBack() {
        var machine = Self.ready(takeOver: true)
        _ = machine.boxActive(now: Self.t0)
        _ = machine.messageReceived(Self.report(5, 1))
        #expect(machine.configurationChanged(.foreign, physicalAddress: 0x1000, now: Self.t0) == .addressLost(reclaimIn: .seconds(2)))
        #expect(machine.report.woke == [])
        #expect(machine.timerFired(now: Self.t0 + .seconds(2)) == .lookAgain)
        #expect(machine.adapterConfiguration(.foreign, physicalAddress: 0x1000) == .claim(clearFirst: true))
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: Self.t0 + .seconds(3))
        #expect(machine.configurationChanged(.foreign, physicalAddress: 0x1000, now: Self.t0 + .seconds(4)) == .addressLost(reclaimIn: .seconds(4)))
        // Nothing woken in this period after it, nor put in standby.
        #expect(machine.boxIdle() == .none)
    }

    @Test("item 2: hotplug low mid-period: no Image View On from Unregistered to a TV that was on at the period's start")
    func hotplugLowMidPeriod() {
        var machine = Self.ready(wakeTV: true)
        _ = machine.boxActive(now: Self.t0)
        #expect(machine.messageReceived(Self.report(0, 0)) == .none)
        #expect(machine.messageReceived(Self.report(5, 0)) == .announce([Self.request, .activeSource(from: 4, physicalAddress: 0x1000)]))
        // The user switches the TV off with its remote; it pulls hotplug low.
        #expect(machine.adapterUnclaimed(physicalAddress: nil, now: Self.later) == .none)
        #expect(machine.report.woke == [])
        #expect(machine.boxIdle() == .none)
        // A TV that reported standby at the period's start, still being asked about the rest: woken.
        var off = Self.ready(wakeTV: true)
        _ = off.boxActive(now: Self.t0)
        #expect(off.messageReceived(Self.report(0, 1)) == .none)
        #expect(off.adapterUnclaimed(physicalAddress: nil, now: Self.t0) == .announce([.imageViewOn(from: 15)]))
    }

    @Test("item 3: from Unregistered nothing is asked or woken, and nothing is put in standby")
    func unregistered() {
        var machine = CECStateMachine(settings: .init(wakeTV: true, standby: true))
        _ = machine.adapterOpened(configuration: .none, physicalAddress: 0x1000)
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 15, now: Self.t0)
        #expect(machine.boxActive(now: Self.t0) == .none)
        #expect(machine.timerFired(now: Self.later) == .none)
        #expect(machine.report.woke == [])
        #expect(machine.boxIdle() == .none)
        // Woken from a logical address, then on the bus as Unregistered (a replug where every
        // Playback address was taken): no Standby from there.
        var moved = Self.ready()
        _ = moved.boxActive(now: Self.t0)
        _ = moved.messageReceived(Self.report(5, 1))
        _ = moved.messageReceived(Self.report(5, 0))
        #expect(moved.report.woke == [5])
        _ = moved.adapterReady(physicalAddress: 0x2000, logicalAddress: 15, now: Self.later)
        #expect(moved.boxIdle() == .none)
    }

    @Test("item 4: a refused or aborted wake is not counted as woken, and goes again once the adapter is ready")
    func onlyAcknowledged() {
        var machine = Self.ready()
        _ = machine.boxActive(now: Self.t0)
        #expect(machine.messageReceived(Self.report(5, 1)) == .announce([Self.request, .giveDevicePowerStatus(from: 4, to: 5)]))
        // A hotplug bounce unconfigures the adapter: the kernel aborts the request.
        #expect(machine.adapterUnclaimed(physicalAddress: nil, now: Self.t0) == .none)
        #expect(machine.transmitResult(Self.request, .failed("aborted")) == .transmitFailed(Self.request, "aborted"))
        #expect(machine.report.woke == [])
        // Back with an address: the wake starts over, asking first.
        #expect(machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: Self.later) == .announce([.giveDevicePowerStatus(from: 4, to: 5)]))
        #expect(machine.messageReceived(Self.report(5, 1)) == .announce([Self.request, .giveDevicePowerStatus(from: 4, to: 5)]))
        #expect(machine.report.woke == [5])
        // Refused by the kernel (EPERM), nobody acknowledging it: no Standby for it.
        for outcome: CECStateMachine.Outcome in [.failed("Operation not permitted (EPERM)"), .notAcknowledged] {
            var refused = Self.ready()
            _ = refused.boxActive(now: Self.t0)
            _ = refused.messageReceived(Self.report(5, 1))
            _ = refused.transmitResult(Self.request, outcome)
            #expect(refused.report.woke == [])
            #expect(refused.boxIdle() == .none)
        }
        // Acknowledged: counted, and put in standby at idle.
        var heard = Self.ready()
        _ = heard.boxActive(now: Self.t0)
        _ = heard.messageReceived(Self.report(5, 1))
        #expect(heard.transmitResult(Self.request, .acknowledged) == .none)
        #expect(heard.boxIdle() == .announce([.standby(from: 4, to: 5)]))
        // Refused while the address was being claimed (ENONET): the TV's Image View On too.
        var tv = Self.ready(wakeTV: true)
        _ = tv.boxActive(now: Self.t0)
        _ = tv.timerFired(now: Self.later)
        _ = tv.adapterUnclaimed(physicalAddress: 0x1000, now: Self.later)
        #expect(tv.transmitResult(.imageViewOn(from: 4), .failed("Machine is not on the network (ENONET)")) == .transmitFailed(.imageViewOn(from: 4), "Machine is not on the network (ENONET)"))
        #expect(tv.report.woke == [5])
    }

    @Test("item 5: the power-on key never follows the user's Standby, nor a report after its deadline")
    func powerOnKey() {
        var machine = Self.ready()
        _ = machine.boxActive(now: Self.t0)
        _ = machine.messageReceived(Self.report(5, 1))
        // The user switches the system off before the receiver's (late) report.
        #expect(machine.messageReceived(Self.broadcastStandby) == .none)
        #expect(machine.messageReceived(Self.report(5, 1)) == .none)
        #expect(!machine.waking)
        #expect(machine.boxIdle() == .none)
        // No report in time: the confirmation is over; a standby reported later is the user's.
        var late = Self.ready()
        _ = late.boxActive(now: Self.t0)
        _ = late.messageReceived(Self.report(5, 1))
        #expect(late.deadline == Self.t0 + CECStateMachine.powerStatusWait + CECStateMachine.confirmWait)
        #expect(late.timerFired(now: Self.t0 + .seconds(1)) == .none)
        #expect(late.waking)
        #expect(late.timerFired(now: Self.later + .seconds(10)) == .none)
        #expect(late.messageReceived(Self.report(5, 1)) == .none)
        #expect(late.report.switchedOff == [5])
    }

    @Test("item 7: the wake is under way while asked and until confirmed, and not at all without the adapter or beside another program")
    func waking() {
        var machine = Self.ready()
        #expect(!machine.waking)
        _ = machine.boxActive(now: Self.t0)
        #expect(machine.waking)
        _ = machine.messageReceived(Self.report(5, 1))
        #expect(machine.waking)
        _ = machine.messageReceived(Self.report(5, 0))
        #expect(!machine.waking)
        // On already: nothing to confirm.
        var on = Self.ready()
        _ = on.boxActive(now: Self.t0)
        _ = on.messageReceived(Self.report(5, 0))
        #expect(!on.waking)
        // Claiming at a physical address: due as soon as the address is there.
        var claiming = CECStateMachine(settings: .init())
        _ = claiming.adapterOpened(configuration: .none, physicalAddress: 0x1000)
        _ = claiming.boxActive(now: Self.t0)
        #expect(claiming.waking)
        // Left alone, or no adapter: nothing will be woken.
        var alone = CECStateMachine(settings: .init())
        _ = alone.adapterOpened(configuration: .foreign, physicalAddress: 0x1000)
        _ = alone.boxActive(now: Self.t0)
        #expect(!alone.waking)
        var closed = CECStateMachine(settings: .init())
        _ = closed.boxActive(now: Self.t0)
        #expect(!closed.waking)
    }

    @Test("item 9: a reload naming another adapter lets the open one go as it is, and --cec-take-over applies to the next")
    func reloadOtherAdapter() {
        var machine = CECStateMachine(settings: .init())
        _ = machine.adapterOpened(configuration: .foreign, physicalAddress: 0x1000)
        #expect(machine.reload(.init(takeOver: true), otherAdapter: true) == .letGo)
        #expect(machine.report.state == "waiting for the adapter")
        #expect(machine.adapterOpened(configuration: .foreign, physicalAddress: 0x2000) == .claim(clearFirst: true))
        // The same adapter: taken now.
        var same = CECStateMachine(settings: .init())
        _ = same.adapterOpened(configuration: .foreign, physicalAddress: 0x1000)
        #expect(same.reload(.init(takeOver: true), otherAdapter: false) == .lookAgain)
        // Nothing open: nothing to let go.
        var closed = CECStateMachine(settings: .init())
        #expect(closed.reload(.init(takeOver: true), otherAdapter: true) == .none)
    }

    @Test("decided: no System Audio Mode Request to a receiver that is on while another device is the source (without --cec-wake-tv)")
    func receiverServesAnother() {
        let setTopBox = CECMessage(initiator: 3, destination: 15, opcode: CECMessage.Opcode.activeSource, operands: [0x20, 0x00])
        var machine = Self.ready()
        _ = machine.messageReceived(setTopBox)
        _ = machine.boxActive(now: Self.t0)
        #expect(machine.messageReceived(Self.report(5, 0)) == .none)
        #expect(machine.report.woke == [])
        _ = machine.boxIdle()
        // The receiver in standby: woken as ever (it plays nobody's sound).
        _ = machine.boxActive(now: Self.later)
        #expect(machine.messageReceived(Self.report(5, 1)) == .announce([Self.request, .giveDevicePowerStatus(from: 4, to: 5)]))
        _ = machine.boxIdle()
        // The user's Standby ends the other source: the next period asks the receiver again.
        _ = machine.messageReceived(Self.broadcastStandby)
        _ = machine.boxActive(now: Self.later)
        #expect(machine.messageReceived(Self.report(5, 0)) == .announce([Self.request]))
        // With --cec-wake-tv the box takes the TV, and the receiver follows.
        var tv = Self.ready(wakeTV: true)
        _ = tv.messageReceived(setTopBox)
        _ = tv.boxActive(now: Self.t0)
        _ = tv.messageReceived(Self.report(0, 0))
        #expect(tv.messageReceived(Self.report(5, 0)) == .announce([Self.request, .activeSource(from: 4, physicalAddress: 0x1000)]))
    }

    @Test("decided: no Standby to a receiver someone else turned System Audio Mode on with (the TV, over ARC)")
    func receiverUsedByTV() {
        var machine = Self.ready()
        _ = machine.boxActive(now: Self.t0)
        _ = machine.messageReceived(Self.report(5, 1))
        // The answer to keepalived's own request.
        #expect(machine.messageReceived(Self.audioMode(on: true)) == .none)
        _ = machine.messageReceived(Self.report(5, 0))
        // Later the TV asks the receiver for its own sound.
        #expect(machine.messageReceived(Self.audioMode(on: true)) == .none)
        #expect(machine.boxIdle() == .none)
        // Only keepalived's answer: Standby as ever.
        var alone = Self.ready()
        _ = alone.boxActive(now: Self.t0)
        _ = alone.messageReceived(Self.report(5, 1))
        _ = alone.messageReceived(Self.audioMode(on: true))
        _ = alone.messageReceived(Self.report(5, 0))
        #expect(alone.boxIdle() == .announce([.standby(from: 4, to: 5)]))
    }

    @Test("decided: a claim that ends without an address at a steady physical address is made again, after a wait that grows")
    func claimAgain() {
        var machine = CECStateMachine(settings: .init())
        _ = machine.adapterOpened(configuration: .none, physicalAddress: 0x1000)
        #expect(machine.deadline == nil)
        // The kernel's state change: a physical address, no logical one (the claim failed).
        #expect(machine.adapterUnclaimed(physicalAddress: 0x1000, now: Self.t0) == .none)
        #expect(machine.deadline == Self.t0 + CECStateMachine.claimWait)
        #expect(machine.timerFired(now: Self.t0 + .seconds(1)) == .none)
        #expect(machine.timerFired(now: Self.t0 + CECStateMachine.claimWait) == .claimAgain)
        #expect(machine.deadline == nil)
        _ = machine.adapterUnclaimed(physicalAddress: 0x1000, now: Self.t0)
        #expect(machine.deadline == Self.t0 + CECStateMachine.claimWait * 2)
        // It succeeds: nothing more.
        _ = machine.adapterReady(physicalAddress: 0x1000, logicalAddress: 4, now: Self.t0)
        #expect(machine.deadline == nil)
        // Without a physical address nothing is claimed: nothing to wait for.
        var unplugged = CECStateMachine(settings: .init())
        _ = unplugged.adapterOpened(configuration: .none, physicalAddress: nil)
        _ = unplugged.adapterUnclaimed(physicalAddress: nil, now: Self.t0)
        #expect(unplugged.deadline == nil)
    }
}
