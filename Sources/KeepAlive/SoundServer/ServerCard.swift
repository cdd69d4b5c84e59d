/// One of the server's cards: a device it has profiles for, whether or not a sink of it exists
/// now (a card switched to the `off` profile still belongs to the server).
///
/// ```swift
/// let card = ServerCard(name: "alsa_card.pci-0000_00_1f.3", properties: ["alsa.card": "0"])
/// card.alsaCard   // 0
/// ```
package struct ServerCard: Sendable, Equatable {
    package var index: UInt32 = 0
    package var name: String
    var activeProfile: String?
    package var properties: [String: String] = [:]

    package init(name: String, activeProfile: String? = nil, properties: [String: String] = [:]) {
        self.name = name
        self.activeProfile = activeProfile
        self.properties = properties
    }

    package var alsaCard: Int? { properties[ServerSink.Property.alsaCard].flatMap { Int($0) } }
}
