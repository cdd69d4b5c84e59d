import KeepAlive
import Logging

/// Sounds the test tone on the daemon's own outputs and gives them their keep-alive back
/// (home automation's "Test tone" button): ``TestToneStateMachine`` decides, this applies, on the
/// main loop, the one thread that changes the manager's configuration.
///
/// Each output sounding it is closed and opened again with the tone's settings (a sound
/// server's stream is opened with the tone's 1 s buffer, not behind 8 s of queued keep-alive;
/// a card device held in a ring loop cannot replay a burst once), and again with its own
/// settings ``TestTone/daemonRestoresAfter`` later, when ``timer`` fires.
///
/// ```swift
/// let tone = TestToneSounder(manager: manager, timer: try IntervalTimer(), logger: logger, on: mainLoop)
/// tone.press(asker: "home automation (MQTT)")   // the tone on every output playing the keep-alive
/// // the main loop, when tone.timer fires:
/// tone.timerFired()
/// ```
///
/// Concurrency: used on the main loop only, checked at each call: so `@unchecked Sendable`.
final class TestToneSounder: @unchecked Sendable {
    /// Held for the moment of each reopen only. The weakest: every other reason shows first.
    static let reopening = PauseReason(name: "test-tone", strength: 10)

    let timer: IntervalTimer
    private let manager: KeepAliveManager
    private let logger: Logger
    private let mainLoop: ThreadOwner
    private var machine = TestToneStateMachine()

    init(manager: KeepAliveManager, timer: IntervalTimer, logger: Logger, on mainLoop: ThreadOwner) {
        self.manager = manager
        self.timer = timer
        self.logger = logger
        self.mainLoop = mainLoop
    }


    /// The tone on every output playing the keep-alive; false when none sounds it (the journal
    /// says why).
    @discardableResult
    func press(asker: String) -> Bool {
        mainLoop.preconditionOwned("TestToneSounder.press")
        switch machine.pressed(outputs: outputs, configuration: manager.configuration) {
        case .sound(let devices, let configuration, let skipped):
            var metadata: Logger.Metadata = ["outputs": "\(devices.joined(separator: " "))"]
            if !skipped.isEmpty { metadata["left-out"] = "\(skipped.joined(separator: " ")) (--max-level below the tone)" }
            logger.notice("test tone (\(TestTone.summary), \(Int(TestTone.length.seconds)) s), asked by \(asker)", metadata: metadata)
            reopen(devices, with: configuration)
            timer.arm(after: TestTone.daemonRestoresAfter)
            return true
        case .refuse(let why):
            logger.notice("\(why); asked by \(asker)")
            return false
        case .restore:
            preconditionFailure("TestToneStateMachine.pressed cannot restore")
        }
    }

    /// ``timer`` fired: the keep-alive again where the tone played.
    func timerFired() {
        mainLoop.preconditionOwned("TestToneSounder.timerFired")
        timer.acknowledge()
        // A stop or a second timer read finds nothing sounding.
        guard machine.isSounding else { return }
        switch machine.restoreDue(outputs: outputs, configuration: manager.configuration) {
        case .restore(let configuration, let reopen, let replaced):
            var metadata: Logger.Metadata = ["outputs": "\(reopen.joined(separator: " "))"]
            if !replaced.isEmpty { metadata["reconfigured-meanwhile"] = "\(replaced.joined(separator: " "))" }
            logger.info("test tone over: the keep-alive plays again", metadata: metadata)
            self.reopen(reopen, with: configuration)
        case .sound, .refuse:
            preconditionFailure("TestToneStateMachine.restoreDue can only restore")
        }
    }

    private var outputs: [TestToneStateMachine.Output] {
        manager.snapshot.outputs.map(TestToneStateMachine.Output.init)
    }

    /// Closes `devices` (each joined: nothing of the old stream plays after this), applies
    /// `configuration`, opens them again; the other outputs take `configuration` in place.
    private func reopen(_ devices: [String], with configuration: KeepAliveConfiguration) {
        for device in devices { manager.pause(Self.reopening, output: device) }
        do {
            try manager.reconfigure(configuration)
        } catch {
            // The tone's settings are valid wherever the output's were; kept for the journal.
            logger.error("test tone: cannot apply the outputs' settings", metadata: ["error": "\(error)"])
        }
        for device in devices { manager.resume(Self.reopening, output: device) }
    }
}
