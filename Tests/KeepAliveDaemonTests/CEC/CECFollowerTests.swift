import _KeepalivedControlProtocol
import Glibc
import KeepAlive
import Logging
import TestSupport
import Testing

@testable import KeepAliveDaemon

/// ``CECFollower``, the daemon's side of `--cec`, without an adapter: what it queues, and its
/// thread's start, report and stop around a node that does not exist.
@Suite("CEC follower")
struct CECFollowerTests {
    static let logger = Logger.quiet

    @Test("without --cec nothing is queued, however often the box changes; the box itself is kept")
    func nothingQueuedWithoutCEC() {
        let follower = CECFollower(settings: .init(), logger: Self.logger)
        for _ in 0..<1000 {
            follower.boxChanged(active: true)
            follower.boxChanged(active: false)
        }
        follower.boxChanged(active: true)
        let inbox = follower.take()
        #expect(inbox.box.isEmpty && inbox.active && !inbox.running)
        #expect(follower.report == nil)
        follower.stop()
    }

    @Test("--cec added on a reload starts the thread, which waits for a missing node and stops on request")
    func missingNode() {
        let follower = CECFollower(settings: .init(), logger: Self.logger)
        follower.boxChanged(active: true)
        follower.apply(.init(device: "/nonexistent-keepalived-test/cec9"))
        pollUntil { follower.report?.state == "waiting for the adapter" }
        #expect(follower.report == .init(device: "/nonexistent-keepalived-test/cec9", state: "waiting for the adapter"))
        // Taken away again: the report goes, the thread sleeps until the stop.
        follower.apply(.init())
        #expect(follower.report == nil)
        follower.stop()
    }

    @Test("a player's open held for the receiver's wake goes on at once when there is nothing to wake it: no thread, or no adapter (issue 58)")
    func gateWithoutAdapter() throws {
        let idle = CECFollower(settings: .init(), logger: Self.logger)
        let first = try PowerOnGate(deadline: .now + .seconds(30), settle: .zero)
        first.addRun()
        idle.boxChanged(active: true, gate: first)
        #expect(first.opensAt != nil)
        idle.stop()
        let missing = CECFollower(settings: .init(device: "/nonexistent-keepalived-test/cec9"), logger: Self.logger)
        missing.start()
        let gate = try PowerOnGate(deadline: .now + .seconds(30), settle: .zero)
        gate.addRun()
        missing.boxChanged(active: true, gate: gate)
        pollUntil(timeout: .seconds(10)) { gate.opensAt != nil }
        #expect(gate.opensAt != nil, "the adapter's thread let it go: nothing is under way without an adapter")
        missing.stop()
    }
}

/// A process out of descriptors when the follower is made: `--cec` is off, as when its thread
/// cannot start, and the daemon plays on. In a child process (an exit test), whose descriptor
/// limit is lowered around the call.
@Suite("CEC follower without descriptors")
struct CECFollowerDescriptorTests {
    @Test("no doorbell: the thread never starts, the box's changes go nowhere, a held open goes on at once")
    func noDoorbell() async {
        await #expect(processExitsWith: .success) {
            let limit = leaveDescriptors(0)
            let follower = CECFollower(settings: .init(device: "/nonexistent-keepalived-test/cec9"),
                                       logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            restoreDescriptorLimit(limit)
            follower.start()
            precondition(follower.take().thread == .failedToStart)
            let gate = try PowerOnGate(deadline: .now + .seconds(30), settle: .zero)
            gate.addRun()
            follower.boxChanged(active: true, gate: gate)
            precondition(gate.opensAt != nil, "the open was held with no thread to let it go")
            follower.apply(.init(device: "/nonexistent-keepalived-test/cec8"))
            follower.stop()
        }
    }
}

/// `--cec` in `status`: the text line and the JSON field.
@Suite("CEC in status")
struct CECStatusTests {
    @Test("the text line: where keepalived is on the bus, what it said last and whether it was heard")
    func line() {
        let ready = CECReport(device: "/dev/cec0", state: "ready", adapter: "dw_hdmi", physicalAddress: "2.0.0.0", logicalAddress: 4,
                              lastMessage: "4→5 System Audio Mode Request (2.0.0.0)", acknowledged: true, systemAudioMode: true)
        #expect(StatusCommand.describe(ready)
            == "/dev/cec0 (dw_hdmi): ready, 2.0.0.0, logical address 4; last sent: 4→5 System Audio Mode Request (2.0.0.0), acknowledged; audio system on")
        #expect(StatusCommand.describe(CECReport(device: "/dev/cec0", state: "waiting for the adapter")) == "/dev/cec0: waiting for the adapter")
        var unheard = ready
        unheard.acknowledged = false
        unheard.systemAudioMode = nil
        #expect(StatusCommand.describe(unheard).hasSuffix("(2.0.0.0), not acknowledged"))
        unheard.acknowledged = nil
        #expect(StatusCommand.describe(unheard).hasSuffix("(2.0.0.0), sending"))
    }

    @Test("the JSON field is optional: a status without it (an older daemon's) still reads")
    func json() throws {
        var status = DaemonStatus(state: "playing", pid: 1, uptimeSeconds: 1, socket: "/run/k.sock", outputs: [])
        let without = try ControlJSON.decode(DaemonStatus.self, from: Array(ControlJSON.encode(status).utf8))
        #expect(without.cec == nil)
        status.cec = CECReport(device: "/dev/cec0", state: "ready", physicalAddress: "1.0.0.0", logicalAddress: 4)
        #expect(try ControlJSON.decode(DaemonStatus.self, from: Array(ControlJSON.encode(status).utf8)) == status)
    }
}
