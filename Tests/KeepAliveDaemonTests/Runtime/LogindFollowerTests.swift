import KeepAlive
import Logging
import Testing

@testable import KeepAliveDaemon

/// ``LogindFollower``'s claim: its watcher, machine and backoff are the main loop's.
@Suite("Logind follower: the main loop's")
struct LogindFollowerTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    @Test("processed on the thread that claimed the main loop")
    func onTheMainLoop() throws {
        let manager = try KeepAliveManager(configuration: KeepAliveConfiguration(devices: ["null"]), logger: Self.logger)
        let follower = try LogindFollower(manager: manager, policy: PauseStateMachine.Policy(), logger: Self.logger)
        let mainLoop = ThreadOwner.claimed("the test's thread")
        follower.process(idleTimerFired: false, on: mainLoop)
        // Any thread hands a policy over; the main loop takes it.
        follower.policyChanged(PauseStateMachine.Policy())
        follower.process(idleTimerFired: true, on: mainLoop)
    }

    @Test("processed off the main loop: the process stops, in every build")
    func offTheMainLoopStops() async {
        await #expect(processExitsWith: .failure) {
            let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
            let manager = try KeepAliveManager(configuration: KeepAliveConfiguration(devices: ["null"]), logger: logger)
            let follower = try LogindFollower(manager: manager, policy: PauseStateMachine.Policy(), logger: logger)
            follower.process(idleTimerFired: false, on: ThreadOwner("the daemon's main loop"))
        }
    }
}
