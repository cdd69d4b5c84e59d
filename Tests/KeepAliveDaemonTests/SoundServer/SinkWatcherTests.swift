import Glibc
import KeepAlive
import Logging
import TestSupport
import Testing

@testable import KeepAliveDaemon

/// ``SinkWatcher`` where no server is needed.
@Suite("Sink watcher")
struct SinkWatcherTests {
    /// The scanner then follows no server and says why (`unwatched`), as when libpulse is
    /// missing. In a child process (an exit test), whose descriptor limit is lowered around the call.
    @Test("a process out of descriptors: the watcher is not made, and the error names its doorbell")
    func noDoorbell() async {
        await #expect(processExitsWith: .success) {
            let limit = leaveDescriptors(0)
            defer { restoreDescriptorLimit(limit) }
            do {
                _ = try SinkWatcher(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
                preconditionFailure("a watcher was made with no descriptor left")
            } catch let error as DoorbellError {
                precondition(error.call == "eventfd" && error.code == EMFILE, "\(error)")
            } catch {
                preconditionFailure("\(error)")
            }
        }
    }

    /// libpulse's own thread runs the callbacks; the test holds the loop's lock instead. The
    /// connection needs no server: it only keeps trying.
    @Test("its callbacks with the connection's loop locked, and only so: off it the process stops, in every build")
    func callbacksLocked() async throws {
        await #expect(processExitsWith: .success) {
            let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
            let watcher = try SinkWatcher(logger: logger)
            watcher.start()
            try ServerWatchers.shared(logger: logger).withLock { watcher.serverListed(SoundServerView(server: "test", sinks: [])) }
            watcher.stop()
        }
        await #expect(processExitsWith: .failure) {
            let watcher = try SinkWatcher(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            watcher.start()
            watcher.serverListed(SoundServerView(server: "test", sinks: []))
        }
        await #expect(processExitsWith: .failure) {
            let watcher = try SinkWatcher(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            watcher.start()
            watcher.connectionLost("off the loop")
        }
    }
}
