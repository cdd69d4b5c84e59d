/// Which ALSA outputs to keep awake when they are not named one by one.
///
/// ```swift
/// let hints = ALSADevice.playbackDevices()
/// let outputs = OutputSelection.digital.pick(from: hints)  // e.g. ["dmix:CARD=PCH,DEV=3"]
/// let noBluetooth = OutputSelection.all.pick(from: hints, excluding: [try OutputExclusion("*bluez*")])
/// ```
public enum OutputSelection: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Every hardware output and every hinted PCM of the user's configuration.
    case all
    /// HDMI, DisplayPort, S/PDIF and IEC958 outputs.
    case digital
    /// Everything that is not digital.
    case analog

    public var description: String { rawValue }

    /// ALSA's software devices and sound-server plug-ins: not outputs of their own.
    package static let virtualDevices: Set<String> = [
        "null", "default", "sysdefault", "pulse", "pipewire", "jack", "oss", "upmix", "vdownmix", "usb_stream",
        "a52", "speex", "lavrate", "lavrate_fast", "lavrate_faster", "lavrate_high", "lavrate_higher",
        "samplerate", "samplerate_best", "samplerate_linear", "samplerate_medium", "samplerate_order",
        "speexrate", "speexrate_best", "speexrate_medium",
    ]

    /// Card device prefixes that open the hardware directly: taking one would lock other
    /// programs out of that device, so they are never picked (their `dmix:` twin is).
    package static let exclusivePrefixes: Set<String> = [
        "hw", "plughw", "front", "rear", "center_lfe", "side", "surround21", "surround40", "surround41",
        "surround50", "surround51", "surround71", "hdmi", "iec958", "spdif", "dsnoop", "sysdefault",
        // The package's PCM for players: the hardware itself, handed over by keepalived.
        "keepalived", "keepalived-plug",
    ]

    /// The PCM names to open for this selection, in hint order.
    ///
    /// For each card device the shared `dmix:CARD=…,DEV=…` form is used, so other programs keep
    /// playing to the same hardware. A card device without one is skipped unless
    /// `allowExclusive`, which takes its `plughw:` form instead. PCMs of the user's own
    /// configuration (no `CARD=`) are taken as named. An output that one of `exclusions` matches
    /// is left out (a card device when any of its names or descriptions matches).
    public func pick(from devices: [ALSADevice], allowExclusive: Bool = false, excluding exclusions: [OutputExclusion] = []) -> [String] {
        pick(from: devices, allowExclusive: allowExclusive, excluding: exclusions, mixing: [:])
    }

    /// ``pick(from:allowExclusive:excluding:)`` knowing what dmix can do on some card devices
    /// (`mixing`, by `CARD,DEV` as ``split(_:)`` keys them, from ``CardDeviceMixing/probe``); a
    /// card device not in it is taken to be mixable, as ALSA's hints say.
    ///
    /// - A dmix is never picked where dmix cannot mix (`.iec958Only`, `.unmixable`).
    /// - An IEC958-only card device (a Raspberry Pi's HDMI) is digital whatever its description
    ///   says, and is taken by `all` and `digital` without `allowExclusive`: no shared form of it
    ///   exists at all (two programs cannot share it through any PCM), so taking it costs others
    ///   no more than any program playing there; players get it through `keepalived:`. It is
    ///   opened as ``iec958Form(_:in:carrying:)`` names it (`carrying`: `--carry`).
    /// - An unmixable one (float or DSD only) only through `plughw:` with `allowExclusive`.
    package func pick(from devices: [ALSADevice], allowExclusive: Bool = false, excluding exclusions: [OutputExclusion] = [],
                      mixing: [String: CardDeviceMixing]) -> [String] {
        pick(from: devices, allowExclusive: allowExclusive, excluding: exclusions, mixing: mixing, carrying: false)
    }

    /// ``pick(from:allowExclusive:excluding:mixing:)`` for a daemon that carries players
    /// (`--carry`, `carrying`): an IEC958-only card device is then taken on its `hw:`.
    package func pick(from devices: [ALSADevice], allowExclusive: Bool = false, excluding exclusions: [OutputExclusion] = [],
                      mixing: [String: CardDeviceMixing], carrying: Bool) -> [String] {
        let excluded = Self.excluded(devices, by: exclusions)
        var picked: [String] = []
        var sharedCardDevices = Set<String>()
        for device in devices {
            let (prefix, card) = Self.split(device.name)
            if prefix == "dmix", let card { sharedCardDevices.insert(card) }
        }
        var exclusiveTaken = Set<String>()
        for device in devices where excluded.names[device.name] == nil {
            let (prefix, card) = Self.split(device.name)
            if let card {
                guard excluded.cards[card] == nil else { continue }
                switch mixing[card] {
                case .iec958Only?:
                    // At the place of its dmix hint, or of its hw one when it has none.
                    guard self != .analog, prefix == "dmix" || (prefix == "hw" && !sharedCardDevices.contains(card)),
                          exclusiveTaken.insert(card).inserted else { continue }
                    picked.append(Self.iec958Form(card, in: devices, carrying: carrying))
                case .unmixable?:
                    if matches(device), allowExclusive, prefix == "plughw", exclusiveTaken.insert(card).inserted { picked.append(device.name) }
                case .mixable?, nil:
                    guard matches(device) else { continue }
                    if prefix == "dmix" {
                        picked.append(device.name)
                    } else if allowExclusive, prefix == "plughw", !sharedCardDevices.contains(card), exclusiveTaken.insert(card).inserted {
                        picked.append(device.name)
                    }
                }
            } else if matches(device), !Self.virtualDevices.contains(prefix), !Self.exclusivePrefixes.contains(prefix) {
                picked.append(device.name)
            }
        }
        return picked
    }

    /// The PCM that keeps IEC958-only card device `card` (`vc4hdmi0,0`) awake: the card's own
    /// `hdmi:` alias where the hints list one for it, which frames in software and sets the
    /// card's IEC958 controls as the card's configuration says; else its `hw:` (keepalived's
    /// engine frames IEC958 itself). Its `hw:` too when keepalived carries players (`carrying`):
    /// alsa-lib's IEC958 layer carries none (``PCMChain/carriesPlayersUnchanged``).
    ///
    /// `hdmi:`'s DEV counts the card's HDMI outputs, not its PCM devices (HDA's `hdmi:…,DEV=0`
    /// is PCM device 3), so an alias is paired with a PCM device only where the card has as
    /// many `hdmi:` hints as PCM devices in the hints (a Pi's vc4hdmi cards: one of each), by
    /// their order; any other card gets `hw:`.
    package static func iec958Form(_ card: String, in devices: [ALSADevice]) -> String {
        iec958Form(card, in: devices, carrying: false)
    }

    /// ``iec958Form(_:in:)``, or the device's `hw:` when keepalived carries players (`carrying`).
    package static func iec958Form(_ card: String, in devices: [ALSADevice], carrying: Bool) -> String {
        let parts = card.split(separator: ",", maxSplits: 1).map(String.init)
        let (id, device) = (parts[0], parts.count > 1 ? parts[1] : "0")
        if carrying { return "hw:CARD=\(id),DEV=\(device)" }
        var numbers = Set<Int>()
        var hdmi: [Int: String] = [:]
        for hint in devices {
            let (prefix, key) = split(hint.name)
            guard let key, key.split(separator: ",").first.map(String.init) == id,
                  let number = key.split(separator: ",").last.flatMap({ Int($0) }) else { continue }
            if ["hw", "plughw", "dmix"].contains(prefix) { numbers.insert(number) }
            if prefix == "hdmi" { hdmi[number] = hint.name }
        }
        let ordered = numbers.sorted()
        if hdmi.count == ordered.count, let number = Int(device), let position = ordered.firstIndex(of: number), let alias = hdmi[position] {
            return alias
        }
        return "hw:CARD=\(id),DEV=\(device)"
    }

    /// The first exclusion matching each card device (by its `CARD,DEV` key) and each other PCM.
    /// A card device is matched through the forms numbered by its PCM device (`hw:`, `plughw:`,
    /// `dmix:`): other aliases count their own way (`hdmi:CARD=PCH,DEV=0` is the first HDMI
    /// device, PCM device 3), so they would exclude the wrong one.
    package static func excluded(_ devices: [ALSADevice], by exclusions: [OutputExclusion])
        -> (cards: [String: OutputExclusion], names: [String: OutputExclusion])
    {
        var cards: [String: OutputExclusion] = [:]
        var names: [String: OutputExclusion] = [:]
        guard !exclusions.isEmpty else { return (cards, names) }
        for device in devices {
            guard let exclusion = exclusions.first(where: { $0.matches(device) }) else { continue }
            let (prefix, card) = split(device.name)
            if let card {
                if ["hw", "plughw", "dmix"].contains(prefix), cards[card] == nil { cards[card] = exclusion }
            } else if names[device.name] == nil {
                names[device.name] = exclusion
            }
        }
        return (cards, names)
    }

    func matches(_ device: ALSADevice) -> Bool {
        switch self {
        case .all: true
        case .digital: device.isDigital
        case .analog: !device.isDigital
        }
    }

    /// `dmix:CARD=PCH,DEV=3` → ("dmix", "PCH,3"); `mypcm` → ("mypcm", nil).
    package static func split(_ name: String) -> (prefix: String, card: String?) {
        guard let colon = name.firstIndex(of: ":") else { return (name, nil) }
        let prefix = String(name[..<colon])
        var card: String?
        var device = "0"
        for part in name[name.index(after: colon)...].split(separator: ",") {
            if part.hasPrefix("CARD=") { card = String(part.dropFirst(5)) }
            if part.hasPrefix("DEV=") { device = String(part.dropFirst(4)) }
        }
        return (prefix, card.map { "\($0),\(device)" })
    }
}
