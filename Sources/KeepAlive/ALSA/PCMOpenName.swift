import CALSA

/// The name keepalived hands alsa-lib for an output's PCM name: the same name, except that an
/// `hdmi:` name that sets no `AES3` of its own gets `AES3=0x01` (IEC958_AES3_CON_FS_NOTID:
/// sampling frequency not indicated).
///
/// alsa-lib's pcm/hdmi.conf defaults `hdmi:`'s AES3 to 0x02 (48 kHz) whatever the stream's
/// rate, and hands it to the card's own `hdmi:`: on a Raspberry Pi (cards/vc4-hdmi.conf) as the
/// `iec958` layer's channel status, which pcm_iec958.c fills in from the stream only when the
/// rate is "not indicated" (1.2.8 and 1.2.14 alike), and as the IEC958 Playback Default control,
/// which recent kernels' hdmi-codec fills in the same way. keepalived's 44.1 kHz clip, or a player's
/// 96 kHz format taken back, would reach the receiver labelled 48 kHz. vc4-hdmi.conf's own
/// `default` asks for 0x01 for that reason. A card whose hardware frames the stream itself
/// (HDA) takes its rate from the stream and ignores the byte.
///
/// ```swift
/// PCMOpenName.candidate("hdmi:CARD=vc4hdmi0")            // "hdmi:CARD=vc4hdmi0,AES3=0x01"
/// PCMOpenName.candidate("hdmi:CARD=PCH,DEV=0,AES3=2")    // as it is: the user's own
/// PCMOpenName.candidate("hw:CARD=vc4hdmi0,DEV=0")        // as it is
/// ```
enum PCMOpenName {
    /// `hdmi:`'s arguments, in the order a name gives them without `KEY=` (pcm/hdmi.conf's
    /// `@args`): a sixth positional argument is AES3.
    static let hdmiArguments = ["CARD", "DEV", "AES0", "AES1", "AES2", "AES3"]
    static let rateNotIndicated = "AES3=0x01"

    /// The name to open for `name`: ``candidate(_:)`` where ALSA's configuration (the process's,
    /// or `configurationFile` alone) resolves it, else `name` as it is (a `pcm.hdmi` of the
    /// user's own may take no AES3; a card not there yet fails either way, and is asked again
    /// at the next open).
    static func forOpening(_ name: String, configurationFile: String? = nil) -> String {
        let opened = candidate(name)
        guard opened != name, resolves(opened, configurationFile: configurationFile) else { return name }
        return opened
    }

    /// `name` with `AES3=0x01` added where it is an `hdmi:` name that sets no AES3 of its own.
    static func candidate(_ name: String) -> String {
        guard prefix(of: name) == "hdmi" else { return name }
        guard let colon = name.firstIndex(of: ":") else { return name + ":" + rateNotIndicated }
        let arguments = name[name.index(after: colon)...]
        let trimmed = arguments.drop { $0 == " " || $0 == "\t" }
        if trimmed.isEmpty { return "hdmi:" + rateNotIndicated }
        // `hdmi:{ … }` is configuration syntax, not a list: left as the user wrote it.
        if trimmed.first == "{" { return name }
        guard let list = split(arguments) else { return name }
        for (position, argument) in list.enumerated() {
            if let equals = argument.firstIndex(of: "=") {
                var key = argument[..<equals]
                while key.first == " " || key.first == "\t" { key.removeFirst() }
                while key.last == " " || key.last == "\t" { key.removeLast() }
                if key == "AES3" { return name }
            } else if position >= hdmiArguments.count - 1 {
                return name  // AES3 (or more) given by position
            }
        }
        return name + "," + rateNotIndicated
    }

    /// The PCM's id: the name before its arguments.
    static func prefix(of name: String) -> Substring {
        name.prefix { $0 != ":" }
    }

    /// The arguments of a name's list, split at commas outside quotes (alsa-lib's parse_args);
    /// nil for an unterminated quote, which alsa-lib refuses anyway.
    private static func split(_ text: Substring) -> [Substring]? {
        var parts: [Substring] = []
        var start = text.startIndex
        var quote: Character?
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if let open = quote {
                if character == "\\" {
                    index = text.index(after: index)
                    if index == text.endIndex { return nil }
                } else if character == open {
                    quote = nil
                }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == "," {
                parts.append(text[start..<index])
                start = text.index(after: index)
            }
            index = text.index(after: index)
        }
        if quote != nil { return nil }
        parts.append(text[start...])
        return parts
    }

    /// Whether the configuration resolves `name` to a PCM definition (alsa-lib's
    /// snd_config_search_definition, as its open does: aliases followed, the cards'
    /// configuration loaded, the arguments checked against the definition's `@args`); nothing is
    /// opened. alsa-lib's complaint about an unknown argument goes to its error handler, which
    /// the daemon silences.
    private static func resolves(_ name: String, configurationFile: String?) -> Bool {
        PCMDefinition.read(name, configurationFile: configurationFile) { _ in true } ?? false
    }
}
