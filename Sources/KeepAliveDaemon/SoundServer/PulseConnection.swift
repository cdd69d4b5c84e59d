import CPulse
import KeepAlive
import Logging

/// A watcher's use of the process's one connection to the sound server
/// (``SoundServerConnection``, shared with the sinks' streams and the other watcher): its
/// subscription, its listings and what it hears of losses. A lost or refused connection is
/// retried with backoff (``firstRetry`` doubling to 10 s, the shortest of the watchers'), and the
/// owner's ``queries`` are listed once the server answers and again after every event of the
/// watched facilities. What to list and what to make of it is the owner's (``SinkWatcher``,
/// ``LingerWatcher``).
///
/// Everything but ``start(before:)`` and ``stop(after:)`` runs on the main loop's thread (inside
/// a callback) or with the main loop locked (``withLock(_:)``).
///
/// ```swift
/// let connection = try PulseConnection(facilities: CPULSE_WATCH_SINKS, firstRetry: .milliseconds(250))
/// var names: [String] = []
/// connection.queries = [.server { _ in names = [] }, .sinks { sink in names.append(String(cString: sink.name)) }]
/// connection.onListed = { print(names) }
/// connection.onLost = { error in print("lost: \(error)") }
/// _ = connection.start()
/// ```
final class PulseConnection: SoundServerUser {
    let facilities: UInt32
    let firstRetry: Duration

    /// Runs once the server answers (after every reconnection), subscribed already; the first
    /// listing follows.
    var onReady: (() -> Void)?
    /// What each listing asks for, one query after the other. Every listing starts afresh with
    /// the first: the owner drops there what the last one gathered.
    var queries: [Query] = []
    /// Runs after each listing that went through to the end, the connection still ready.
    var onListed: (() -> Void)?
    /// Runs once per loss, with libpulse's words; a retry is scheduled after it.
    var onLost: ((String) -> Void)?

    /// The process's connection, between ``start(before:)`` and ``stop(after:)``.
    private var shared: SoundServerConnection?
    private var listing = false
    private var listAgain = false
    /// The query of ``queries`` the running listing waits for.
    private var step = 0

    /// Loads libpulse. Throws its loader's message when it cannot.
    init(facilities: Int, firstRetry: Duration) throws(LibraryMissing) {
        if let failure = cpulse_load() { throw LibraryMissing(message: String(cString: failure)) }
        self.facilities = UInt32(facilities)
        self.firstRetry = firstRetry
    }

    /// libpulse is not there (a headless box needs no libpulse0).
    struct LibraryMissing: Error, CustomStringConvertible {
        let message: String
        var description: String { "cannot load libpulse.so.0 (\(message))" }
    }

    /// The shared main loop, for the owner's timers: between ``start(before:)`` and
    /// ``stop(after:)`` only.
    var loop: OpaquePointer {
        guard let shared else { preconditionFailure("PulseConnection.loop used outside start and stop") }
        return shared.loop
    }

    /// Runs `body` with the main loop locked; without a lock before ``start(before:)`` and after
    /// ``stop(after:)``, when nothing else runs the owner's code (its calls to start, stop and
    /// this come one at a time).
    func withLock<T>(_ body: () -> T) -> T {
        guard let shared else { return body() }
        shared.lock()
        defer { shared.unlock() }
        return body()
    }

    /// Joins the process's connection (starting its thread, and connecting, if it is the first
    /// to need it); false when the thread cannot start. `before` runs first on the locked loop
    /// (a timer of the owner's).
    func start(before: () -> Void = {}) -> Bool {
        guard shared == nil else { return true }
        guard let connection = try? SoundServerConnection.acquire() else { return false }
        shared = connection
        connection.lock()
        before()
        connection.add(self)
        connection.unlock()
        return true
    }

    /// Leaves the connection: no callback runs afterwards (its queries under way are
    /// forgotten). `after` runs on the locked loop once it left (to free the owner's timers).
    /// The last to leave, stream or watcher, stops the thread and lets go of the server.
    func stop(after: () -> Void = {}) {
        guard let connection = shared else { return }
        connection.lock()
        connection.remove(self)
        after()
        connection.unlock()
        shared = nil
        connection.release()
    }

    /// Tries again at once, with the first delay, when the server does not answer now (a sign
    /// that it just started came from elsewhere); nothing while connected or connecting.
    func retryNow() {
        guard let shared else { return }
        shared.lock()
        defer { shared.unlock() }
        shared.retryNow()
    }

    /// Asks the server to move sink input `index` to the sink called `sink`; false when the
    /// request cannot be sent. On the main loop's thread or with the loop locked.
    func moveSinkInput(_ index: UInt32, to sink: String) -> Bool {
        guard let context = shared?.context else { return false }
        return cpulse_move_sink_input(context, index, sink) == 0
    }

    /// Whether the connection is ready now.
    var isReady: Bool { shared?.isReady ?? false }

    /// Whether it follows the server now (between ``start(before:)`` and ``stop(after:)``).
    var isStarted: Bool { shared != nil }

    /// One list the server is asked for, and what the owner makes of each entry (whose strings
    /// live only as long as the call).
    struct Query {
        fileprivate let list: Int32
        fileprivate let each: (UnsafeRawPointer) -> Void

        /// The server's name, version and default sink: one entry, its fields nil when it does
        /// not answer.
        static func server(_ each: @escaping (cpulse_server) -> Void) -> Query { Query(CPULSE_LIST_SERVER, each) }
        static func sinks(_ each: @escaping (cpulse_sink) -> Void) -> Query { Query(CPULSE_LIST_SINKS, each) }
        static func cards(_ each: @escaping (cpulse_card) -> Void) -> Query { Query(CPULSE_LIST_CARDS, each) }
        static func clients(_ each: @escaping (cpulse_client) -> Void) -> Query { Query(CPULSE_LIST_CLIENTS, each) }
        static func sinkInputs(_ each: @escaping (cpulse_sink_input) -> Void) -> Query { Query(CPULSE_LIST_SINK_INPUTS, each) }

        /// `Entry` is the type cpulse_list gives `list`'s entries (CPulse.h).
        private init<Entry>(_ list: Int, _ each: @escaping (Entry) -> Void) {
            self.list = Int32(list)
            self.each = { each($0.assumingMemoryBound(to: Entry.self).pointee) }
        }
    }

    // MARK: - SoundServerUser, with the loop locked

    func connectionReady() {
        // A new connection: what the last one had under way was dropped with it.
        listing = false
        listAgain = false
        onReady?()
        list()
    }

    func serverChanged() { list() }

    func connectionLost(_ error: String) { onLost?(error) }

    // MARK: - Listing

    /// Lists ``queries`` unless a listing runs; then it runs once more after that one, which may
    /// have missed the change.
    private func list() {
        guard isReady else { return }
        guard !listing else {
            listAgain = true
            return
        }
        listing = true
        step = 0
        send()
    }

    private func send() {
        guard let context = shared?.context else { return }
        guard step < queries.count else { return listed() }
        // The connection forgets the queries sent with this userdata when this leaves it.
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        let sent = cpulse_list(context, queries[step].list, { PulseConnection.from($0).received($1) }, userdata)
        // Not sent: the connection is failing, and its state callback reports the loss.
        if sent < 0 { listing = false }
    }

    private func received(_ entry: UnsafeRawPointer?) {
        guard let entry else {
            step += 1
            return send()
        }
        queries[step].each(entry)
    }

    private func listed() {
        listing = false
        let again = listAgain
        listAgain = false
        // A query that ended because the connection failed lists nothing: the state callback
        // reports the loss instead.
        guard isReady else { return }
        onListed?()
        if again { list() }
    }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> PulseConnection {
        Unmanaged<PulseConnection>.fromOpaque(userdata!).takeUnretainedValue()
    }
}
