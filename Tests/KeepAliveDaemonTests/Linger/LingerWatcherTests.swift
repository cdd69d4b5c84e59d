import KeepAlive
import Logging
import Testing

@testable import KeepAliveDaemon

/// ``LingerWatcher``'s timers and machines are the connection's loop's: its callbacks check the
/// loop's lock, as its doc comment says.
@Suite("Linger watcher: on the connection's loop")
struct LingerWatcherTests {
    /// libpulse's own thread runs the callbacks; the test holds the loop's lock instead. The
    /// connection needs no server: it only keeps trying.
    @Test("a listing with the loop locked is heard; off it the process stops, in every build")
    func callbacksLocked() async {
        await #expect(processExitsWith: .success) {
            let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
            let manager = try KeepAliveManager(configuration: KeepAliveConfiguration(devices: ["pulse"]), logger: logger)
            let watcher = try LingerWatcher(duration: .seconds(600), outputs: ["pulse"], manager: manager, logger: logger)
            watcher.start()
            try ServerWatchers.shared(logger: logger).withLock { watcher.serverListed(SoundServerView(server: "test", sinks: [])) }
            watcher.follow(["pulse"])
            watcher.stop()
        }
        await #expect(processExitsWith: .failure) {
            let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
            let manager = try KeepAliveManager(configuration: KeepAliveConfiguration(devices: ["pulse"]), logger: logger)
            let watcher = try LingerWatcher(duration: .seconds(600), outputs: ["pulse"], manager: manager, logger: logger)
            watcher.start()
            watcher.serverListed(SoundServerView(server: "test", sinks: []))
        }
    }
}
