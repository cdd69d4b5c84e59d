import KeepAlive

/// What dmix can do on each card device the hints list, probed once per card device
/// (``CardDeviceMixing/probe(card:device:configurationFile:)``): the one piece of I/O behind the
/// planner's mixing rules.
///
/// Why once: a probe opens the hardware for a moment, which a player opening it at that instant
/// would find busy; what a card's hardware takes does not change while it is plugged in. Cached by
/// card id and device (what the hints name); a replugged card comes back with the same id and
/// the same hardware. A device that cannot be opened now (busy: another program, keepalived's own
/// dmix, a sound server; or refused: vc4-hdmi with nothing plugged in) is not cached: it is asked
/// again at the next plan, and meanwhile its card's own configuration may tell
/// (``CardDeviceMixing/framedByConfiguration(_:configurationFile:)``: `hdmi:` framed in software).
///
/// ```swift
/// let mixing = probes.mixing(for: hints) { pcm in OutputPlanner.cardRefusal(pcm, in: offer) == nil }
/// // ["vc4hdmi0,0": .iec958Only, "Headphones,0": .mixable]
/// ```
final class MixingProbes: Sendable {
    private let cache = Locked<[String: CardDeviceMixing]>([:])
    private let probe: @Sendable (String, Int) -> CardDeviceMixing?
    private let framed: @Sendable (String) -> Bool

    init(probe: @escaping @Sendable (String, Int) -> CardDeviceMixing? = { CardDeviceMixing.probe(card: $0, device: $1) },
         framed: @escaping @Sendable (String) -> Bool = { CardDeviceMixing.framedByConfiguration($0) }) {
        self.probe = probe
        self.framed = framed
    }

    /// The verdict for each card device with a `dmix:` or `hw:` hint whose dmix name `mayOpen`
    /// allows (a card a sound server owns or another program reserved is not touched); a device
    /// that neither its hardware nor its configuration tells about is left out (taken as
    /// mixable, as the hints say).
    func mixing(for hints: [ALSADevice], mayOpen: (String) -> Bool) -> [String: CardDeviceMixing] {
        var verdicts: [String: CardDeviceMixing] = [:]
        for key in Self.cardDevices(hints) {
            let parts = key.split(separator: ",", maxSplits: 1).map(String.init)
            guard parts.count == 2, let device = Int(parts[1]), mayOpen("dmix:CARD=\(parts[0]),DEV=\(device)") else { continue }
            if let known = cache.withLock({ $0[key] }) {
                verdicts[key] = known
            } else if let found = probe(parts[0], device) {
                cache.withLock { $0[key] = found }
                verdicts[key] = found
            } else {
                let alias = OutputSelection.iec958Form(key, in: hints)
                if alias.hasPrefix("hdmi:"), framed(alias) { verdicts[key] = .iec958Only }
            }
        }
        return verdicts
    }

    /// The `CARD,DEV` keys of the card devices the hints list as `dmix:` or `hw:`, in hint order.
    static func cardDevices(_ hints: [ALSADevice]) -> [String] {
        var keys: [String] = []
        for hint in hints {
            let (prefix, key) = OutputSelection.split(hint.name)
            if let key, prefix == "dmix" || prefix == "hw", !keys.contains(key) { keys.append(key) }
        }
        return keys
    }
}
