import CKeepAlivePulse
import Glibc
import Synchronization

/// The process's one connection to the sound server through libpulse: one threaded main loop
/// (its thread named `keepalive-pulse`) and one context, shared by everything in the process that
/// talks to the server: each sink output's stream (``ServerSinkPCM``) and its rate follower, and
/// the daemon's sink and `--linger` watchers (``SoundServerUser``), which all get the same
/// listing of the server after each event (``ServerListing``). A sink that comes adds its stream, not
/// a thread or a connection of its own (each used to cost a libpulse thread and about 0.65 MB).
///
/// Made by the first that needs it (``acquire()``, which loads libpulse) and let go of by the
/// last (``release()``: the thread stops, the server is let go of), so a process that never
/// talks to a server never maps libpulse, and one that stopped talking to it keeps no thread.
///
/// When the server goes away every stream on the connection fails (libpulse fails them with the
/// context) and every ``SoundServerUser`` hears it; while a user is there the connection is tried
/// again with backoff (the users' shortest ``SoundServerUser/firstRetry``, doubling to 10 s), and
/// each hears when it is back. A stream's PCM tries at once instead (``connectIfNeeded()``): a
/// server that is back is used as soon as a stream needs it, whatever the backoff.
///
/// ```swift
/// let connection = try SoundServerConnection.acquire()
/// connection.lock()
/// connection.connectIfNeeded()
/// while connection.isConnecting { connection.wait() }
/// let ready = connection.isReady   // streams are made on connection.context
/// connection.unlock()
/// // …
/// connection.release()
/// ```
///
/// Concurrency: ``acquire()`` and ``release()`` on any thread but the loop's, without the lock.
/// Everything else with ``lock()`` held or on the loop's thread (in a callback), never from a
/// callback of the connection's own (a user's): users hear it with the lock held, on the loop's
/// thread or on the thread whose call made the change. Lock order: the process-wide registry's
/// lock, then the loop's; nothing on the loop's thread takes the registry's.
///
/// Concurrency: what the loop owns is touched only with its lock held or on its thread
/// (``preconditionLocked(_:file:line:)``, checked in every build); the registry is behind
/// ``Locked``: so `@unchecked Sendable`.
package final class SoundServerConnection: @unchecked Sendable {
    /// The threaded main loop: lock, wait, timers.
    package let loop: OpaquePointer
    /// The connection to the server now: the one being made, the ready one, or the one that was
    /// lost (until the next attempt); nil before the first attempt.
    package private(set) var context: OpaquePointer?

    /// The name of the loop's thread in /proc/PID/task/*/comm (Linux keeps 15 bytes).
    package static let threadName = "keepalive-pulse"
    /// The client's name on the server: its streams' `application.name`.
    static let clientName = "keepalived"
    /// The longest wait between two attempts while the server does not answer.
    static let longestRetry: Duration = .seconds(10)

    private var users: [any SoundServerUser] = []
    private var reconnectTimer: OpaquePointer?
    /// The next wait after a loss; nil: the users' first.
    private var retryDelay: Duration?
    /// The context whose loss was handled: libpulse may report a failed connect both ways.
    private var lostContext: OpaquePointer?
    /// The facilities the context is subscribed to.
    private var subscribed: UInt32 = 0
    /// The one listing of the server, for every user.
    private lazy var listing = ServerListing { [unowned self] view in self.listed(view) }
    /// The thread that holds the lock from outside the loop's thread (`pthread_t`; 0: none), and
    /// how often it took it (libpulse's lock is recursive): for ``preconditionLocked(_:)``.
    private let holder = Atomic<UInt>(0)
    private var depth = 0

    /// libpulse cannot be used.
    package enum Unavailable: Error, Equatable, CustomStringConvertible {
        /// libpulse.so.0 is not there (a headless box needs no libpulse0), with the loader's words.
        case libraryMissing(String)
        /// The main loop or its thread could not be made.
        case mainLoopFailed

        package var description: String {
            switch self {
            case .libraryMissing(let message): "cannot load libpulse.so.0 (\(message))"
            case .mainLoopFailed: "cannot start libpulse's main loop"
            }
        }
    }

    /// The process's connection and how many hold it.
    private struct Registry: Sendable {
        var connection: SoundServerConnection?
        var holders = 0
    }

    private static let registry = Locked(Registry(), order: .soundServerRegistry)

    /// The process's connection, made now (libpulse loaded, the loop's thread started, no
    /// attempt to connect yet) if nothing holds it. Each call is ended by one ``release()``.
    package static func acquire() throws(Unavailable) -> SoundServerConnection {
        if let failure = cpulse_load() { throw .libraryMissing(String(cString: failure)) }
        return try registry.withLock { registry throws(Unavailable) in
            if let connection = registry.connection {
                registry.holders += 1
                return connection
            }
            guard let connection = SoundServerConnection() else { throw .mainLoopFailed }
            registry = Registry(connection: connection, holders: 1)
            return connection
        }
    }

    /// Ends one ``acquire()``; the last stops the loop's thread and lets go of the server. Its
    /// users left first, and its streams were released.
    package func release() {
        Self.registry.withLock { registry in
            precondition(registry.connection === self && registry.holders > 0, "SoundServerConnection released more often than acquired")
            registry.holders -= 1
            guard registry.holders == 0 else { return }
            registry.connection = nil
            // Under the registry's lock: an acquire() waits for a new connection.
            shutDown()
        }
    }

    /// Whether a connection is held now (by a stream or a user): for tests.
    package static var isHeld: Bool { registry.withLock { $0.connection != nil } }

    private init?() {
        guard let loop = cpulse_mainloop_new() else { return nil }
        self.loop = loop
        cpulse_mainloop_set_name(loop, Self.threadName)
        lock()
        reconnectTimer = cpulse_timer_new(loop, { SoundServerConnection.from($0).retry() }, userdata)
        unlock()
        guard reconnectTimer != nil, cpulse_mainloop_start(loop) >= 0 else {
            if let reconnectTimer { cpulse_timer_free(loop, reconnectTimer) }
            cpulse_mainloop_free(loop)
            return nil
        }
    }

    private func shutDown() {
        cpulse_mainloop_stop(loop)
        listing.forget()
        if let context { cpulse_context_release(context) }
        context = nil
        if let reconnectTimer { cpulse_timer_free(loop, reconnectTimer) }
        reconnectTimer = nil
        cpulse_mainloop_free(loop)
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> SoundServerConnection {
        Unmanaged<SoundServerConnection>.fromOpaque(userdata!).takeUnretainedValue()
    }

    // MARK: - With the lock held

    package func lock() {
        cpulse_mainloop_lock(loop)
        depth += 1
        if depth == 1 { holder.store(UInt(pthread_self()), ordering: .relaxed) }
    }

    package func unlock() {
        depth -= 1
        if depth == 0 { holder.store(0, ordering: .relaxed) }
        cpulse_mainloop_unlock(loop)
    }

    /// Unlocks until the connection or a stream changes state (or a ``signal()``); never on the
    /// loop's thread.
    package func wait() {
        let held = depth
        depth = 0
        holder.store(0, ordering: .relaxed)
        cpulse_mainloop_wait(loop)
        depth = held
        holder.store(UInt(pthread_self()), ordering: .relaxed)
    }

    /// Stops the process, in every build, when the caller neither holds the lock nor runs on the
    /// loop's thread, as swift-nio's `preconditionInEventLoop` does: what the loop owns (the
    /// context, the streams, every user's state) is touched only so. It costs a compare and an
    /// atomic load, beside a call into libpulse.
    package func preconditionLocked(_ what: @autoclosure () -> String = "", file: StaticString = #fileID, line: UInt = #line) {
        precondition(cpulse_mainloop_in_thread(loop) != 0 || holder.load(ordering: .relaxed) == UInt(pthread_self()),
               "\(what()) called without the sound server connection's lock, off its loop's thread", file: file, line: line)
    }

    /// Wakes every thread in ``wait()``; on the loop's thread.
    package func signal() { cpulse_mainloop_signal(loop) }

    /// Whether the connection is ready now.
    package var isReady: Bool {
        preconditionLocked("SoundServerConnection.isReady")
        return state == Int(CPULSE_READY)
    }

    /// Whether an attempt is under way: ``wait()`` for its end.
    var isConnecting: Bool { state == Int(CPULSE_CONNECTING) }

    /// The state of the current attempt; failed once it was lost (or when there is none).
    private var state: Int {
        guard let context, context != lostContext else { return Int(CPULSE_FAILED) }
        return Int(cpulse_context_state(context))
    }

    /// Starts an attempt now unless the connection is ready or being made: a stream about to be
    /// made does not wait for the users' backoff.
    func connectIfNeeded() {
        preconditionLocked("SoundServerConnection.connectIfNeeded")
        if let context, context != lostContext { return }
        connect()
    }

    /// Adds a user: it hears of the server from now on, and at once that it is ready if it is.
    /// A connection that is not there is tried now.
    package func add(_ user: any SoundServerUser) {
        preconditionLocked("SoundServerConnection.add")
        users.append(user)
        guard isReady else { return connectIfNeeded() }
        subscribe()
        user.connectionReady()
        list()
    }

    /// Removes a user: nothing of it runs afterwards, its queries sent with itself as their
    /// userdata (cpulse_list) included.
    package func remove(_ user: any SoundServerUser) {
        preconditionLocked("SoundServerConnection.remove")
        users.removeAll { $0 === user }
        if let context { cpulse_context_forget(context, Unmanaged.passUnretained(user as AnyObject).toOpaque()) }
        subscribe()
    }

    /// Tries again at once with the first delay when the server does not answer now (a sign that
    /// it just started came from elsewhere); nothing while connected or connecting.
    package func retryNow() {
        guard context == nil || lostContext == context, let reconnectTimer else { return }
        retryDelay = nil
        cpulse_timer_arm(loop, reconnectTimer, 0)
    }

    /// Lists the server for every user (once more after a listing under way): for a user that
    /// needs a listing without an event, as a watcher joining. Nothing while not ready: the
    /// next ready connection is listed.
    package func list() {
        preconditionLocked("SoundServerConnection.list")
        guard isReady, let context else { return }
        listing.list(on: context, watching: subscribed)
    }

    private func listed(_ view: SoundServerView) {
        // A query that ended because the connection failed lists nothing: the state callback
        // reports the loss instead.
        guard isReady else { return }
        for user in users { user.serverListed(view) }
    }

    /// Subscribes to what the users watch, when that changed.
    private func subscribe() {
        guard let context, isReady else { return }
        let wanted = users.reduce(UInt32(0)) { $0 | $1.facilities }
        guard wanted != subscribed else { return }
        subscribed = wanted
        cpulse_context_subscribe(context, wanted)
    }

    // MARK: - On the loop's thread, or with the lock held

    private func connect() {
        if let reconnectTimer { cpulse_timer_disarm(loop, reconnectTimer) }
        // Never from the context's own callback: the last one was lost or never made. Its streams
        // were failed and let go of by libpulse when it was lost.
        listing.forget()
        if let context { cpulse_context_release(context) }
        // A new context may get the freed one's address.
        lostContext = nil
        subscribed = 0
        context = cpulse_context_new(loop, Self.clientName,
                                     { SoundServerConnection.from($0).stateChanged() },
                                     { SoundServerConnection.from($0).changed($1) }, userdata)
        guard let context else { return lost("cannot create a libpulse context") }
        if cpulse_context_connect(context) < 0 { lost(String(cString: cpulse_context_error(context))) }
    }

    /// The reconnect timer fired.
    private func retry() {
        guard !users.isEmpty, context == nil || lostContext == context else { return }
        connect()
    }

    private func stateChanged() {
        // A stream being opened waits for this.
        signal()
        guard let context else { return }
        switch Int(cpulse_context_state(context)) {
        case Int(CPULSE_READY):
            retryDelay = nil
            subscribe()
            for user in users { user.connectionReady() }
            list()
        case Int(CPULSE_FAILED), Int(CPULSE_TERMINATED):
            lost(String(cString: cpulse_context_error(context)))
        default:
            break
        }
    }

    private func changed(_ facility: UInt32) {
        list()
    }

    private func lost(_ error: String) {
        guard context == nil || lostContext != context else { return }
        lostContext = context
        listing.forget()
        signal()
        for user in users { user.connectionLost(error) }
        // Streams come back when they are made again; only users wait for the server.
        guard let first = users.map(\.firstRetry).min(), let reconnectTimer else { return }
        let delay = retryDelay ?? first
        retryDelay = min(delay * 2, Self.longestRetry)
        // The context is released by the next attempt, outside its own callback.
        cpulse_timer_arm(loop, reconnectTimer, delay.microseconds)
    }
}

/// What hears the sound server: told when it is ready, what it shows after each event (one
/// ``ServerListing`` for all), and when it went away. A ``SoundServerUser`` of the process's
/// ``SoundServerConnection`` hears it from the connection; the daemon's watchers hear it from their
/// one user, which passes every call on. Every call comes with the connection's lock held.
package protocol SoundServerListener: AnyObject {
    /// The connection is ready (again, after a loss, or already when the listener came), and
    /// subscribed to every user's facilities; a listing follows.
    func connectionReady()
    /// The server as one listing found it, after each event of the users' facilities, after each
    /// ready connection, and after a ``SoundServerConnection/list()``.
    func serverListed(_ view: SoundServerView)
    /// An attempt failed or the connection was lost, in libpulse's words; once per loss.
    func connectionLost(_ error: String)
}

/// A user of the process's ``SoundServerConnection`` (the daemon's watchers, together; each sink
/// stream's rate follower): a ``SoundServerListener`` that says which events it needs and how soon
/// a lost connection is tried again for it.
package protocol SoundServerUser: SoundServerListener {
    /// The facilities whose events it hears of (`CPULSE_WATCH_*` or'ed): what is listed.
    var facilities: UInt32 { get }
    /// How soon a lost or refused connection is tried again while this user is there: the first
    /// step of a backoff that doubles to ``SoundServerConnection/longestRetry``.
    var firstRetry: Duration { get }
}
