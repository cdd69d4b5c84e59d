import CALSA

/// The device names that play to the sound server's default sink through ALSA's plug-ins:
/// `pulse` and `pipewire` themselves, and `default` where ALSA's configuration makes it one of
/// them (a desktop's: Debian's pulse hook while PulseAudio or pipewire-pulse runs, or
/// pipewire-alsa's `99-pipewire-default.conf`). While a server answers, keepalived plays them
/// through a stream of its own that follows the default sink (``defaultSink``), as the
/// plug-in's stream does, at the cost of a sink output rather than the plug-in's.
///
/// ```swift
/// ServerDefaultOutput.followsDefaultSink("default")   // true on a desktop, false on a box (dmix)
/// ```
enum ServerDefaultOutput {
    /// PulseAudio's name for the default sink, which ``KeepAlive/OutputSettings/serverSink``
    /// takes to follow it.
    static let defaultSink = "@DEFAULT_SINK@"
    /// The ALSA plug-in types that end at a sound server's default sink.
    static let serverTypes: Set<String> = ["pulse", "pipewire"]

    /// Whether `pcm` plays to the server's default sink; `type` reads the ALSA configuration's
    /// plug-in type of a PCM name.
    static func followsDefaultSink(_ pcm: String, type: (String) -> String? = alsaType(of:)) -> Bool {
        switch pcm {
        case "pulse", "pipewire": return true
        case "default", "sysdefault": return type(pcm).map(serverTypes.contains) ?? false
        default: return false
        }
    }

    /// The `type` of the PCM `name` in ALSA's configuration as loaded now (hooks run: Debian's
    /// pulse hook makes `default` the pulse plug-in only while a server runs), nil when it has
    /// none or the configuration cannot be read.
    static func alsaType(of name: String) -> String? {
        var top: OpaquePointer?
        guard snd_config_update_ref(&top) >= 0, let top else { return nil }
        defer { snd_config_unref(top) }
        var definition: OpaquePointer?
        guard snd_config_search_definition(top, "pcm", name, &definition) >= 0, let definition else { return nil }
        defer { snd_config_delete(definition) }
        var node: OpaquePointer?
        guard snd_config_search(definition, "type", &node) >= 0, let node else { return nil }
        var text: UnsafePointer<CChar>?
        guard snd_config_get_string(node, &text) >= 0, let text else { return nil }
        return String(cString: text)
    }
}
