import CPulse
import Logging

/// One connection to the sound server through libpulse, on its own threaded main loop, that
/// comes back by itself: a lost or refused connection is retried with backoff (250 ms doubling
/// to 10 s), and the owner's ``queries`` are listed once the server answers and again after
/// every event of the watched facilities. What to list and what to make of it is the owner's
/// (``SinkWatcher``, ``LingerWatcher``).
///
/// Everything but ``start()`` and ``stop()`` runs on the main loop's thread (inside a callback)
/// or with ``lock()`` held.
///
/// ```swift
/// let connection = try PulseConnection(name: "keepalived", facilities: CPULSE_WATCH_SINKS, firstRetry: .milliseconds(250))
/// var names: [String] = []
/// connection.queries = [.server { _ in names = [] }, .sinks { sink in names.append(String(cString: sink.name)) }]
/// connection.onListed = { print(names) }
/// connection.onLost = { error in print("lost: \(error)") }
/// connection.start()
/// ```
final class PulseConnection {
    let loop: OpaquePointer
    /// The connection now; nil between a loss and the next attempt.
    private(set) var context: OpaquePointer?
    let name: String
    let facilities: UInt32
    let firstRetry: Duration
    static let longestRetry: Duration = .seconds(10)

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

    private var reconnectTimer: OpaquePointer?
    private var retryDelay: Duration
    /// The context whose loss was handled: libpulse may report a failed connect both ways.
    private var lostContext: OpaquePointer?
    private var listing = false
    private var listAgain = false
    /// The query of ``queries`` the running listing waits for.
    private var step = 0

    /// Loads libpulse and makes the main loop. Throws its loader's message when it cannot.
    init(name: String, facilities: Int, firstRetry: Duration) throws(LibraryMissing) {
        if let failure = cpulse_load() { throw LibraryMissing(message: String(cString: failure)) }
        guard let loop = cpulse_mainloop_new() else { throw LibraryMissing(message: "pa_threaded_mainloop_new failed") }
        self.loop = loop
        self.name = name
        self.facilities = UInt32(facilities)
        self.firstRetry = firstRetry
        retryDelay = firstRetry
    }

    deinit { cpulse_mainloop_free(loop) }

    /// libpulse is not there (a headless box needs no libpulse0).
    struct LibraryMissing: Error, CustomStringConvertible {
        let message: String
        var description: String { "cannot load libpulse.so.0 (\(message))" }
    }

    func lock() { cpulse_mainloop_lock(loop) }
    func unlock() { cpulse_mainloop_unlock(loop) }

    /// Connects and starts the main loop's thread; false when the thread cannot start. `before`
    /// runs first on the locked loop (a timer of the owner's).
    func start(before: () -> Void = {}) -> Bool {
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        lock()
        reconnectTimer = cpulse_timer_new(loop, { PulseConnection.from($0).connect() }, userdata)
        before()
        connect()
        unlock()
        return cpulse_mainloop_start(loop) >= 0
    }

    /// Stops the thread and lets go of the server; no callback runs afterwards. `after` runs
    /// once the thread is gone (to free the owner's timers).
    func stop(after: () -> Void = {}) {
        cpulse_mainloop_stop(loop)
        if let context { cpulse_context_release(context) }
        context = nil
        if let reconnectTimer { cpulse_timer_free(loop, reconnectTimer) }
        reconnectTimer = nil
        after()
    }

    /// Tries again at once, with the first delay, when the server does not answer now (a sign
    /// that it just started came from elsewhere); nothing while connected or connecting.
    func retryNow() {
        lock()
        defer { unlock() }
        guard context == nil || lostContext == context, let reconnectTimer else { return }
        retryDelay = firstRetry
        cpulse_timer_arm(loop, reconnectTimer, 0)
    }

    /// Asks the server to move sink input `index` to the sink called `sink`; false when the
    /// request cannot be sent. On the main loop's thread or with ``lock()`` held.
    func moveSinkInput(_ index: UInt32, to sink: String) -> Bool {
        guard let context else { return false }
        return cpulse_move_sink_input(context, index, sink) == 0
    }

    /// Whether the connection is ready now.
    var isReady: Bool { context.map { Int(cpulse_context_state($0)) == Int(CPULSE_READY) } ?? false }

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

    /// Lists ``queries`` unless a listing runs; then it runs once more after that one, which may
    /// have missed the change.
    private func list() {
        guard context != nil else { return }
        guard !listing else {
            listAgain = true
            return
        }
        listing = true
        step = 0
        send()
    }

    private func send() {
        guard let context else { return }
        guard step < queries.count else { return listed() }
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

    private func connect() {
        if let context { cpulse_context_release(context) }
        // A new context may get the freed one's address.
        lostContext = nil
        listing = false
        listAgain = false
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        context = cpulse_context_new(loop, name,
                                     { PulseConnection.from($0).stateChanged() },
                                     { PulseConnection.from($0).list() }, userdata)
        guard let context else { return lost("cannot create a libpulse context") }
        if cpulse_context_connect(context) < 0 { lost(String(cString: cpulse_context_error(context))) }
    }

    private func stateChanged() {
        guard let context else { return }
        switch Int(cpulse_context_state(context)) {
        case Int(CPULSE_READY):
            retryDelay = firstRetry
            cpulse_context_subscribe(context, facilities)
            onReady?()
            list()
        case Int(CPULSE_FAILED), Int(CPULSE_TERMINATED):
            lost(String(cString: cpulse_context_error(context)))
        default:
            break
        }
    }

    private func lost(_ error: String) {
        guard context == nil || lostContext != context else { return }
        lostContext = context
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, Self.longestRetry)
        onLost?(error)
        // The context is released by the next attempt, outside its own callback.
        if let reconnectTimer { cpulse_timer_arm(loop, reconnectTimer, delay.microseconds) }
    }
}
