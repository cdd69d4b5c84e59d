import Glibc
import Logging
import Testing

@testable import KeepAliveDaemon

/// The held open of `--power-on-wait`: when its gate opens, and which releases get one.
@Suite("Power-on wait: the gate and who is held")
struct PowerOnGateTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    static func readable(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1
    }

    @Test("the gate opens after the last run's end and the settle, at the latest at its deadline")
    func gate() throws {
        let start = ContinuousClock.now
        let gate = try PowerOnGate(deadline: start + .seconds(5), settle: .milliseconds(500))
        gate.addRun()
        gate.addRun()
        #expect(gate.opensAt == nil && !gate.isOpen(at: start + .seconds(1)) && gate.hooksOutlasted)
        gate.runEnded(at: start + .seconds(1))
        #expect(gate.opensAt == nil, "one run still going")
        #expect(!Self.readable(gate.descriptor))
        gate.runEnded(at: start + .seconds(2))
        #expect(Self.readable(gate.descriptor), "the last run's end wakes the waiting thread")
        #expect(gate.opensAt == start + .milliseconds(2500))
        #expect(!gate.isOpen(at: start + .milliseconds(2499)) && gate.isOpen(at: start + .milliseconds(2500)))
        #expect(!gate.hooksOutlasted)
        // A run that ends past the deadline: the deadline stands.
        let late = try PowerOnGate(deadline: start + .seconds(1), settle: .milliseconds(500))
        late.addRun()
        #expect(late.isOpen(at: start + .seconds(1)) && late.hooksOutlasted)
        late.runEnded(at: start + .milliseconds(900))
        #expect(late.opensAt == start + .seconds(1))
    }

    static func activity(wait: Duration?, hook: String = "true") throws -> OutputActivity {
        var settings = OutputActivity.Settings()
        settings.onActive = try Hook(option: "--on-active", command: hook)
        settings.powerOnWait = wait
        return try OutputActivity(settings: settings, logger: logger)
    }

    static let mpd = OutputActivity.Player(program: "mpd", card: 0, device: 0)

    @Test("a player at idle outputs is held with one gate for all of them while on-active runs; active until its loan takes over")
    func heldOnce() throws {
        let activity = try Self.activity(wait: .seconds(5), hook: "sleep 0.3")
        let outputs = ["hw:0,0", "plughw:0,0"]
        let gate = try #require(activity.holdForPower(outputs, player: Self.mpd))
        #expect(activity.report(for: "hw:0,0").state == "active" && activity.report(for: "plughw:0,0").program == "mpd",
                "active from the player's arrival: the hook switches the power on while keepalived still plays")
        #expect(activity.holdForPower(outputs, player: Self.mpd) == nil, "a second player meanwhile: already active, not held again")
        activity.finishHooks()
        #expect(gate.isOpen(at: .now) && !gate.hooksOutlasted)
        // The release: the loan first, then the arrival ends; the outputs stay active.
        activity.loansChanged(["hw:0,0": Self.mpd, "plughw:0,0": Self.mpd])
        activity.playerArrived(outputs)
        #expect(activity.report(for: "hw:0,0").state == "active" && activity.report(for: "hw:0,0").idleInSeconds == nil)
        // The loan ends and comes back (the next track): still active, no hook, no hold.
        activity.loansChanged([:])
        #expect(activity.holdForPower(["hw:0,0"], player: Self.mpd) == nil)
    }

    @Test("a held player that gave up: its outputs fall silent and go idle after --on-idle-after")
    func gaveUp() throws {
        let activity = try Self.activity(wait: .seconds(5))
        _ = try #require(activity.holdForPower(["hw:0,0"], player: Self.mpd))
        activity.playerArrived(["hw:0,0"])
        let report = activity.report(for: "hw:0,0")
        #expect(report.state == "active" && report.idleInSeconds != nil, "quieting: \(report)")
        activity.finishHooks()
    }

    @Test("no hold without --power-on-wait, without outputs, nor for a stream on a sink (nobody's open to hold)")
    func notHeld() throws {
        let plain = try Self.activity(wait: nil)
        #expect(plain.holdForPower(["hw:0,0"], player: Self.mpd) == nil)
        let held = try Self.activity(wait: .seconds(5))
        #expect(held.holdForPower([], player: Self.mpd) == nil)
        held.streamsChanged(["pulse": OutputActivity.Player(program: "paplay", sink: "tv")])
        #expect(held.holdForPower(["pulse"], player: Self.mpd) == nil, "the sink's stream made it active")
        held.finishHooks()
        plain.finishHooks()
    }
}
