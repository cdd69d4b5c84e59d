import CALSA

/// What an open PCM is built of, as alsa-lib's own dump names its layers ("Plug PCM: Linear
/// conversion PCM (S16_LE)", "Slave: Hardware PCM card 0 …").
///
/// The ring loop needs a chain whose every layer hands the frames it is given to a kernel ring
/// buffer unchanged in timing: the hardware itself, or per-sample conversions in front of it.
/// Anything that mixes (dmix zero-fills what it played), shares, resamples with state, consumes
/// (a sound server's plug-in, null, file) or is unknown makes the chain stream.
///
/// ```swift
/// let chain = PCMChain(dump: "Plug PCM: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n")
/// chain.canLoopRing   // true
/// ```
struct PCMChain: Equatable {
    /// The layers, outermost first ("Plug PCM", "Hardware PCM", …).
    let layers: [String]
    /// The card device the innermost hardware layer opened ("Hardware PCM card 0 'HDA Intel'
    /// device 3 subdevice 0"): behind dmix, dsnoop and the other direct plug-ins, whose own
    /// `snd_pcm_info` names no card, this is the only place alsa-lib says which device they share.
    let hardware: HardwareDevice?

    /// Layers that pass each sample straight to the next one: a ring filled through them replays
    /// exactly what was written. The IEC958 layer (a Raspberry Pi's `hdmi:`, or plug's conversion
    /// to subframes since alsa-lib 1.2.12) frames each sample where it lies in its 192-frame
    /// channel-status block, counted from the stream's prepare: a ring of whole blocks filled
    /// from a prepare replays as one valid stream (``ringBlockFrames``).
    private static let transparent: [String] = [
        "Plug PCM", "Linear conversion PCM", "Linear Integer <-> Linear Float conversion PCM",
        "Route conversion PCM", "Copy conversion PCM", "Hooks PCM", "Soft volume PCM", iec958Layer,
    ]
    private static let iec958Layer = "IEC958 subframe conversion PCM"

    /// Reads the layers out of `snd_pcm_dump` text by the dump's structure (alsa-lib 1.2.8 to
    /// 1.2.14 alike): each PCM prints its one header line ("Linear conversion PCM (S32_LE)"),
    /// then lines of its own, and then its slave's dump after "Slave: " ("Slave #N: " for each of
    /// multi's). plug prints "Plug PCM: " and its slave's header on the same line; dmix, dshare
    /// and dsnoop print their hardware slave's header on a line of its own. A PCM's own lines are
    /// no layers, though some are unindented: softvol's "Control: PCM Playback Volume",
    /// "min_dB: -51", rate's "Protocol version: 10002".
    init(dump: String) {
        var layers: [String] = []
        var hardware: HardwareDevice?
        var headerNext = true
        for rawLine in dump.split(separator: "\n", omittingEmptySubsequences: true) {
            var line = Substring(rawLine)
            if !headerNext {
                if line.hasPrefix("Slave: ") {
                    line = line.dropFirst("Slave: ".count)
                } else if line.hasPrefix("Slave #"), let colon = line.firstRange(of: ": ") {
                    line = line[colon.upperBound...]
                } else if !line.hasPrefix(Self.hardwareHeader) {
                    continue
                }
            }
            headerNext = false
            while line.hasPrefix("Plug PCM: ") {
                layers.append("Plug PCM")
                line = line.dropFirst("Plug PCM: ".count)
            }
            if let device = Self.hardwareDevice(line) { hardware = device }
            // The layer's kind: its header up to "PCM" ("Rate conversion PCM (48000)" → "Rate
            // conversion PCM"), or all of it for a plug-in's own name without one.
            layers.append(String(line.firstRange(of: "PCM").map { line[..<$0.upperBound] } ?? line))
        }
        self.layers = layers
        self.hardware = hardware
    }

    private static let hardwareHeader = "Hardware PCM card "

    /// The card and device of alsa-lib's hardware layer line, `Hardware PCM card %d '%s' device
    /// %d subdevice %d` (the card's name may hold anything, so the device is read after its
    /// last quote); nil for any other line.
    static func hardwareDevice(_ line: Substring) -> HardwareDevice? {
        let layer = "Hardware PCM card "
        guard let start = line.firstRange(of: layer) else { return nil }
        let rest = line[start.upperBound...]
        guard let card = Int(rest.prefix { $0.isNumber }), let quote = rest.lastIndex(of: "'") else { return nil }
        let tail = rest[rest.index(after: quote)...]
        guard tail.hasPrefix(" device ") else { return nil }
        guard let device = Int(tail.dropFirst(" device ".count).prefix { $0.isNumber }) else { return nil }
        return HardwareDevice(card: card, device: device)
    }

    /// The chain of an open PCM.
    init(pcm: OpaquePointer) {
        var output: OpaquePointer?
        guard snd_output_buffer_open(&output) == 0, let output else {
            self.init(dump: "")
            return
        }
        defer { snd_output_close(output) }
        snd_pcm_dump(pcm, output)
        var text: UnsafeMutablePointer<CChar>?
        let length = snd_output_buffer_string(output, &text)
        guard let text, length > 0 else {
            self.init(dump: "")
            return
        }
        self.init(dump: String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self))
    }

    /// Whether the chain ends in a card's own PCM (hw, plughw, dmix, hdmi…): no sound server is
    /// behind it, so a server restarting cannot have broken its stream.
    var endsInHardware: Bool { layers.last?.hasPrefix("Hardware PCM") == true }

    /// Whether a carried player's frames written here reach the card exactly as written and in
    /// the format the player asked for: the card's own PCM, under nothing but hooks (which set
    /// controls at open, HDA's `hdmi:`). Not a plug (the formats it offers are conversions,
    /// into which a player's switch of format would land), softvol (the user's volume, which a
    /// player on `keepalived:` does not go through on the hardware), dmix (shared), nor alsa-lib's
    /// IEC958 layer (its `forward` moves backwards, alsa-lib 1.2.8 to 1.2.16): on an IEC958-only
    /// card keepalived plays `hw:` and frames its signal and the player's subframes match it.
    var carriesPlayersUnchanged: Bool {
        guard layers.last?.hasPrefix("Hardware PCM") == true else { return false }
        return layers.dropLast().allSatisfy { $0 == "Hooks PCM" }
    }

    /// The frames a looped ring must hold a whole number of, for the chain's sake: a
    /// channel-status block's 192 behind an IEC958 layer, else 1.
    var ringBlockFrames: Int {
        layers.contains { $0.hasPrefix(Self.iec958Layer) } ? IEC958Framer.blockFrames : 1
    }

    /// Whether the chain ends in a hardware ring that replays what it holds for ever once the
    /// stream's stop threshold is the boundary.
    var canLoopRing: Bool {
        guard layers.last?.hasPrefix("Hardware PCM") == true else { return false }
        return layers.dropLast().allSatisfy { layer in Self.transparent.contains { layer.hasPrefix($0) } }
    }
}
