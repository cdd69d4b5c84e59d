import ArgumentParser
import CALSA
import _KeepalivedControlProtocol
import FoundationEssentials
import KeepAlive
import Logging

/// `keepalived devices`: the outputs a person has, one block per sound card device, with what
/// keepalived would open for each, which selections pick it (or why not), and whether a running
/// keepalived plays to it now. `--verbose` adds every PCM ALSA lists, aliases and plug-ins
/// marked as such.
package struct DevicesCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the sound cards' outputs: what keepalived opens for each and which selections pick it.",
        discussion: """
            One block per card device, named as the kernel names it ("HDA Intel — Generic Analog"), \
            with its kind (analog, HDMI/DisplayPort, S/PDIF, USB), the PCM keepalived opens for it \
            (its shared dmix form; plughw only with --exclusive), the selections that pick it, and, \
            when a daemon runs on the socket, whether it plays there now. Outputs of your own ALSA \
            configuration (PCMs with a hint) follow. --verbose lists every PCM name ALSA knows.
            """)

    @OptionGroup var socket: SocketOption

    @Flag(help: "Print one JSON object with the same structure.")
    var json = false

    @Flag(help: "Show what --all/--digital/--analog would pick with --exclusive.")
    var exclusive = false

    @Option(name: .customLong("exclude"), help: ArgumentHelp(
        "Show what --all/--digital/--analog would pick with this --exclude pattern (repeat for several); a running daemon's own patterns are shown too.",
        valueName: "pattern"), transform: { try OutputExclusion($0) })
    var exclusions: [OutputExclusion] = []

    @Flag(name: [.customShort("v"), .long, .customLong("all-pcms")], help: "Also list every PCM name ALSA knows, aliases and plug-ins included.")
    var verbose = false

    /// One card device, as printed and as `--json` carries it.
    struct Output: Codable, Equatable {
        var title: String
        var card: Int
        var cardID: String
        var device: Int
        var kind: String
        /// The PCM keepalived opens for it with the options given (nil: none without --exclusive).
        var opens: String?
        /// Whether other programs can play to it at the same time (a dmix form).
        var shared: Bool
        /// The `--exclude` pattern that leaves it out of every selection.
        var excludedBy: String?
        /// Why no selection opens this card now: the sound server owns it, or another program
        /// reserved it.
        var leftAlone: String?
        /// The ALSA PCM a player names to get this device from keepalived, bit-perfect
        /// (`keepalived:CARD=Intel,DEV=0`, as `hw:` would name it).
        var forPlayers: String
        /// What its hardware takes, as far as dmix goes: `mixable`, `IEC958 only` (a Raspberry
        /// Pi's HDMI: no shared form exists), `unmixable`; nil when it could not be asked (busy,
        /// or refusing opens) and its configuration does not tell.
        var hardware: String?
    }

    /// One of the sound server's sinks.
    struct Sink: Codable, Equatable {
        var name: String
        var description: String
        /// The ALSA card behind it, if any.
        var card: Int?
        /// `HDMI/DisplayPort`, `S/PDIF`, `analog`, `USB`, `Bluetooth`.
        var kind: String
        /// Whether it plays to no device (null, combine, remap, filter sinks).
        var virtual: Bool
        /// `running`, `idle`, `suspended`.
        var state: String
        var isDefault: Bool
        /// The PCM keepalived opens for it (`-d` takes it as is).
        var opens: String
    }

    /// Which selections pick a card device or a sink, why the others do not, and what a running
    /// keepalived does there.
    struct Selections: Codable, Equatable {
        var pickedBy: [String]
        /// Why each selection that does not pick it does not.
        var notPickedBecause: [String: String]
        /// What a running keepalived does there now.
        var playing: String?

        /// The block's last lines, the same for a card device and a sink.
        var lines: [String] {
            var lines = ["  picked by: \(pickedBy.isEmpty ? "no selection" : pickedBy.joined(separator: ", "))"]
            for (option, reason) in notPickedBecause.sorted(by: { $0.key < $1.key }) {
                lines.append("  not by \(option): \(reason)")
            }
            if let playing { lines.append("  now: \(playing)") }
            return lines
        }
    }

    /// A card device or a sink with its ``Selections``: one block of the listing, and in `--json`
    /// one object with the fields of both, which scripts read side by side.
    @dynamicMemberLookup
    struct Block<Item: Codable & Equatable>: Codable, Equatable {
        var item: Item
        var selections: Selections

        init(_ item: Item, _ selections: Selections) {
            self.item = item
            self.selections = selections
        }

        subscript<Value>(dynamicMember keyPath: KeyPath<Item, Value>) -> Value { item[keyPath: keyPath] }

        init(from decoder: any Decoder) throws {
            item = try Item(from: decoder)
            selections = try Selections(from: decoder)
        }

        // Both write into the one keyed container the encoder hands out at this path.
        func encode(to encoder: any Encoder) throws {
            try item.encode(to: encoder)
            try selections.encode(to: encoder)
        }
    }

    /// A PCM of the user's own configuration with a hint (taken as named by the selections).
    struct Configured: Codable, Equatable {
        var name: String
        var description: String
        var digital: Bool
        var pickedBy: [String]
        var excludedBy: String?
    }

    /// Any PCM ALSA lists (`--verbose`).
    struct PCM: Codable, Equatable {
        var name: String
        var description: String
        /// `card` (an alias of a card device: hw, plughw, dmix, front, hdmi, …), `plug-in`
        /// (virtual: null, pulse, rate converters, …), or `configured`.
        var role: String
    }

    struct Listing: Codable, Equatable {
        /// The sound server that answered (`pulseaudio 16.1`), or why none did.
        var soundServer: String
        var sinks: [Block<Sink>]
        var outputs: [Block<Output>]
        var configured: [Configured]
        var pcms: [PCM]?
    }

    package func run() throws {
        calsa_silence_library_errors()
        let listing = makeListing()
        if json {
            printOutput(ControlJSON.encode(listing))
            return
        }
        printOutput(Self.describe(listing))
    }

    func makeListing() -> Listing {
        let hints = ALSADevice.playbackDevices()
        let status: DaemonStatus? = if case .success(let reply) = ControlClient.send("status", to: socket.paths, timeout: .milliseconds(500)) { reply.status } else { nil }
        // The patterns given here, then the running daemon's: what it leaves out is shown too.
        var exclusions = self.exclusions
        for pattern in status?.exclude ?? [] where !exclusions.contains(where: { $0.pattern == pattern }) {
            if let exclusion = try? OutputExclusion(pattern) { exclusions.append(exclusion) }
        }
        let server = Self.askServer()
        var offer = OutputOffer(hints: hints, server: server, cardIndices: OutputScanner.cardIndices(hints))
        offer.mixing = MixingProbes().mixing(for: hints) { OutputPlanner.cardRefusal($0, in: offer) == nil }
        let survey = Survey(hints: hints, offer: offer, exclusions: exclusions, exclusive: exclusive, status: status)
        let choice = OutputChoice(selection: .all, bluetooth: true, exclusions: exclusions, allowExclusive: exclusive)
        let sinks = (server.view?.sinks ?? []).map { sink in
            let verdict = OutputPlanner.verdict(for: sink, choice: choice)
            return Block(
                Sink(name: sink.name, description: sink.description, card: sink.alsaCard, kind: sink.kind.rawValue, virtual: sink.isVirtual,
                     state: sink.state.rawValue, isDefault: sink.name == server.view?.defaultSink, opens: sink.pcm),
                Selections(pickedBy: verdict.pickedBy, notPickedBecause: verdict.notPickedBecause,
                           playing: status?.outputs.first { $0.device == sink.pcm }.map(Self.playing)))
        }
        let soundServer = switch server {
        case .connected(let view): view.server
        case .unreachable(let why): "none answers (\(why))"
        case .unknown: "none answered within 2 s"
        }
        let outputs = CardDevice.playbackDevices().map(survey.block(for:))
        var configured: [Configured] = []
        var pcms: [PCM] = []
        for hint in hints {
            let role = Self.role(of: hint.name)
            pcms.append(PCM(name: hint.name, description: hint.description, role: role))
            guard role == "configured" else { continue }
            configured.append(Configured(
                name: hint.name, description: hint.description, digital: hint.isDigital,
                pickedBy: survey.picks.filter { $0.1.contains(hint.name) }.map { "--\($0.0)" }, excludedBy: survey.excluded.names[hint.name]?.pattern))
        }
        return Listing(soundServer: soundServer, sinks: sinks, outputs: outputs, configured: configured, pcms: verbose ? pcms : nil)
    }

    /// What a running keepalived does on an output: `playing, stream`, `waiting (busy)`.
    static func playing(_ output: OutputReport) -> String {
        "\(output.state)\(output.reason.map { " (\($0))" } ?? "")\(output.mode.map { ", \($0)" } ?? "")"
    }

    /// What a listing's card devices are judged by, read once: ALSA's hints, what each selection
    /// picks from them (with the options given, and with `--exclusive`), the exclusions, and the
    /// running daemon's status.
    struct Survey {
        let hints: [ALSADevice]
        let names: Set<String>
        let offer: OutputOffer
        let excluded: (cards: [String: OutputExclusion], names: [String: OutputExclusion])
        let picks: [(OutputSelection, Set<String>)]
        let exclusivePicks: [(OutputSelection, Set<String>)]
        let exclusive: Bool
        let status: DaemonStatus?

        init(hints: [ALSADevice], offer: OutputOffer, exclusions: [OutputExclusion], exclusive: Bool, status: DaemonStatus?) {
            self.hints = hints
            names = Set(hints.map(\.name))
            self.offer = offer
            excluded = OutputSelection.excluded(hints, by: exclusions)
            picks = OutputSelection.allCases.map { ($0, Set($0.pick(from: hints, allowExclusive: exclusive, excluding: exclusions, mixing: offer.mixing))) }
            exclusivePicks = OutputSelection.allCases.map { ($0, Set($0.pick(from: hints, allowExclusive: true, mixing: offer.mixing))) }
            self.exclusive = exclusive
            self.status = status
        }

        /// One card device's block: what keepalived opens there, and which selections pick it
        /// or why not.
        func block(for device: CardDevice) -> Block<Output> {
            let key = "\(device.cardID),\(device.device)"
            let mixing = offer.mixing[key]
            let shared = device.pcm("dmix")
            // An IEC958-only device has no shared form, whatever the hints list; an unmixable
            // one none either (its dmix cannot play).
            let exclusiveForm = mixing == .iec958Only ? OutputSelection.iec958Form(key, in: hints) : device.pcm("plughw")
            let hasShared = names.contains(shared) && mixing != .iec958Only && mixing != .unmixable
            let opens: String? = hasShared ? shared : (exclusive || mixing == .iec958Only ? exclusiveForm : nil)
            let isDigital = device.kind.isDigital || mixing == .iec958Only
            var pickedBy: [String] = []
            var reasons: [String: String] = [:]
            let exclusion = excluded.cards[key]
            let leftAlone = OutputPlanner.cardRefusal(device.pcm("hw"), in: offer)
            for (selection, picked) in picks {
                if let leftAlone, opens != nil {
                    reasons["--\(selection)"] = leftAlone
                } else if let opens, picked.contains(opens) {
                    pickedBy.append("--\(selection)")
                } else if selection == .digital, !isDigital {
                    reasons["--\(selection)"] = "not a digital output"
                } else if selection == .analog, isDigital {
                    reasons["--\(selection)"] = "a digital output"
                } else if let exclusion {
                    reasons["--\(selection)"] = "excluded by --exclude '\(exclusion)'"
                } else if !hasShared, exclusivePicks.first(where: { $0.0 == selection })?.1.contains(exclusiveForm) == true {
                    reasons["--\(selection)"] = mixing == .unmixable
                        ? "dmix cannot mix what its hardware takes: only with --exclusive, as \(exclusiveForm)"
                        : "no shared (dmix) form: only with --exclusive, as \(exclusiveForm)"
                } else {
                    reasons["--\(selection)"] = "not in ALSA's device hints"
                }
            }
            let playingHere = status?.outputs.first { DevicesCommand.names(device).contains($0.device) }.map { "\(DevicesCommand.playing($0)) as \($0.device)" }
            return Block(
                Output(title: device.title, card: device.card, cardID: device.cardID, device: device.device, kind: device.kind.rawValue,
                       opens: opens, shared: hasShared, excludedBy: exclusion?.pattern, leftAlone: leftAlone,
                       forPlayers: device.pcm("keepalived"), hardware: mixing?.rawValue),
                Selections(pickedBy: pickedBy, notPickedBecause: reasons, playing: playingHere))
        }
    }

    /// The sound server's sinks and cards, asked once (at most 2 s).
    static func askServer() -> SoundServerReachability {
        guard SinkWatcher.mayReachServer() else { return .unreachable("no XDG_RUNTIME_DIR or PULSE_SERVER for this user") }
        let watcher: SinkWatcher
        do { watcher = try SinkWatcher(logger: Logger(label: "keepalived.devices", factory: { _ in SwiftLogNoOpLogHandler() })) } catch {
            return .unreachable("\(error)")
        }
        watcher.start()
        defer { watcher.stop() }
        return watcher.waitForAnswer(timeout: .seconds(2))
    }

    /// The names a card device goes by, for matching a running output to it.
    static func names(_ device: CardDevice) -> Set<String> {
        var names: Set<String> = ["hw:\(device.card),\(device.device)", "plughw:\(device.card),\(device.device)"]
        for prefix in OutputSelection.exclusivePrefixes.union(["dmix"]) { names.insert(device.pcm(prefix)) }
        if device.device == 0 {
            for prefix in ["default", "sysdefault", "dmix", "hw", "plughw"] {
                names.insert("\(prefix):CARD=\(device.cardID)")
                names.insert("\(prefix):\(device.card)")
            }
        }
        return names
    }

    /// A card's alias (its PCMs are named with CARD=), a virtual plug-in, or a PCM of the user's
    /// own configuration.
    static func role(of name: String) -> String {
        let (prefix, card) = OutputSelection.split(name)
        if card != nil || name.contains("CARD=") { return "card" }
        if OutputSelection.virtualDevices.contains(prefix) { return "plug-in" }
        return "configured"
    }

    static func describe(_ listing: Listing) -> String {
        var lines: [String] = []
        lines.append("Sound server: \(listing.soundServer)")
        for sink in listing.sinks {
            lines.append("")
            lines.append("\(sink.description)    (sink \(sink.name)\(sink.isDefault ? ", the default" : ""))")
            lines.append("  kind: \(sink.virtual ? "virtual (plays to no device)" : sink.kind)\(sink.card.map { ", card \($0)" } ?? ""), \(sink.state)")
            lines.append("  keepalived opens: \(sink.opens)")
            lines += sink.selections.lines
        }
        lines.append("")
        if listing.outputs.isEmpty {
            lines.append("no sound card found (none in /proc/asound/cards, or its control device cannot be opened)")
        }
        for output in listing.outputs {
            if lines.last != "" { lines.append("") }
            lines.append("\(output.title)    (card \(output.card) \"\(output.cardID)\", device \(output.device))")
            lines.append("  kind: \(output.kind)\(output.hardware.map { ", its hardware: \($0)" } ?? "")")
            if output.hardware == CardDeviceMixing.iec958Only.rawValue, let opens = output.opens {
                lines.append("  keepalived opens: \(opens) (exclusive: no shared form exists for IEC958-only hardware;")
                lines.append("    a program that opens the card's default, hdmi: or hw: gets \"busy\" while keepalived plays)")
            } else if let opens = output.opens {
                lines.append("  keepalived opens: \(opens)\(output.shared ? " (shared with other programs)" : " (exclusive: other programs cannot play to it meanwhile)")")
            } else {
                lines.append("  keepalived opens: nothing without --exclusive (no shared dmix form)")
            }
            if let leftAlone = output.leftAlone { lines.append("  left alone: \(leftAlone)") }
            if output.hardware == CardDeviceMixing.iec958Only.rawValue {
                lines.append("  for players: \(output.forPlayers) (handed over by keepalived while they play, their samples framed into IEC958)")
            } else {
                lines.append("  for players: \(output.forPlayers) (the hardware itself, handed over by keepalived while they play)")
            }
            lines += output.selections.lines
        }
        if !listing.configured.isEmpty {
            lines.append("")
            lines.append("Outputs of your ALSA configuration:")
            for entry in listing.configured {
                let picked = entry.excludedBy.map { "   [excluded by --exclude '\($0)']" }
                    ?? (entry.pickedBy.isEmpty ? "" : "   [\(entry.pickedBy.joined(separator: ", "))]")
                lines.append("  \(entry.digital ? "digital" : "analog ")  \(entry.name)\(picked)")
                lines.append("           \(entry.description)")
            }
        }
        if let pcms = listing.pcms {
            lines.append("")
            lines.append("Every PCM ALSA lists (card aliases, plug-ins, your configuration's):")
            for pcm in pcms {
                lines.append("  \(pcm.role.padding(to: 10))  \(pcm.name)    \(pcm.description)")
            }
        }
        return lines.joined(separator: "\n")
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
