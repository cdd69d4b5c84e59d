/// What the sound server showed the last time it was asked (``ServerListing``): its sinks, its
/// cards, its default sink and its streams. A card it lists, through a sink or through its card
/// list, belongs to it, also while its sink is suspended and the device closed.
///
/// ```swift
/// let view = SoundServerView(server: "pulseaudio 16.1", sinks: sinks, cards: cards)
/// view.ownedCards   // [0, 1]: never opened behind the server's back
/// ```
package struct SoundServerView: Sendable, Equatable {
    /// The server's name and version ("pulseaudio 16.1", "PulseAudio (on PipeWire 0.3.65) 15.0.0").
    package var server: String
    package var defaultSink: String?
    package var sinks: [ServerSink]
    package var cards: [ServerCard]
    /// The streams playing to sinks (sink inputs), keepalived's own among them.
    package var streams: [ServerStream]

    package init(server: String, defaultSink: String? = nil, sinks: [ServerSink], cards: [ServerCard] = [], streams: [ServerStream] = []) {
        self.server = server
        self.defaultSink = defaultSink
        self.sinks = sinks
        self.cards = cards
        self.streams = streams
    }

    /// The ALSA card indices the server owns.
    package var ownedCards: Set<Int> {
        Set(sinks.compactMap(\.alsaCard)).union(cards.compactMap(\.alsaCard))
    }

    /// The sink a PCM name plays to, when it is one of this server's (`pulse:DEVICE=…`).
    package func sink(forPCM pcm: String) -> ServerSink? {
        guard let name = ServerSink.sinkName(fromPCM: pcm) else { return nil }
        return sinks.first { $0.name == name }
    }
}
