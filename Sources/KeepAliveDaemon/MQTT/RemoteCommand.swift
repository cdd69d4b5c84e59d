import _KeepalivedControlProtocol
import KeepAlive
import Logging

/// What home automation asks of the box (`--mqtt-commands`), parsed on the MQTT thread
/// (``MQTTCommandParser``) and applied on the main loop, the one thread that changes what the
/// outputs do: never louder, never a card taken, real audio always first.
///
/// ```swift
/// queue.submit(MainLoopRequest(.keepAlive(on: false), trigger: "MQTT"))
/// // the main loop: every output paused, status says switched-off
/// ```
enum RemoteCommand: Equatable, Sendable {
    /// The keep-alive switch: off pauses every output (``PauseReason/switchedOff``), the daemon
    /// staying up; on resumes them.
    case keepAlive(on: Bool)
    /// "Power on now": the box becomes active as at real audio's start (the `on-active` hooks,
    /// `--cec`'s wake), and idle after `--on-idle-after` unless real audio plays.
    case powerOn
    /// "Standby now": outputs whose audio stopped go idle at once (the `on-idle` hooks, `--cec`'s
    /// standby); outputs where real audio plays stay active.
    case standby
    /// "Test tone": `keepalived test`'s tone for 1 s on every output playing the keep-alive, at
    /// once, then the keep-alive again (``TestToneSounder``).
    case testTone

    /// - Parameter tone: the test tone's sounder (nil: none could be made, and the journal said so).
    func apply(manager: KeepAliveManager, activity: BoxActivity, tone: TestToneSounder?, logger: Logger, on mainLoop: ThreadOwner) -> ControlReply {
        mainLoop.preconditionOwned("RemoteCommand.apply")
        switch self {
        case .keepAlive(on: false):
            guard !manager.pauses.contains(.switchedOff) else { return ControlReply(ok: true, changed: false) }
            logger.notice("switched off by home automation (MQTT): every output rests until it is switched on")
            manager.pause(.switchedOff)
        case .keepAlive(on: true):
            guard manager.pauses.contains(.switchedOff) else { return ControlReply(ok: true, changed: false) }
            logger.notice("switched on by home automation (MQTT): the outputs play again")
            manager.resume(.switchedOff)
        case .powerOn:
            let outputs = manager.snapshot.outputs.map(\.device)
            logger.notice("power on now, asked by home automation (MQTT)", metadata: ["outputs": "\(outputs.joined(separator: " "))"])
            activity.wake(outputs, program: BoxActivity.wakeProgram)
        case .standby:
            let playing = activity.endSilences()
            if playing.isEmpty {
                logger.notice("standby now, asked by home automation (MQTT)")
            } else {
                let who = Set(playing.values).sorted().joined(separator: ", ")
                logger.notice("standby now, asked by home automation (MQTT): real audio plays (\(who)), so its outputs stay on",
                              metadata: ["outputs": "\(playing.keys.sorted().joined(separator: " "))"])
            }
        case .testTone:
            guard let tone, tone.press(asker: "home automation (MQTT)") else { return ControlReply(ok: true, changed: false) }
        }
        return ControlReply(ok: true, changed: true)
    }
}
