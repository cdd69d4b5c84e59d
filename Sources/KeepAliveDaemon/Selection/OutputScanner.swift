import CALSA
import KeepAlive
import Logging
import Glibc

/// Keeps the running outputs equal to what the options ask for: the named outputs, plus what the
/// ``OutputChoice`` (`--all`, `--digital`, `--analog`, `--bluetooth`) picks from the cards and
/// the sound server's sinks now. It rescans when a card or ALSA's configuration changes
/// (``HintWatcher``) and when the server's sinks or cards change (``SinkWatcher``), and applies
/// the difference through ``KeepAliveManager/reconfigure(_:)``: the other outputs play on
/// untouched.
///
/// The one place where the options' configuration becomes the manager's: at start, on reload and
/// on every rescan, ``planned(_:choice:)`` adds the picks and each sink's own buffer and
/// Bluetooth signal (``SinkDefaults``, ``BluetoothDefaults``) to the same base. Cards another program reserved (``DeviceReservations``) are left to it,
/// the named ones too, until it lets go.
///
/// ```swift
/// let scanner = OutputScanner(logger: logger)
/// scanner.use(base, choice: OutputChoice(selection: .digital))
/// let configuration = scanner.planned()     // the named outputs and the digital ones found now
/// ```
/// Concurrency: any thread may read it; rescans and reloads run on the daemon's main thread, one
/// at a time (a rescan reads the card list and reconfiguring joins playback threads; a reload
/// between a rescan's plan and its `reconfigure` would be overwritten).
final class OutputScanner: Sendable {
    let logger: Logger
    private let state: Locked<State>
    /// Set once the manager exists (it is made from the first plan).
    private let manager = Locked<KeepAliveManager?>(nil)

    private struct State: Sendable {
        var base = KeepAliveConfiguration(devices: [])
        var choice = OutputChoice()
        var watcher: SinkWatcher?
        /// Why no server is watched, when none is.
        var unwatched = "no selection"
        /// Cards another user's sound server was seen holding.
        var otherUsersServerCards: [Int: String] = [:]
        /// ALSA's device hints as last read, and the ``cardsOrConfigurationChanged()`` count they
        /// were read at. They change only with the cards and ALSA's configuration: a hint scan
        /// reads every configuration file and opens every card's control node, too slow to
        /// repeat for each `status` or sink event (seconds on an emulated CPU, where `start`
        /// gave up waiting for a status and a replugged DAC's sink waited for a scan of cards
        /// the server owns anyway).
        var hints: (list: [ALSADevice], at: Int)?
        var changes = 0
        /// The count at which ALSA's configuration was last read again.
        var configurationReloadedAt = 0
        /// The format each device's last player left it in (``PlayerLoans``): keepalived asks
        /// for it there.
        var playerFormats: [HardwareDevice: DeviceFormat] = [:]
        /// Card index by ALSA card id, as last found (``cardIndices(naming:)``).
        var cardIndices: [String: Int] = [:]
    }

    /// How long the first plan waits for the sound server's first answer: until it answers, no
    /// card is picked (it may own them all).
    static let firstAnswer: Duration = .seconds(2)

    /// The session bus's device reservations, when there is a session bus.
    let reservations: DeviceReservations?

    /// What dmix can do on each card device, probed once each.
    let mixingProbes = MixingProbes()

    init(logger: Logger, reservations: DeviceReservations? = nil) {
        self.logger = logger
        self.reservations = reservations
        state = Locked(State())
    }

    func attach(_ manager: KeepAliveManager) { self.manager.withLock { $0 = manager } }

    /// The choice in force.
    var choice: OutputChoice { state.withLock { $0.choice } }

    /// The options' configuration in force, without the picks.
    var base: KeepAliveConfiguration { state.withLock { $0.base } }

    /// What the sound server showed last (`.unreachable` when none is watched).
    var server: SoundServerReachability {
        let (watcher, why) = state.withLock { ($0.watcher, $0.unwatched) }
        return watcher?.reachability ?? .unreachable(why)
    }

    /// The sink watcher's doorbell, -1 without one: the main loop polls it.
    var serverDescriptor: Int32 { state.withLock { $0.watcher?.doorbell.descriptor } ?? -1 }

    /// Cards a server owned since the daemon started.
    var formerServerCards: Set<Int> { state.withLock { $0.watcher }?.formerServerCards ?? [] }

    /// What the machine offers now.
    func offer(_ hints: [ALSADevice]) -> OutputOffer {
        let holders = CardHolders.scan()
        let uid = getuid()
        let otherServers = state.withLock { state in
            for (card, list) in holders {
                if let server = list.first(where: { $0.uid != uid && $0.isSoundServer }) {
                    state.otherUsersServerCards[card] = server.description
                }
            }
            return state.otherUsersServerCards
        }
        var offer = OutputOffer(hints: hints, server: server, reservedCards: reservations?.reservedByOthers ?? [:],
                                formerServerCards: formerServerCards, cardIndices: Self.cardIndices(hints),
                                holders: holders, uid: uid, otherUsersServerCards: otherServers)
        // Only when a selection reads it, and never on a card left to someone else: a probe
        // opens the hardware for a moment.
        if state.withLock({ $0.choice.selection }) != nil {
            offer.mixing = mixingProbes.mixing(for: hints) { OutputPlanner.cardRefusal($0, in: offer) == nil }
        }
        return offer
    }

    /// Drains the sink watcher's doorbell after its descriptor polled readable.
    func acknowledgeServer() { state.withLock { $0.watcher }?.doorbell.drain() }

    /// Takes the options' configuration and choice (at start, and once a reload is applied);
    /// starts following the sound server when the choice first needs it, and waits for its
    /// first answer (at most ``firstAnswer``).
    func use(_ base: KeepAliveConfiguration, choice: OutputChoice) {
        let follows = state.withLock { state in
            // A reload may follow an edited configuration: read it all again.
            state.changes += 1
            state.base = base
            state.choice = choice
            // A selection follows the server; so does a named output that plays to it, which
            // then gets a stream of keepalived's own instead of ALSA's plug-in.
            guard !choice.isEmpty || base.devices.contains(where: Self.playsToServer), state.watcher == nil else { return false }
            guard SinkWatcher.mayReachServer() else {
                state.unwatched = "no sound server for this user (no XDG_RUNTIME_DIR or PULSE_SERVER)"
                return false
            }
            return true
        }
        guard follows else { return }
        // Made outside the lock: it loads libpulse and joins the process's connection. Only the
        // main loop calls `use`, so no other watcher can be made meanwhile.
        let started: SinkWatcher
        do {
            started = try SinkWatcher(logger: logger)
        } catch {
            state.withLock { $0.unwatched = "\(error)" }
            logger.debug("not following a sound server", metadata: ["error": "\(error)"])
            return
        }
        state.withLock { $0.watcher = started }
        started.start()
        _ = started.waitForAnswer(timeout: Self.firstAnswer)
    }

    /// Says that the cards or ALSA's configuration changed (the ``HintWatcher`` saw it): the
    /// next plan reads the hints and the configuration again.
    func cardsOrConfigurationChanged() { state.withLock { $0.changes += 1 } }

    /// The hints as last read, unless the cards or the configuration changed since.
    private func currentHints() -> [ALSADevice] {
        let (cached, changes) = state.withLock { ($0.hints, $0.changes) }
        if let cached, cached.at == changes { return cached.list }
        let hints = ALSADevice.playbackDevices()
        state.withLock { $0.hints = (hints, changes) }
        return hints
    }

    /// The format the outputs on `device` ask for since a player left it there; nil for their own.
    func playerFormat(on device: HardwareDevice) -> DeviceFormat? {
        state.withLock { $0.playerFormats[device] }
    }

    /// Asks for `format` on `device` from the next plan on: the last format a player set there
    /// (``PlayerLoans``), so the outputs on it keep the device running as the player left it.
    /// Returns whether it is new (the outputs' settings then need a rescan to carry it).
    @discardableResult
    func askFor(_ format: DeviceFormat, on device: HardwareDevice) -> Bool {
        state.withLock { state in
            defer { state.playerFormats[device] = format }
            return state.playerFormats[device] != format
        }
    }

    /// The outputs playing on `device` now, or held closed there, by the card device their
    /// handle played to at its last open (``OutputPlanner/hardware(of:opened:in:)``).
    func outputs(on device: HardwareDevice) -> [String] {
        guard let manager = manager.withLock({ $0 }) else { return [] }
        let outputs = manager.outputs
        let offer = OutputOffer(hints: [], server: .unknown, cardIndices: cardIndices(naming: outputs.map(\.device)))
        return outputs.filter { OutputPlanner.hardware(of: $0.device, opened: $0.hardware, in: offer) == device }.map(\.device)
    }

    /// Whether a named output plays to a sound server's sink: `pulse:DEVICE=…`, or the
    /// server's default sink (`pulse`, `pipewire`, a desktop's `default`).
    static func playsToServer(_ pcm: String) -> Bool {
        ServerSink.sinkName(fromPCM: pcm) != nil || ServerDefaultOutput.followsDefaultSink(pcm)
    }

    /// Asks the sink watcher to try the server again now (a program just took a card: a server
    /// may have started).
    func retryServerNow() { state.withLock { $0.watcher }?.retryNow() }

    /// Stops following the server.
    func stop() {
        state.withLock { $0.watcher }?.stop()
    }

    /// The base with the choice's picks found now, and a Bluetooth sink's own settings.
    func planned() -> KeepAliveConfiguration {
        let (base, choice) = state.withLock { ($0.base, $0.choice) }
        return planned(base, choice: choice)
    }

    /// `base` with what `choice` picks now.
    func planned(_ base: KeepAliveConfiguration, choice: OutputChoice) -> KeepAliveConfiguration {
        var configuration = base
        // One reading of the server for the picks and the Bluetooth settings.
        var server = server
        let reserved = reservations?.reservedByOthers ?? [:]
        if !choice.isEmpty || !reserved.isEmpty {
            let offer = offer(currentHints())
            server = offer.server
            // A named output too: another program is entitled to its card until it lets go.
            configuration.devices.removeAll { OutputPlanner.reservation($0, in: offer) != nil }
            for pick in OutputPlanner.pick(choice, in: offer) where !configuration.devices.contains(pick.pcm) {
                configuration.devices.append(pick.pcm)
            }
        }
        configuration.devices.removeAll { Self.defaultSinkWait($0, server: server) != nil }
        withPlayerFormats(&configuration)
        let view = server.view
        // While no server answers, what the outputs in force play through.
        let inForce = view == nil ? manager.withLock({ $0 })?.configuration.outputSettings ?? [:] : [:]
        let kept = OutputPlanner.playThroughSinks(&configuration, view: view, inForce: inForce, sinkBuffer: choice.sinkBuffer)
        if view != nil { state.withLock { $0.watcher }?.keep(kept) }
        return configuration
    }

    /// Why `pcm` waits rather than opens now (nil: it opens): an output on the sound server's
    /// default sink (`default` on a desktop, `pulse`, `pipewire`) has nowhere to play until the
    /// server has answered and has a sink. That is how a session starts, not a fault: the
    /// socket-activated server answers seconds after the login, and WirePlumber makes the
    /// card's sink seconds after that. A stream made meanwhile fails (WirePlumber 0.4 tells a
    /// stream it finds no sink for "no node available", which the pulse server passes on as
    /// EIO) or sits unlinked until the stall check gives up on it: each was a warning and a
    /// recovery (two logins of three on a box; every login in Tests/VM/scenarios/
    /// 72-desktop-login.sh). The first listing, and the first sink, change what the
    /// watcher's doorbell rings for (``SinkWatcher/selectionSees(_:)``), so a rescan opens the
    /// output then. An unreachable server leaves the output as named (ALSA's plug-in, which
    /// fails and retries as any device does).
    static func defaultSinkWait(_ pcm: String, server: SoundServerReachability,
                                follows: (String) -> Bool = { ServerDefaultOutput.followsDefaultSink($0) }) -> String? {
        switch server {
        case .unreachable: return nil
        case .unknown: return follows(pcm) ? "the sound server has not answered yet: plays once it does" : nil
        case .connected(let view):
            guard view.sinks.isEmpty, follows(pcm) else { return nil }
            return "\(view.server) has no sink yet: plays on its default sink once it has one"
        }
    }

    /// The outputs the choice's selection would pick from the cards but leaves alone now, and
    /// the named ones that wait for the server's sink, with why (for `status`).
    func withheld() -> [String: String] {
        let (base, choice) = state.withLock { ($0.base, $0.choice) }
        var withheld: [String: String] = [:]
        let server = server
        for pcm in base.devices {
            if let why = Self.defaultSinkWait(pcm, server: server) { withheld[pcm] = why }
        }
        let reserved = reservations?.reservedByOthers ?? [:]
        guard choice.selection != nil || !reserved.isEmpty else { return withheld }
        let hints = currentHints()
        let offer = offer(hints)
        for pcm in base.devices {
            if let why = OutputPlanner.reservation(pcm, in: offer) { withheld[pcm] = why }
        }
        for pcm in choice.selection?.pick(from: hints, allowExclusive: choice.allowExclusive, excluding: choice.exclusions, mixing: offer.mixing,
                                          carrying: choice.carriesPlayers) ?? [] {
            if let why = OutputPlanner.cardRefusal(pcm, in: offer) { withheld[pcm] = why }
        }
        return withheld
    }

    /// The cards `devices` open themselves (card → PCM), which keepalived reserves at the lowest
    /// priority; a sink or a name without a card is none.
    func cardsOpened(by devices: [String]) -> [Int: String] {
        // Only a name with arguments names a card (`hw:0`, `dmix:CARD=Intel,DEV=0`).
        let naming = devices.filter { $0.contains(":") && !$0.hasPrefix("pulse") }
        guard !naming.isEmpty else { return [:] }
        let offer = OutputOffer(hints: [], server: .unknown,
                                cardIndices: cardIndices(naming: naming))
        var cards: [Int: String] = [:]
        for pcm in naming {
            if let card = OutputPlanner.card(of: pcm, in: offer), cards[card] == nil { cards[card] = pcm }
        }
        return cards
    }

    /// Asks each output of `configuration` for the format the last player left its card device
    /// in (``askFor(_:on:)``).
    private func withPlayerFormats(_ configuration: inout KeepAliveConfiguration) {
        let formats = state.withLock { $0.playerFormats }
        guard !formats.isEmpty else { return }
        let offer = OutputOffer(hints: [], server: .unknown, cardIndices: cardIndices(naming: configuration.devices))
        let opened = openedHardware()
        for pcm in configuration.devices {
            guard let device = OutputPlanner.hardware(of: pcm, opened: opened[pcm], in: offer), let format = formats[device] else { continue }
            configuration.outputSettings[pcm, default: OutputSettings()].deviceFormat = format
        }
    }

    /// Applies the players' formats to the outputs in force, and nothing else: a take-back's
    /// outputs open in their player's format without a whole plan (which would read every card
    /// and ALSA's configuration again first, hundreds of ms on a slow CPU, while the device
    /// sits closed). The next plan carries the same formats.
    func applyPlayerFormats() {
        guard let manager = manager.withLock({ $0 }) else { return }
        let current = manager.configuration
        var next = current
        withPlayerFormats(&next)
        guard next.outputSettings != current.outputSettings else { return }
        do {
            let outcome = try manager.reconfigure(next)
            logger.info("outputs changed", metadata: ["cause": "a player's format", "outcome": "\(outcome)"])
        } catch {
            logger.error("cannot apply a player's format", metadata: ["error": "\(error)"])
        }
    }

    /// The card device each output's handle played to at its last open, by output.
    private func openedHardware() -> [String: HardwareDevice] {
        guard let manager = manager.withLock({ $0 }) else { return [:] }
        var opened: [String: HardwareDevice] = [:]
        for output in manager.outputs { opened[output.device] = output.hardware }
        return opened
    }

    /// Rescans and applies what changed, on the main loop (a reload between this plan and its
    /// `reconfigure` would be overwritten); true when the outputs changed.
    @discardableResult
    func rescan(on mainLoop: ThreadOwner) -> Bool {
        mainLoop.preconditionOwned("OutputScanner.rescan")
        guard let manager = manager.withLock({ $0 }) else { return false }
        let next = planned()
        let current = manager.configuration
        guard next.devices != current.devices || next.outputSettings != current.outputSettings else { return false }
        // Reservations first: a card is let go before it closes (a server that waits for the
        // close then finds it free) and reserved before it opens.
        reservations?.hold(cardsOpened(by: next.devices), on: mainLoop)
        // New PCMs may come from an edited configuration file, which opens would not see; a
        // sink that came or went changed none.
        let reload = state.withLock { state in
            defer { state.configurationReloadedAt = state.changes }
            return state.configurationReloadedAt != state.changes
        }
        if reload { ALSADevice.reloadConfiguration() }
        let closing = Set(cardsOpened(by: current.devices).keys).subtracting(cardsOpened(by: next.devices).keys)
        do {
            let outcome = try manager.reconfigure(next)
            logger.info("outputs changed", metadata: ["choice": "\(choice.flags.joined(separator: " "))", "outcome": "\(outcome)"])
            for card in closing.sorted() { Self.announceFree(card: card) }
            return true
        } catch {
            logger.error("cannot apply the new outputs", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Tells a sound server waiting for `card` that keepalived closed it: the control node's
    /// timestamps are touched (IN_ATTRIB), once the close has returned.
    ///
    /// Why: PulseAudio's module-udev-detect does not load a card whose PCMs are open, and looks
    /// again when one of its PCM nodes is closed (IN_CLOSE_WRITE). The kernel queues that event
    /// before the driver's release has run, so the look may still find the card busy, and then
    /// it waits for good (seen in the VM: PulseAudio started while keepalived played the cards
    /// came up with no card in some runs). It also looks again on IN_ATTRIB of the control node
    /// (an ACL change), which here comes after the card is really free. Needs write access to
    /// the node, which a user who can play to it has; nothing else changes.
    static func announceFree(card: Int) {
        _ = utimensat(AT_FDCWD, "/dev/snd/controlC\(card)", nil, 0)
    }

    /// Card index by ALSA card id, for the cards the hints name.
    static func cardIndices(_ hints: [ALSADevice]) -> [String: Int] {
        var indices: [String: Int] = [:]
        for id in cardIDs(hints.map(\.name)) {
            let index = snd_card_get_index(id)
            if index >= 0 { indices[id] = Int(index) }
        }
        return indices
    }

    /// ``cardIndices(_:)`` for the outputs `names`, from the ids found before where the card
    /// still has that index. Why: `snd_card_get_index` opens each card's control node twice
    /// until it finds the id, and a player's release looks the card up three times before it
    /// can close anything (a large part of the release on an emulated CPU); reading the card's
    /// `/proc/asound/cardN/id` again is one small read, and a card replugged at another index
    /// fails it and is looked up anew.
    func cardIndices(naming names: [String], proc: String = "/proc",
                     lookUp: (String) -> Int32 = { snd_card_get_index($0) }) -> [String: Int] {
        let known = state.withLock { $0.cardIndices }
        var indices: [String: Int] = [:]
        for id in Self.cardIDs(names) {
            if let index = known[id], readSmallFile("\(proc)/asound/card\(index)/id")?.split(separator: "\n").first.map(String.init) == id {
                indices[id] = index
                continue
            }
            let index = lookUp(id)
            if index >= 0 { indices[id] = Int(index) }
        }
        state.withLock { state in
            for id in Self.cardIDs(names) { state.cardIndices[id] = indices[id] }
        }
        return indices
    }

    /// The ALSA card ids (not indices) the PCM names `names` name, each once.
    private static func cardIDs(_ names: [String]) -> [String] {
        var ids: [String] = []
        for name in names {
            let (_, card) = OutputSelection.split(name)
            guard let id = card?.split(separator: ",").first.map(String.init), !ids.contains(id) else { continue }
            ids.append(id)
        }
        return ids
    }
}
