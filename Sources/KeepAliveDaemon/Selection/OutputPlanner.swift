import KeepAlive

/// What the machine offers now, all read before anything is decided: ALSA's hints, the sound
/// server's view, the cards other programs reserved, and the cards' ids by index.
///
/// ```swift
/// let offer = OutputOffer(hints: ALSADevice.playbackDevices(), server: watcher.reachability)
/// ```
struct OutputOffer: Sendable, Equatable {
    var hints: [ALSADevice]
    var server: SoundServerReachability
    /// Cards another program holds through org.freedesktop.ReserveDevice1, by index: who.
    var reservedCards: [Int: String] = [:]
    /// Cards a sound server owned earlier in this process: while it is gone (restarting, or
    /// stopped by its user) they stay its own.
    var formerServerCards: Set<Int> = []
    /// ALSA card index by card id (`Intel` → 0), to match `dmix:CARD=Intel,…` to a server's
    /// `alsa.card`.
    var cardIndices: [String: Int] = [:]
    /// Who has each card's playback devices open now (``CardHolders``), and this process's uid.
    var holders: [Int: [CardHolder]] = [:]
    var uid: UInt32 = 0
    /// Cards another user's sound server held earlier in this process: its sink may be suspended
    /// now (device closed), and the card is still its own.
    var otherUsersServerCards: [Int: String] = [:]
    /// What dmix can do on the card devices probed (``MixingProbes``), by `CARD,DEV`: a dmix is
    /// never picked where it cannot mix, and an IEC958-only device is kept awake through its
    /// `hdmi:` or `hw:` alone.
    var mixing: [String: CardDeviceMixing] = [:]
}

/// One output a choice picks: its PCM, and the sink it plays to when it is a sink.
struct PickedOutput: Sendable, Equatable {
    var pcm: String
    var sink: ServerSink?
}

/// Decides which outputs an ``OutputChoice`` keeps awake in an ``OutputOffer``: pure, so every
/// rule is tested without a server or a card.
///
/// The rules:
/// - When a sound server answers, its sinks are the outputs: each physical sink the choice asks
///   for, played through a stream of keepalived's own (`ServerSinkPCM`). Virtual sinks are never picked; Bluetooth sinks
///   only with `bluetooth`.
/// - While a server answers, no card is opened by a selection: the cards it owns (any of its
///   sinks or cards names them) are kept awake through its sinks, and a card it does not list
///   yet is one it is about to claim (a USB DAC just plugged in). A card another program
///   reserved is never opened, nor one another user's program has open or another user's sound
///   server held (a system service beside a desktop user's server, whose bus it cannot reach).
/// - While the server has not answered yet, no card is picked: it may own them all.
/// - A card device's dmix is picked only where dmix can mix its hardware's formats; an
///   IEC958-only one (a Raspberry Pi's HDMI) through its `hdmi:` or `hw:`, exclusively
///   (``OutputSelection/pick(from:allowExclusive:excluding:mixing:)``). A card a
///   server owned stays its own while the server is gone (a restart, a crash).
///
/// ```swift
/// let picks = OutputPlanner.pick(OutputChoice(selection: .digital), in: offer)
/// picks.map(\.pcm)   // ["pulse:DEVICE=alsa_output.pci-0000_00_1f.3.hdmi-stereo"]
/// ```
enum OutputPlanner {
    static func pick(_ choice: OutputChoice, in offer: OutputOffer) -> [PickedOutput] {
        var picks: [PickedOutput] = []
        if let selection = choice.selection {
            for pcm in selection.pick(from: offer.hints, allowExclusive: choice.allowExclusive, excluding: choice.exclusions, mixing: offer.mixing,
                                      carrying: choice.carriesPlayers)
            where cardRefusal(pcm, in: offer) == nil {
                picks.append(PickedOutput(pcm: pcm))
            }
        }
        for sink in offer.server.view?.sinks ?? [] where verdict(for: sink, choice: choice).picked {
            picks.append(PickedOutput(pcm: sink.pcm, sink: sink))
        }
        return picks
    }

    /// Why a card's PCM must not be opened now (nil: it may): the server owns the card, another
    /// program reserved it, or the server has not said yet.
    static func cardRefusal(_ pcm: String, in offer: OutputOffer) -> String? {
        guard let card = card(of: pcm, in: offer) else { return nil }
        switch offer.server {
        case .unknown:
            return "waiting for the sound server's answer"
        case .connected(let view) where view.ownedCards.contains(card) || offer.formerServerCards.contains(card):
            return "the sound server (\(view.server)) owns card \(card): its sinks are kept awake instead"
        case .connected(let view):
            // A card the server does not list yet is one it is about to claim (a USB DAC whose
            // node udev just made, before the server's module loads), or one it was told to leave
            // alone: either way not keepalived's to take.
            return "a sound server runs (\(view.server)) and does not list card \(card): left to it; name it with -d to keep it awake"
        case .unreachable where offer.formerServerCards.contains(card):
            return "the sound server that owns card \(card) does not answer now: left to it"
        default:
            break
        }
        if let holder = offer.holders[card]?.first(where: { $0.uid != offer.uid }) {
            return "card \(card) is open by \(holder), another user's program: left to it"
        }
        if let server = offer.otherUsersServerCards[card] {
            return "card \(card) belongs to \(server), another user's sound server: left to it"
        }
        return reservation(pcm, in: offer)
    }

    /// Why a PCM's card is another program's through its reservation (nil: it is not), for a
    /// named output as much as a picked one.
    static func reservation(_ pcm: String, in offer: OutputOffer) -> String? {
        guard let card = card(of: pcm, in: offer), let who = offer.reservedCards[card] else { return nil }
        return "card \(card) is reserved by \(who): left to it until it lets go"
    }

    /// The ALSA card index a PCM name plays to (`dmix:CARD=Intel,DEV=0`, `plughw:CARD=1`), or
    /// nil for a name that names no card.
    static func card(of pcm: String, in offer: OutputOffer) -> Int? {
        guard let colon = pcm.firstIndex(of: ":") else { return nil }
        let parts = pcm[pcm.index(after: colon)...].split(separator: ",")
        // CARD=… anywhere, or the first positional argument (`hw:0,3`).
        guard var value = parts.first(where: { $0.hasPrefix("CARD=") }).map({ $0.dropFirst(5) })
            ?? parts.first.flatMap({ $0.contains("=") ? nil : $0 }) else { return nil }
        if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
        return Int(value) ?? offer.cardIndices[String(value)]
    }

    /// The card device output `pcm` plays to: what alsa-lib said of its open handle at its
    /// last open (`opened`), else what its name says when the name numbers the kernel's device
    /// itself (`hw:`, `plughw:`, `dmix:`: `DEV=3`, `hw:0,3`, device 0 when left out). Nil when
    /// neither tells: other names count their own way (`hdmi:CARD=PCH,DEV=1` is the card's
    /// second HDMI device, not device 1; `default` may be any), and are matched once they open.
    static func hardware(of pcm: String, opened: HardwareDevice?, in offer: OutputOffer) -> HardwareDevice? {
        if let opened { return opened }
        guard let colon = pcm.firstIndex(of: ":"), ["hw", "plughw", "dmix"].contains(pcm[..<colon]),
              let card = card(of: pcm, in: offer) else { return nil }
        let parts = pcm[pcm.index(after: colon)...].split(separator: ",")
        if let named = parts.first(where: { $0.hasPrefix("DEV=") }) { return Int(named.dropFirst(4)).map { HardwareDevice(card: card, device: $0) } }
        let positional = parts.filter { !$0.contains("=") }
        guard positional.count >= 2 else { return HardwareDevice(card: card, device: 0) }
        return Int(positional[1]).map { HardwareDevice(card: card, device: $0) }
    }

    /// Plays each output of `configuration` that a sound server's sink carries through a stream of
    /// keepalived's own into that sink (its ``OutputSettings/serverSink``, the sink's defaults
    /// and rate), rather than through the plug-in its name opens; returns the sinks named so
    /// (not the default sink, which the server itself follows), whose streams the watcher keeps.
    ///
    /// - `view`: the server's view now, nil while none answers.
    /// - `inForce`: the outputs' settings in force, read while no server answers.
    /// - `sinkBuffer`: the buffer a sink's stream gets unless the output gives its own.
    ///
    /// ```swift
    /// var configuration = KeepAliveConfiguration(devices: ["default", "pulse:DEVICE=tv"])
    /// let kept = OutputPlanner.playThroughSinks(&configuration, view: view, inForce: [:], sinkBuffer: .seconds(8))  // ["tv"]
    /// ```
    static func playThroughSinks(
        _ configuration: inout KeepAliveConfiguration, view: SoundServerView?, inForce: [String: OutputSettings], sinkBuffer: Duration?
    ) -> Set<String> {
        var kept: Set<String> = []
        for device in configuration.devices where configuration.outputSettings[device]?.serverSink == nil {
            let follows = ServerDefaultOutput.followsDefaultSink(device)
            // The default sink is followed by the server itself: nothing to move back. (With no
            // sink at all, or no answer yet, OutputScanner.defaultSinkWait held it back.)
            guard let view, let sink = follows ? view.sinks.first(where: { $0.name == view.defaultSink }) : view.sink(forPCM: device) else {
                // A server that went away leaves the output on keepalived's own stream, which
                // fails to open until a server answers, as the plug-in would. Planned as the
                // plug-in during an outage, the output reopened through it, and kept the
                // plug-in's libpulse thread and connection (threaded-ml, a socket, an eventfd,
                // pipes) once the server was back: its settings then change in place, without
                // a reopen. A server that never answered leaves it to the plug-in (`pipewire`
                // without pipewire-pulse plays only through it).
                if follows, view != nil || inForce[device]?.serverSink == ServerDefaultOutput.defaultSink {
                    var settings = configuration.outputSettings[device] ?? OutputSettings()
                    settings.serverSink = ServerDefaultOutput.defaultSink
                    if settings.bufferDuration == nil { settings.bufferDuration = sinkBuffer }
                    configuration.outputSettings[device] = settings
                }
                continue
            }
            if !follows { kept.insert(sink.name) }
            var settings = SinkDefaults.settings(
                for: sink.kind, rate: sink.sampleRate, under: configuration.outputSettings[device], buffer: sinkBuffer, ceiling: configuration.defaults.ceiling)
            // Played through a stream of keepalived's own, not the plug-in `device` names,
            // at the sink's rate: coming back after another program's track, it then moves
            // the sink to no rate of its own.
            settings.serverSink = follows ? ServerDefaultOutput.defaultSink : sink.name
            if settings.deviceFormat == nil { settings.deviceFormat = sink.sampleRate.map { DeviceFormat(rate: $0) } }
            configuration.outputSettings[device] = settings
        }
        return kept
    }

    /// Whether the choice picks `sink`, by which options, and why each other option does not.
    static func verdict(for sink: ServerSink, choice: OutputChoice) -> SinkVerdict {
        var verdict = SinkVerdict()
        let exclusion = choice.exclusions.first { exclusion in
            exclusion.matches(ALSADevice(name: sink.name, description: sink.description))
                || exclusion.matches(ALSADevice(name: sink.pcm, description: sink.description))
        }
        let kind = sink.kind
        for option in SinkVerdict.options {
            let reason: String?
            if sink.isVirtual {
                reason = "a virtual sink (it plays to no device): only by name"
            } else if let exclusion {
                reason = "excluded by --exclude '\(exclusion)'"
            } else {
                switch option {
                case "--bluetooth": reason = kind == .bluetooth ? nil : "not a Bluetooth sink"
                case _ where kind == .bluetooth: reason = "a Bluetooth sink: only with --bluetooth or by name"
                case "--digital": reason = kind.isDigital ? nil : "not a digital output"
                case "--analog": reason = kind.isDigital ? "a digital output" : nil
                default: reason = nil
                }
            }
            if let reason {
                verdict.notPickedBecause[option] = reason
            } else {
                verdict.pickedBy.append(option)
            }
        }
        verdict.picked = verdict.pickedBy.contains { choice.flags.contains($0) }
        return verdict
    }
}

/// Which options pick a sink, and why the others do not.
struct SinkVerdict: Sendable, Equatable {
    static let options = ["--all", "--digital", "--analog", "--bluetooth"]
    var pickedBy: [String] = []
    var notPickedBecause: [String: String] = [:]
    /// Whether the choice it was judged for picks it.
    var picked = false
}
