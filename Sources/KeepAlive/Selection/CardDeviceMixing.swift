import CALSA
import Glibc

/// Whether ALSA's `dmix` can share a card device, from the formats its hardware takes: dmix mixes
/// linear samples (S16, S24, S24_3LE, S32, U8) and nothing else. A Raspberry Pi's HDMI
/// (vc4-hdmi) takes only IEC958 subframes, which alsa-lib frames in software (`hdmi:`), and yet
/// Debian's alsa.conf lists a `dmix:` for it as for every card; that dmix never plays.
///
/// ```swift
/// CardDeviceMixing.probe(card: "vc4hdmi0", device: 0)   // .iec958Only
/// CardDeviceMixing.probe(card: "PCH", device: 0)        // .mixable
/// ```
package enum CardDeviceMixing: String, Sendable, Equatable {
    /// Its hardware takes a format dmix mixes: the card's `dmix:` shares it.
    case mixable
    /// Its hardware takes IEC958 subframes and no linear format: no shared form exists; it is
    /// kept awake through the card's `hdmi:` (or `hw:`, framed by keepalived's engine), alone.
    case iec958Only = "IEC958 only"
    /// Neither (a float-only or DSD-only device): dmix cannot mix it, and there is nothing
    /// keepalived could frame for it.
    case unmixable

    /// The formats dmix mixes (alsa-lib's pcm_dmix.c).
    static let mixedFormats: [snd_pcm_format_t] = [
        SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_S16_BE, SND_PCM_FORMAT_S32_LE, SND_PCM_FORMAT_S32_BE,
        SND_PCM_FORMAT_S24_LE, SND_PCM_FORMAT_S24_3LE, SND_PCM_FORMAT_U8,
    ]

    /// The verdict from what a device's hardware takes (`takes(format)`): pure, so every rule is
    /// tested without a card.
    static func judge(takes: (snd_pcm_format_t) -> Bool) -> CardDeviceMixing {
        if mixedFormats.contains(where: takes) { return .mixable }
        if takes(SND_PCM_FORMAT_IEC958_SUBFRAME_LE) || takes(SND_PCM_FORMAT_IEC958_SUBFRAME_BE) { return .iec958Only }
        return .unmixable
    }

    /// Opens `hw:CARD=card,DEV=device` for playback without waiting (a busy device is not waited
    /// for), reads its configuration space and closes it; nothing is set up or played. Nil when it
    /// cannot be opened now (busy: a program, keepalived's own dmix included, has it; gone; no
    /// permission): the caller asks again later rather than guess.
    ///
    /// `configurationFile`: read this ALSA configuration file alone instead of the process's
    /// (the tests' stand-in for a card's hw PCM, without touching the process's configuration).
    package static func probe(card: String, device: Int, configurationFile: String? = nil) -> CardDeviceMixing? {
        let name = "hw:CARD=\(card),DEV=\(device)"
        var pcm: OpaquePointer?
        if let configurationFile {
            var tree: OpaquePointer?
            var input: OpaquePointer?
            guard snd_config_top(&tree) == 0, let tree else { return nil }
            defer { snd_config_delete(tree) }
            guard snd_input_stdio_open(&input, configurationFile, "r") == 0, let input else { return nil }
            let loaded = snd_config_load(tree, input)
            snd_input_close(input)
            guard loaded == 0, snd_pcm_open_lconf(&pcm, name, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK, tree) == 0 else { return nil }
        } else {
            guard snd_pcm_open(&pcm, name, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK) == 0 else { return nil }
        }
        guard let pcm else { return nil }
        defer { snd_pcm_close(pcm) }
        return judge(pcm)
    }

    private static func judge(_ pcm: OpaquePointer) -> CardDeviceMixing? {
        var params: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&params) == 0, let params else { return nil }
        defer { snd_pcm_hw_params_free(params) }
        guard snd_pcm_hw_params_any(pcm, params) >= 0 else { return nil }
        return judge { snd_pcm_hw_params_test_format(pcm, params, $0) == 0 }
    }

    /// Whether ALSA's configuration frames `alias` (the card's `hdmi:CARD=…,DEV=…`) into IEC958
    /// subframes in software: `type iec958` over a slave in IEC958_SUBFRAME_LE, as
    /// vc4-hdmi.conf's is. Read without opening anything, for a device whose hardware cannot be
    /// opened to be asked: vc4-hdmi refuses opens while nothing is plugged in (or the display is in
    /// DVI mode), and the card's own configuration still says what its hardware takes.
    package static func framedByConfiguration(_ alias: String, configurationFile: String? = nil) -> Bool {
        PCMDefinition.read(alias, configurationFile: configurationFile) { definition in
            string(in: definition, at: "type") == "iec958"
                && ["IEC958_SUBFRAME_LE", "IEC958_SUBFRAME_BE"].contains(string(in: definition, at: "slave.format"))
        } ?? false
    }

    private static func string(in tree: OpaquePointer, at key: String) -> String? {
        var node: OpaquePointer?
        var text: UnsafePointer<CChar>?
        guard snd_config_search(tree, key, &node) == 0, let node, snd_config_get_string(node, &text) == 0, let text else { return nil }
        return String(cString: text)
    }
}
