import KeepAlive
import Logging
import Testing

@testable import KeepAliveDaemon

/// ``ServerWatchers``' listings reach its watchers on the connection's loop only.
@Suite("Server watchers: on the connection's loop")
struct ServerWatchersTests {
    final class Counter: SoundServerListener, @unchecked Sendable {
        var listings = 0
        func connectionReady() {}
        func serverListed(_ view: SoundServerView) { listings += 1 }
        func connectionLost(_ error: String) {}
    }

    /// libpulse's own thread hands listings on; the test holds the loop's lock instead. The
    /// connection needs no server: it only keeps trying.
    @Test("a listing handed on with the loop locked reaches the watcher; off it the process stops, in every build")
    func listingLocked() async {
        await #expect(processExitsWith: .success) {
            let listing = try ServerWatchers.shared(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            let counter = Counter()
            precondition(listing.join(counter))
            listing.withLock { listing.serverListed(SoundServerView(server: "test", sinks: [])) }
            precondition(counter.listings >= 1)
            // Nobody joined: no loop runs for the watchers, and nothing is checked.
            listing.leave(counter)
            listing.preconditionLocked("with no watcher joined")
        }
        await #expect(processExitsWith: .failure) {
            let listing = try ServerWatchers.shared(logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            precondition(listing.join(Counter()))
            listing.serverListed(SoundServerView(server: "test", sinks: []))
        }
    }
}
