/// What the sound server showed the last time it was asked (``ServerListing``): its sinks, its
/// cards, its default sink and its streams. A card it lists, through a sink or through its card
/// list, belongs to it, also while its sink is suspended and the device closed.
///
/// ```swift
/// let view = SoundServerView(server: "pulseaudio 16.1", sinks: sinks, cards: cards)
/// view.ownedCards   // [0, 1]: never opened behind the server's back
/// ```
struct SoundServerView: Sendable, Equatable {
    /// The server's name and version ("pulseaudio 16.1", "PulseAudio (on PipeWire 0.3.65) 15.0.0").
    var server: String
    var defaultSink: String?
    var sinks: [ServerSink]
    var cards: [ServerCard]
    /// The streams playing to sinks (sink inputs), keepalived's own among them.
    var streams: [ServerStream]

    init(server: String, defaultSink: String? = nil, sinks: [ServerSink], cards: [ServerCard] = [], streams: [ServerStream] = []) {
        self.server = server
        self.defaultSink = defaultSink
        self.sinks = sinks
        self.cards = cards
        self.streams = streams
    }

    /// The ALSA card indices the server owns.
    var ownedCards: Set<Int> {
        Set(sinks.compactMap(\.alsaCard)).union(cards.compactMap(\.alsaCard))
    }

    /// The sink a PCM name plays to, when it is one of this server's (`pulse:DEVICE=…`).
    func sink(forPCM pcm: String) -> ServerSink? {
        guard let name = ServerSink.sinkName(fromPCM: pcm) else { return nil }
        return sinks.first { $0.name == name }
    }
}

/// Whether a sound server answers, as far as the daemon knows.
///
/// ```swift
/// switch watcher.reachability {
/// case .unknown: break                        // not answered yet: pick no card meanwhile
/// case .unreachable(let why): print(why)      // none for this user: the cards are keepalived's
/// case .connected(let view): print(view.sinks.count)
/// }
/// ```
enum SoundServerReachability: Sendable, Equatable {
    /// Not asked yet, or the first answer is still on its way.
    case unknown
    /// No server answers this user (none runs, or it runs as another user); why, in libpulse's words.
    case unreachable(String)
    case connected(SoundServerView)

    var view: SoundServerView? {
        if case .connected(let view) = self { view } else { nil }
    }
}
