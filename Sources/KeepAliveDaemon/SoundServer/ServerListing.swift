import CPulse
import KeepAlive
import Logging
import Synchronization
import Glibc

/// The daemon's one listing of the sound server: one user of the process's connection
/// (``SoundServerConnection``, shared with the sinks' streams) that subscribes to sink, card,
/// stream and server events and, after each, lists the server, its sinks, cards, clients and
/// streams once, into one ``SoundServerView`` that every watcher gets (``SinkWatcher``,
/// ``LingerWatcher``). keepalived's own streams are told apart here, once
/// (``ServerStream/isOwn``).
///
/// Why one: each watcher used to list on its own, so with `--linger` beside a selection every
/// event cost two listings of everything, and each told its own streams apart its own way.
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
/// final class Printer: ServerListingWatcher {
///     func serverAnswered() {}
///     func serverListed(_ view: SoundServerView) { print(view.sinks.map(\.name)) }
///     func serverLost(_ error: String) { print("lost: \(error)") }
/// }
/// let printer = Printer()
/// let listing = try ServerListing.shared(logger: Logger(label: "example"))
/// _ = listing.join(printer)
/// // …
/// listing.leave(printer)
/// ```
final class ServerListing: SoundServerUser, @unchecked Sendable {
    let facilities = UInt32(CPULSE_WATCH_SINKS | CPULSE_WATCH_CARDS | CPULSE_WATCH_SERVER | CPULSE_WATCH_SINK_INPUTS)
    let firstRetry: Duration = .milliseconds(250)
    let logger: Logger

    /// The connection while a watcher is joined. Set and cleared by ``join(_:before:)`` and
    /// ``leave(_:after:)`` (with ``membership`` held, while no callback of this listing can run);
    /// read by the callbacks.
    private var connection: SoundServerConnection?
    /// Joins and leaves, one at a time; taken before the loop's lock, never on the loop's thread.
    private let membership = Mutex<Void>(())

    // With the loop's lock held or on its thread (in a callback).
    private var watchers: [any ServerListingWatcher] = []
    private var listing = false
    private var listAgain = false
    private var step = 0
    private var draft = SoundServerView(server: "", sinks: [])
    private var ownClients: Set<UInt32> = []
    private let ownProcessID = String(getpid())
    /// Listings that went through to the end since the listing was made.
    private var completed = 0

    private static let process = Mutex<ServerListing?>(nil)

    /// The process's listing; made (and libpulse loaded) by the first call. Throws the loader's
    /// message when libpulse cannot be loaded. `logger` is the first caller's.
    static func shared(logger: Logger) throws(LibraryMissing) -> ServerListing {
        try process.withLock { (listing: inout ServerListing?) throws(LibraryMissing) -> ServerListing in
            if let listing { return listing }
            if let failure = cpulse_load() { throw LibraryMissing(message: String(cString: failure)) }
            let made = ServerListing(logger: logger)
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
    func join(_ watcher: any ServerListingWatcher, before: () -> Void = {}) -> Bool {
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
                watcher.serverAnswered()
                list()
            }
            return true
        }
    }

    /// Removes `watcher`: nothing reaches it afterwards. `after` runs on the locked loop once it
    /// is gone (to free its timers). The last to leave lets go of the connection (a listing under
    /// way is forgotten).
    func leave(_ watcher: any ServerListingWatcher, after: () -> Void = {}) {
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
            listing = false
            listAgain = false
            connection.release()
        }
    }

    private func watchers(contain watcher: any ServerListingWatcher) -> Bool {
        guard let connection = self.connection else { return false }
        connection.lock()
        defer { connection.unlock() }
        return watchers.contains { $0 === watcher }
    }

    /// The connection's main loop, for a watcher's timers: while it is joined only.
    var loop: OpaquePointer {
        guard let connection else { preconditionFailure("ServerListing.loop used while no watcher is joined") }
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
        guard let context = connection?.context else { return false }
        return cpulse_move_sink_input(context, index, sink) == 0
    }

    /// Whether the connection is ready now. On the loop's thread or with the loop locked.
    var isReady: Bool { connection?.isReady ?? false }

    // MARK: - SoundServerUser, with the loop locked

    func connectionReady() {
        // A new connection: what the last one had under way was dropped with it.
        listing = false
        listAgain = false
        for watcher in watchers { watcher.serverAnswered() }
        list()
    }

    func serverChanged() { list() }

    func connectionLost(_ error: String) {
        for watcher in watchers { watcher.serverLost(error) }
    }

    // MARK: - Listing

    /// The lists of one listing, in order: the clients before the streams, which name them.
    private static let lists = [CPULSE_LIST_SERVER, CPULSE_LIST_SINKS, CPULSE_LIST_CARDS, CPULSE_LIST_CLIENTS, CPULSE_LIST_SINK_INPUTS]

    /// Lists everything unless a listing runs; then it runs once more after that one, which may
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
        guard let context = connection?.context else { return }
        guard step < Self.lists.count else { return listed() }
        // The connection forgets the queries sent with this userdata when this leaves it.
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        let sent = cpulse_list(context, Int32(Self.lists[step]), { ServerListing.from($0).received($1) }, userdata)
        // Not sent: the connection is failing, and its state callback reports the loss.
        if sent < 0 { listing = false }
    }

    private func received(_ entry: UnsafeRawPointer?) {
        guard let entry else {
            step += 1
            return send()
        }
        switch Self.lists[step] {
        case CPULSE_LIST_SERVER:
            draft = SoundServerView(entry.assumingMemoryBound(to: cpulse_server.self).pointee)
            ownClients = []
        case CPULSE_LIST_SINKS:
            draft.sinks.append(ServerSink(entry.assumingMemoryBound(to: cpulse_sink.self).pointee))
        case CPULSE_LIST_CARDS:
            draft.cards.append(ServerCard(entry.assumingMemoryBound(to: cpulse_card.self).pointee))
        case CPULSE_LIST_CLIENTS:
            let client = entry.assumingMemoryBound(to: cpulse_client.self).pointee
            if client.process_id.map({ String(cString: $0) }) == ownProcessID { ownClients.insert(client.index) }
        default:
            let input = entry.assumingMemoryBound(to: cpulse_sink_input.self).pointee
            // PulseAudio copies the client's process id onto its streams; PipeWire leaves it on
            // the client.
            let own = input.process_id.map { String(cString: $0) } == ownProcessID || ownClients.contains(input.client)
            draft.streams.append(ServerStream(index: input.index, sink: input.sink, isCorked: input.corked != 0, isOwn: own,
                                              application: input.application.map { String(cString: $0) } ?? ""))
        }
    }

    private func listed() {
        listing = false
        let again = listAgain
        listAgain = false
        // A query that ended because the connection failed lists nothing: the state callback
        // reports the loss instead.
        guard isReady else { return }
        completed += 1
        logger.debug("listed the sound server", metadata: ["listing": "\(completed)", "sinks": "\(draft.sinks.count)",
                                                          "streams": "\(draft.streams.count)", "watchers": "\(watchers.count)"])
        let view = draft
        for watcher in watchers { watcher.serverListed(view) }
        if again { list() }
    }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> ServerListing {
        Unmanaged<ServerListing>.fromOpaque(userdata!).takeUnretainedValue()
    }
}

/// What a watcher of the ``ServerListing`` hears: on the connection's thread, its loop locked.
///
/// ```swift
/// final class Counter: ServerListingWatcher {
///     var sinks = 0
///     func serverAnswered() {}
///     func serverListed(_ view: SoundServerView) { sinks = view.sinks.count }
///     func serverLost(_ error: String) { sinks = 0 }
/// }
/// ```
protocol ServerListingWatcher: AnyObject {
    /// The server answers (again, after a loss, or already when the watcher joined); a listing
    /// follows.
    func serverAnswered()
    /// The server as one listing found it, after every event (and after each answer).
    func serverListed(_ view: SoundServerView)
    /// An attempt failed or the connection was lost, in libpulse's words; once per loss.
    func serverLost(_ error: String)
}

// MARK: - libpulse's entries, copied (their strings live only in the callback)

extension SoundServerView {
    /// A listing's start, from the server's answer; the strings are copied.
    init(_ server: cpulse_server) {
        let name = server.name.map { String(cString: $0) } ?? "sound server"
        let version = server.version.map { String(cString: $0) }
        self.init(server: version.map { "\(name) \($0)" } ?? name, defaultSink: server.default_sink.map { String(cString: $0) }, sinks: [])
    }
}

extension ServerSink {
    /// A sink as libpulse listed it; the strings are copied (they live only in the callback).
    init(_ sink: cpulse_sink) {
        self.init(name: String(cString: sink.name), description: sink.description.map { String(cString: $0) } ?? "")
        index = sink.index
        driver = sink.driver.map { String(cString: $0) } ?? ""
        state = switch Int(sink.state) {
        case Int(CPULSE_SINK_RUNNING): .running
        case Int(CPULSE_SINK_IDLE): .idle
        case Int(CPULSE_SINK_SUSPENDED): .suspended
        default: .other
        }
        isHardware = sink.hardware != 0
        activePort = sink.active_port.map { String(cString: $0) }
        activePortType = Int(sink.active_port_type)
        sampleRate = sink.rate > 0 ? Int(sink.rate) : nil
        properties = Self.read(sink.properties)
    }

    /// The properties keepalived reads, from a libpulse property list.
    static func read(_ list: UnsafeRawPointer?) -> [String: String] {
        var properties: [String: String] = [:]
        for key in Property.all {
            if let value = cpulse_property(list, key) { properties[key] = String(cString: value) }
        }
        return properties
    }
}

extension ServerCard {
    init(_ card: cpulse_card) {
        self.init(name: String(cString: card.name), activeProfile: card.active_profile.map { String(cString: $0) },
                  properties: ServerSink.read(card.properties))
        index = card.index
    }
}
