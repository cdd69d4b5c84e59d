import Logging
import Testing

@testable import KeepAlive

/// The level of each state change an output logs: a healthy box's journal has no warning
/// (issue 58, item 17), a real fault still has one.
@Suite("State change logging")
struct StateChangeLoggingTests {
    let start = ContinuousClock.now

    /// The value type behind a reference: #expect's expansion takes its operands immutably,
    /// and the events are mutating calls.
    final class Machine {
        var value = StateChangeLogging()
        func changed(from old: KeepAliveState, to new: KeepAliveState, at now: ContinuousClock.Instant) -> Logger.Level {
            value.changed(from: old, to: new, at: now)
        }
        func faultRepeated(at now: ContinuousClock.Instant) -> Bool { value.faultRepeated(at: now) }
    }

    @Test("a device another program holds is info, however long it is held")
    func busyIsInfo() {
        let logging = Machine()
        #expect(logging.changed(from: .starting, to: .waitingForDevice(.busy), at: start) == .info)
        #expect(!logging.faultRepeated(at: start + .seconds(3600)))
        #expect(logging.changed(from: .waitingForDevice(.busy), to: .playing, at: start + .seconds(3600)) == .info)
        // After playing, a player taking the card back is the same normal state.
        #expect(logging.changed(from: .playing, to: .waitingForDevice(.busy), at: start + .seconds(3700)) == .info)
    }

    @Test("an HDMI port with no display (a Pi's second port, a TV in standby) is info, however long it waits")
    func noDisplayIsInfo() {
        let logging = Machine()
        #expect(logging.changed(from: .starting, to: .waitingForDevice(.noDisplay), at: start) == .info)
        #expect(!logging.faultRepeated(at: start + .seconds(3600)))
        #expect(logging.changed(from: .waitingForDevice(.noDisplay), to: .playing, at: start + .seconds(3600)) == .info)
        // The display switched off while playing: the same normal state.
        #expect(logging.changed(from: .playing, to: .waitingForDevice(.noDisplay), at: start + .seconds(3700)) == .info)
    }

    @Test("a server still starting is info until the limit, then one warning")
    func serverStartingIsInfoThenOneWarning() {
        let logging = Machine()
        #expect(logging.changed(from: .starting, to: .waitingForDevice(.serverGone), at: start) == .info)
        // The same start-up wait under another symptom (the server's sink not made yet).
        #expect(logging.changed(from: .waitingForDevice(.serverGone), to: .waitingForDevice(.noDevice), at: start) == .info)
        #expect(!logging.faultRepeated(at: start + StateChangeLogging.quietWaitLimit - .milliseconds(1)))
        #expect(logging.faultRepeated(at: start + StateChangeLogging.quietWaitLimit))
        #expect(!logging.faultRepeated(at: start + StateChangeLogging.quietWaitLimit * 2))
        #expect(logging.changed(from: .waitingForDevice(.noDevice), to: .playing, at: start + .seconds(61)) == .info)
    }

    @Test("a server lost after the output played is a warning")
    func serverLostAfterPlayingIsWarning() {
        let logging = Machine()
        #expect(logging.changed(from: .starting, to: .playing, at: start) == .info)
        #expect(logging.changed(from: .playing, to: .waitingForDevice(.serverGone), at: start) == .warning)
        #expect(logging.changed(from: .playing, to: .recovering(.serverGone), at: start) == .warning)
    }

    @Test("a missing device, a refusal, an underrun or an unplug is a warning, even at the start")
    func faultsAreWarnings() {
        for state: KeepAliveState in [.waitingForDevice(.noDevice), .waitingForDevice(.permissionDenied),
                                      .waitingForDevice(.unplugged), .waitingForDevice(.unknown),
                                      .recovering(.underrun), .recovering(.stalled)] {
            let logging = Machine()
            #expect(logging.changed(from: .starting, to: state, at: start) == .warning, "\(state)")
            #expect(!logging.faultRepeated(at: start + .seconds(3600)))
        }
    }

    @Test("playing, starting, stopped and paused are info")
    func ordinaryStatesAreInfo() {
        let logging = Machine()
        for state: KeepAliveState in [.starting, .playing, .paused(.sleep), .stopped] {
            #expect(logging.changed(from: .playing, to: state, at: start) == .info, "\(state)")
        }
    }
}
