import CKeepAliveLinuxCEC
import Testing

@testable import KeepAliveDaemon

/// What of ``CECAdapter`` needs no adapter: a transmission's status bits read as an outcome, and
/// a physical address in words. The adapter itself (the kernel's vivid CEC adapters, a TV's
/// cec-follower) is the VM's `cec` scenario's.
@Suite("CEC adapter: transmit status and addresses")
struct CECAdapterTests {
    static let ok = UInt8(CEC_TX_STATUS_OK)
    static let nack = UInt8(CEC_TX_STATUS_NACK)
    static let arbitrationLost = UInt8(CEC_TX_STATUS_ARB_LOST)
    static let lowDrive = UInt8(CEC_TX_STATUS_LOW_DRIVE)
    static let error = UInt8(CEC_TX_STATUS_ERROR)
    static let timeout = UInt8(CEC_TX_STATUS_TIMEOUT)
    static let aborted = UInt8(CEC_TX_STATUS_ABORTED)

    @Test("acknowledged, and not acknowledged (nobody at that address)")
    func acknowledged() {
        #expect(CECAdapter.outcome(Self.ok) == .acknowledged)
        // The kernel reports the retries it made before the last, successful, attempt beside OK.
        #expect(CECAdapter.outcome(Self.ok | Self.arbitrationLost) == .acknowledged)
        #expect(CECAdapter.outcome(Self.nack) == .notAcknowledged)
        #expect(CECAdapter.outcome(Self.nack | Self.error) == .notAcknowledged)
    }

    @Test("a busy bus may take it a moment later: arbitration lost or timed out is retried; the others are not")
    func failures() {
        #expect(CECAdapter.outcome(Self.arbitrationLost) == .failed("arbitration lost", retry: true))
        #expect(CECAdapter.outcome(Self.timeout) == .failed("timed out", retry: true))
        #expect(CECAdapter.outcome(Self.lowDrive | Self.error) == .failed("low drive on the bus, transmit error", retry: false))
        #expect(CECAdapter.outcome(Self.aborted) == .failed("aborted", retry: false))
        #expect(CECAdapter.outcome(Self.error | Self.timeout) == .failed("transmit error, timed out", retry: true))
        #expect(CECAdapter.outcome(0) == .failed("status 0x0", retry: false))
    }

    @Test("a physical address in dotted form; the invalid one is none")
    func physicalAddress() {
        #expect(CECAdapter.describe(0x2000) == "2.0.0.0")
        #expect(CECAdapter.describe(0x1230) == "1.2.3.0")
        #expect(CECAdapter.describe(UInt16(CEC_PHYS_ADDR_INVALID)) == "none")
    }
}
