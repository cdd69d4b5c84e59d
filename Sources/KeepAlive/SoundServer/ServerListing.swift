import CKeepAlivePulse
import Glibc

/// The process's one listing of the sound server, run by its ``SoundServerConnection``: after
/// the connection is ready and after each event its users watch, the server, its sinks, cards,
/// clients and streams are listed once, into one ``SoundServerView`` that every
/// ``SoundServerUser`` gets (the daemon's sink and `--linger` watchers, and each sink stream's
/// ``SinkRateFollower``). keepalived's own streams are told apart here, once
/// (``ServerStream/isOwn``).
///
/// Why one: each user used to list on its own, so one stream event cost a listing per watcher
/// and per sink stream, and each told keepalived's streams apart its own way.
///
/// Only what some user watches is listed (the server always: its name and default sink); an
/// event during a listing lists once more after it, which may have missed the change.
///
/// ```swift
/// let listing = ServerListing { view in print(view.sinks.count) }   // the connection's
/// listing.list(on: context, watching: UInt32(CPULSE_WATCH_SINKS))  // with the loop locked
/// listing.forget()                                                 // the context was lost
/// ```
///
/// Concurrency: the connection's lock held, or on its loop's thread; checked by the connection.
final class ServerListing {
    private let listed: (SoundServerView) -> Void
    private var context: OpaquePointer?
    /// The lists of the listing under way, in order (clients before the streams, which name them).
    private var lists: [Int] = []
    private var step = 0
    private var running = false
    private var again = false
    /// What the users watch, as of the last request: what the next listing lists.
    private var facilities: UInt32 = 0
    private var draft = SoundServerView(server: "", sinks: [])
    private var ownClients: Set<UInt32> = []
    private let ownProcessID = String(getpid())

    /// `listed` gets each finished listing, with the loop locked.
    init(listed: @escaping (SoundServerView) -> Void) {
        self.listed = listed
    }

    /// Lists what `facilities` (`CPULSE_WATCH_*` or'ed) cover on `context`, a ready connection;
    /// once more after the listing under way, if one is.
    func list(on context: OpaquePointer, watching facilities: UInt32) {
        self.facilities = facilities
        guard !running else {
            again = true
            return
        }
        running = true
        again = false
        self.context = context
        lists = [CPULSE_LIST_SERVER]
        if facilities & UInt32(CPULSE_WATCH_SINKS) != 0 { lists.append(CPULSE_LIST_SINKS) }
        if facilities & UInt32(CPULSE_WATCH_CARDS) != 0 { lists.append(CPULSE_LIST_CARDS) }
        if facilities & UInt32(CPULSE_WATCH_SINK_INPUTS) != 0 { lists += [CPULSE_LIST_CLIENTS, CPULSE_LIST_SINK_INPUTS] }
        step = 0
        send()
    }

    /// The connection was lost or let go of: the listing under way ended with it (libpulse drops
    /// its queries), and the next starts afresh.
    func forget() {
        if let context { cpulse_context_forget(context, userdata) }
        context = nil
        running = false
        again = false
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private func send() {
        guard let context else { return }
        guard step < lists.count else { return finish() }
        // The connection forgets the queries sent with this userdata when it is lost.
        let sent = cpulse_list(context, Int32(lists[step]), { ServerListing.from($0).received($1) }, userdata)
        // Not sent: the connection is failing, and its state callback reports the loss.
        if sent < 0 { running = false }
    }

    private func received(_ entry: UnsafeRawPointer?) {
        guard let entry else {
            step += 1
            return send()
        }
        switch lists[step] {
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
                                              application: input.application.map { String(cString: $0) } ?? "", rate: input.rate,
                                              home: own ? input.home.map { String(cString: $0) } : nil))
        }
    }

    private func finish() {
        running = false
        let view = draft
        draft = SoundServerView(server: "", sinks: [])
        listed(view)
        if again, let context { list(on: context, watching: facilities) }
    }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> ServerListing {
        Unmanaged<ServerListing>.fromOpaque(userdata!).takeUnretainedValue()
    }
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
