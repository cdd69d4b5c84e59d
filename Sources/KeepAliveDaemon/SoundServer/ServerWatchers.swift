import CKeepAlivePulse
import KeepAlive
import Logging

/// The daemon's watchers of the sound server (``SinkWatcher``, ``LingerWatcher``, ``ActivityWatcher``), as one user of
/// the process's connection (``SoundServerConnection``, shared with the sinks' streams and their
/// rate followers): it subscribes to sink, card, stream and server events, and hands each of the
/// connection's listings (``ServerListing``, one per event for every user in the process) to every
/// watcher.
///
/// Made by the first watcher that needs it (``shared(logger:)``, which loads libpulse); it joins
/// the connection when the first watcher joins and leaves it when the last leaves. A lost or
/// refused connection is retried with backoff (``firstRetry`` doubling to 10 s); a watcher that
/// joins while the server answers hears so at once, and a listing follows.
///
/// Watchers hear everything on the connection's thread with its loop locked: they must not block
/// there, nor take a lock that code holding the loop's lock waits for.
///
/// ```swift
/// final class Printer: SoundServerListener {
///     func connectionReady() {}
///     func serverListed(_ view: SoundServerView) { print(view.sinks.map(\.name)) }
///     func connectionLost(_ error: String) { print("lost: \(error)") }
/// }
/// let printer = Printer()
/// let listing = try ServerWatchers.shared(logger: Logger(label: "example"))
/// _ = listing.join(printer)
/// // …
/// listing.leave(printer)
/// ```
///
/// Concurrency: `connection` and `watchers` change only under ``membership`` with the loop locked,
/// and are read on the loop's thread or with it locked: so `@unchecked Sendable`. Checked in every
/// build (``preconditionLocked(_:file:line:)``, the connection's own check) by the callbacks that
/// hand a listing on, by ``moveSinkInput(_:to:)``, and by SinkWatcher's and LingerWatcher's callbacks.
final class ServerWatchers: SoundServerUser, @unchecked Sendable {
    let facilities = UInt32(CPULSE_WATCH_SINKS | CPULSE_WATCH_CARDS | CPULSE_WATCH_SERVER | CPULSE_WATCH_SINK_INPUTS)
    let firstRetry: Duration = .milliseconds(250)
    let logger: Logger

    /// The connection while a watcher is joined. Set and cleared by ``join(_:before:)`` and
    /// ``leave(_:after:)`` (with ``membership`` held, while no callback of this listing can run);
    /// read by the callbacks.
    private var connection: SoundServerConnection?
    /// Joins and leaves, one at a time; taken before the loop's lock, never on the loop's thread.
    private let membership = Locked<Void>((), order: .serverWatchers)

    // With the loop's lock held or on its thread (in a callback).
    private var watchers: [any SoundServerListener] = []
    /// Listings heard since the first watcher joined: the debug line's count.
    private var listings = 0

    private static let process = Locked<ServerWatchers?>(nil)

    /// The process's watchers; made (and libpulse loaded) by the first call. Throws the loader's
    /// message when libpulse cannot be loaded. `logger` is the first caller's.
    static func shared(logger: Logger) throws(LibraryMissing) -> ServerWatchers {
        try process.withLock { (listing: inout ServerWatchers?) throws(LibraryMissing) -> ServerWatchers in
            if let listing { return listing }
            if let failure = cpulse_load() { throw LibraryMissing(message: String(cString: failure)) }
            let made = ServerWatchers(logger: logger)
            listing = made
            return made
        }
    }

    private init(logger: Logger) {
        self.logger = logger
    }

    /// libpulse is not there (a headless box needs no libpulse0).
    struct LibraryMissing: Error, CustomStringConvertible {
        let message: String
        var description: String { "cannot load libpulse.so.0 (\(message))" }
    }

    // MARK: - Watchers

    /// Adds `watcher` (joining the process's connection, and starting its thread, if it is the
    /// first); false when the thread cannot start. `before` runs first on the locked loop (a
    /// timer of the watcher's). A server that answers already is said at once, then listed.
    func join(_ watcher: any SoundServerListener, before: () -> Void = {}) -> Bool {
        membership.withLock { _ in
            if watchers(contain: watcher) { return true }
            let first = self.connection == nil
            if first {
                guard let acquired = try? SoundServerConnection.acquire() else { return false }
                self.connection = acquired
            }
            guard let connection = self.connection else { return false }
            connection.lock()
            defer { connection.unlock() }
            before()
            watchers.append(watcher)
            if first {
                connection.add(self)
            } else if connection.isReady {
                watcher.connectionReady()
                connection.list()
            }
            return true
        }
    }

    /// Removes `watcher`: nothing reaches it afterwards. `after` runs on the locked loop once it
    /// is gone (to free its timers). The last to leave lets go of the connection (a listing under
    /// way is forgotten).
    func leave(_ watcher: any SoundServerListener, after: () -> Void = {}) {
        membership.withLock { _ in
            guard let connection = self.connection, watchers(contain: watcher) else { return }
            connection.lock()
            watchers.removeAll { $0 === watcher }
            let last = watchers.isEmpty
            if last { connection.remove(self) }
            after()
            connection.unlock()
            guard last else { return }
            self.connection = nil
            connection.release()
        }
    }

    private func watchers(contain watcher: any SoundServerListener) -> Bool {
        guard let connection = self.connection else { return false }
        connection.lock()
        defer { connection.unlock() }
        return watchers.contains { $0 === watcher }
    }

    /// The connection's main loop, for a watcher's timers: while it is joined only.
    var loop: OpaquePointer {
        guard let connection else { preconditionFailure("ServerWatchers.loop used while no watcher is joined") }
        return connection.loop
    }

    /// Runs `body` with the loop locked; without a lock while no watcher is joined.
    func withLock<T>(_ body: () -> T) -> T {
        let joined = membership.withLock { _ in self.connection }
        guard let joined else { return body() }
        joined.lock()
        defer { joined.unlock() }
        return body()
    }

    /// Lists the server again for every watcher (one whose view of it changed: what it follows);
    /// nothing while no watcher is joined or the server does not answer.
    func listAgain() {
        membership.withLock { _ in
            guard let connection = self.connection else { return }
            connection.lock()
            defer { connection.unlock() }
            connection.list()
        }
    }

    /// Tries again at once, with the first delay, when the server does not answer now (a sign
    /// that it just started came from elsewhere); nothing while connected or connecting.
    func retryNow() {
        membership.withLock { _ in
            guard let connection = self.connection else { return }
            connection.lock()
            defer { connection.unlock() }
            connection.retryNow()
        }
    }

    /// Asks the server to move sink input `index` to the sink called `sink`; false when the
    /// request cannot be sent. On the loop's thread or with the loop locked.
    func moveSinkInput(_ index: UInt32, to sink: String) -> Bool {
        guard let connection else { return false }
        connection.preconditionLocked("ServerWatchers.moveSinkInput")
        guard let context = connection.context else { return false }
        return cpulse_move_sink_input(context, index, sink) == 0
    }

    /// Whether the connection is ready now. On the loop's thread or with the loop locked
    /// (``SoundServerConnection/isReady`` checks).
    var isReady: Bool { connection?.isReady ?? false }

    /// Stops the process, in every build, unless the caller may touch what the watchers keep: on
    /// the connection's loop thread or with its loop locked
    /// (``SoundServerConnection/preconditionLocked(_:file:line:)``), or while no watcher is joined,
    /// when no loop runs for them and ``withLock(_:)`` takes no lock.
    func preconditionLocked(_ what: @autoclosure () -> String = "", file: StaticString = #fileID, line: UInt = #line) {
        connection?.preconditionLocked(what(), file: file, line: line)
    }

    // MARK: - SoundServerUser, with the loop locked: passed on to every watcher

    func connectionReady() {
        preconditionLocked("ServerWatchers.connectionReady")
        for watcher in watchers { watcher.connectionReady() }
    }

    func serverListed(_ view: SoundServerView) {
        preconditionLocked("ServerWatchers.serverListed")
        listings += 1
        logger.debug("listed the sound server", metadata: ["listing": "\(listings)", "sinks": "\(view.sinks.count)",
                                                          "streams": "\(view.streams.count)", "watchers": "\(watchers.count)"])
        for watcher in watchers { watcher.serverListed(view) }
    }

    func connectionLost(_ error: String) {
        preconditionLocked("ServerWatchers.connectionLost")
        for watcher in watchers { watcher.connectionLost(error) }
    }
}
