/// One of the sound server's sinks (PulseAudio's, or PipeWire's through pipewire-pulse), as
/// libpulse's introspection describes it, with what keepalived makes of it: its kind, whether it
/// is a device at all, and the ALSA PCM that plays to it.
///
/// ```swift
/// let sink = ServerSink(name: "alsa_output.pci-0000_00_1f.3.hdmi-stereo", description: "Built-in Audio Digital Stereo (HDMI)",
///                       properties: ["device.api": "alsa", "alsa.card": "0", "device.profile.name": "hdmi-stereo"])
/// sink.kind    // .hdmi
/// sink.pcm     // pulse:DEVICE=alsa_output.pci-0000_00_1f.3.hdmi-stereo
/// ```
package struct ServerSink: Sendable, Equatable {
    package var index: UInt32 = 0
    package var name: String
    package var description: String
    /// The server module that made it: `module-alsa-card.c`, `module-null-sink.c`, PipeWire's own.
    package var driver: String = ""
    package var state: State = .suspended
    /// PulseAudio's PA_SINK_HARDWARE flag.
    var isHardware = false
    var activePort: String?
    /// libpulse's port type (14 and later); 0 when unknown.
    var activePortType: Int = 0
    /// The rate the sink mixes at; nil when the server gave none.
    package var sampleRate: Int?
    /// The properties keepalived reads (``Property``), as the server gives them.
    package var properties: [String: String] = [:]

    package init(name: String, description: String, properties: [String: String] = [:]) {
        self.name = name
        self.description = description
        self.properties = properties
    }

    package enum State: String, Sendable, Equatable {
        case running, idle, suspended, other
    }

    /// The property keys read from a sink or a card.
    package enum Property {
        static let deviceClass = "device.class"
        static let api = "device.api"
        package static let bus = "device.bus"
        static let formFactor = "device.form_factor"
        package static let profile = "device.profile.name"
        package static let alsaCard = "alsa.card"
        package static let all = [deviceClass, api, bus, formFactor, profile, alsaCard]
    }

    /// The port types libpulse names (pa_device_port_type_t).
    package enum PortType {
        static let spdif = 9
        package static let hdmi = 10
    }

    /// The ALSA card behind it (`alsa.card`), when the server plays to one.
    package var alsaCard: Int? { properties[Property.alsaCard].flatMap { Int($0) } }

    /// Whether it plays to a device. A sink that plays into other sinks or nowhere (a null sink,
    /// a combine, remap, loopback or filter-chain sink, EasyEffects' sinks) is virtual: keeping it
    /// awake keeps nothing awake, so a selection never picks it; it is played only by name.
    package var isVirtual: Bool {
        if let deviceClass = properties[Property.deviceClass], ["abstract", "filter", "monitor"].contains(deviceClass) { return true }
        let api = properties[Property.api] ?? ""
        let playsToDevice = isHardware || api == "alsa" || api.hasPrefix("bluez") || alsaCard != nil || properties[Property.bus] == "bluetooth"
        return !playsToDevice
    }

    /// What it is, from the bus, the active port's type, then the names of its profile, its port
    /// and its description (the server names digital profiles `hdmi-stereo`, `iec958-stereo`).
    package var kind: OutputKind {
        let api = properties[Property.api] ?? ""
        if properties[Property.bus] == "bluetooth" || api.hasPrefix("bluez") { return .bluetooth }
        if activePortType == PortType.hdmi { return .hdmi }
        if activePortType == PortType.spdif { return .spdif }
        let names = [properties[Property.profile], activePort, description].compactMap { $0?.lowercased() }
        if names.contains(where: { $0.contains("hdmi") || $0.contains("displayport") }) { return .hdmi }
        if names.contains(where: { $0.contains("iec958") || $0.contains("spdif") || $0.contains("s/pdif") }) { return .spdif }
        return properties[Property.bus] == "usb" ? .usb : .analog
    }

    /// The name of this sink's output: the ALSA PCM that plays to it through ALSA's pulse plug-in
    /// (`pulse:DEVICE=…`, which PipeWire's pulse server answers too), and what `-d` takes.
    /// keepalived itself plays to the sink through a stream of its own (`ServerSinkPCM`), and
    /// opens this PCM only when it cannot load libpulse. A name with characters ALSA's argument
    /// syntax gives a meaning to is quoted.
    package var pcm: String { Self.pcm(forSink: name) }

    package static func pcm(forSink name: String) -> String {
        let plain = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || [0x2E, 0x2D, 0x5F].contains(byte)
        }
        guard !plain else { return "pulse:DEVICE=\(name)" }
        var escaped = ""
        for character in name {
            if character == "\"" || character == "\\" { escaped.append("\\") }
            escaped.append(character)
        }
        return "pulse:DEVICE=\"\(escaped)\""
    }

    /// The sink a `pulse:DEVICE=…` PCM name plays to, or nil for any other name.
    package static func sinkName(fromPCM pcm: String) -> String? {
        guard pcm.hasPrefix("pulse:DEVICE=") else { return nil }
        var value = Substring(pcm.dropFirst("pulse:DEVICE=".count))
        guard value.first == "\"" else { return value.isEmpty ? nil : String(value) }
        value = value.dropFirst()
        var name = ""
        var escaping = false
        for character in value {
            if escaping {
                name.append(character)
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else if character == "\"" {
                return name
            } else {
                name.append(character)
            }
        }
        return nil
    }
}
