import Logging
import Synchronization
import TestSupport
import Testing

@testable import KeepAliveDaemon

/// The seam `--cec` follows: ``BoxActivity`` tells the box becoming active with its first
/// active output and idle with its last, once each, whatever the outputs do in between.
@Suite("BoxActivity: the box's activity")
struct BoxActivityTests {
    static let logger = Logger.quiet

    @Test("active with the first output, idle once the last went idle, once each")
    func firstAndLast() throws {
        let seen = Mutex<[Bool]>([])
        let activity = try BoxActivity(settings: .init(idleAfter: .milliseconds(50)), logger: Self.logger,
                                          boxChanged: { active, _ in seen.withLock { $0.append(active) } })
        let mpd = BoxActivity.Player(program: "mpd", card: 0, device: 0)
        let aplay = BoxActivity.Player(program: "aplay", card: 1, device: 0)
        activity.loansChanged(["hw:0,0": mpd])
        activity.loansChanged(["hw:0,0": mpd, "hw:1,0": aplay])
        activity.loansChanged(["hw:1,0": aplay])
        #expect(seen.withLock { $0 } == [true])
        activity.loansChanged([:])
        sleep(for: .milliseconds(120))
        activity.timerFired(on: .claimed("the test's thread"))
        #expect(seen.withLock { $0 } == [true, false])
        // A stream on a sink counts as a loan does.
        activity.streamsChanged(["pulse": .init(program: "firefox", sink: "tv")])
        #expect(seen.withLock { $0 } == [true, false, true])
    }

    @Test("a silence shorter than --on-idle-after keeps the box active")
    func shortSilence() throws {
        let seen = Mutex<[Bool]>([])
        let activity = try BoxActivity(settings: .init(idleAfter: .seconds(60)), logger: Self.logger,
                                          boxChanged: { active, _ in seen.withLock { $0.append(active) } })
        activity.loansChanged(["hw:0,0": .init(program: "mpd")])
        activity.loansChanged([:])
        activity.timerFired(on: .claimed("the test's thread"))
        activity.loansChanged(["hw:0,0": .init(program: "mpd")])
        #expect(seen.withLock { $0 } == [true])
    }
}
