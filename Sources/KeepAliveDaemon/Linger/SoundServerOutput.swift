import CALSA

/// Whether an ALSA output goes to a sound server, read from what ALSA's configuration makes of
/// its name (the PCM's `type`): `pulse` (PulseAudio, or PipeWire through pipewire-pulse) and
/// `pipewire` are; `hw`, `plug`, `dmix`, `hdmi`'s hooks and the rest are not. `default` is
/// whatever the configuration makes of it: Debian's pulse hook turns it into `pulse` while a
/// server runs. Nothing is opened, so a box without a sound card answers too.
///
/// ```swift
/// SoundServerOutput.kind(of: "pulse")   // .soundServer("pulse")
/// SoundServerOutput.kind(of: "hw:0")    // .other(type: "hw")
/// ```
enum SoundServerOutput: Equatable {
    case soundServer(String)
    case other(type: String?)

    static func kind(of device: String) -> SoundServerOutput {
        // A reference of its own to the global configuration: the playback threads may update it.
        var top: OpaquePointer?
        guard snd_config_update_ref(&top) >= 0, let root = top else { return byName(device) }
        defer { snd_config_unref(root) }
        var definition: OpaquePointer?
        guard snd_config_search_definition(root, "pcm", device, &definition) >= 0, let definition else { return byName(device) }
        defer { snd_config_delete(definition) }
        var node: OpaquePointer?
        var text: UnsafePointer<CChar>?
        guard snd_config_search(definition, "type", &node) >= 0, let node, snd_config_get_string(node, &text) >= 0, let text else {
            return .other(type: nil)
        }
        let type = String(cString: text)
        return ["pulse", "pipewire"].contains(type) ? .soundServer(type) : .other(type: type)
    }

    /// When ALSA's configuration cannot be read (a hook that fails to load), or does not define
    /// the name: the plug-ins' own names still say what they are.
    private static func byName(_ device: String) -> SoundServerOutput {
        let name = device.split(separator: ":", maxSplits: 1).first.map(String.init) ?? device
        return ["pulse", "pipewire"].contains(name) ? .soundServer(name) : .other(type: nil)
    }

    /// How a refusal or a warning names an output that is not a sound server's.
    static func describe(_ device: String, type: String?) -> String {
        let hardware: Set<String> = ["hw", "plug", "dmix", "dshare", "hooks", "iec958", "softvol", "route", "linear", "asym", "lfloat", "rate"]
        guard let type else { return "\(device) is not a sound-server output" }
        return hardware.contains(type) ? "\(device) is a hardware output" : "\(device) is not a sound-server output (ALSA type \(type))"
    }
}
