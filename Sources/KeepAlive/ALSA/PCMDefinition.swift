import CALSA

/// A PCM name's definition in ALSA's configuration, read without opening anything: aliases
/// followed, the cards' configuration loaded, the name's arguments checked against the
/// definition's `@args` (alsa-lib's `snd_config_search_definition`, as its open does).
///
/// ```swift
/// let type = PCMDefinition.read("hdmi:CARD=vc4hdmi0,DEV=0") { _ in "found" }   // "found", or nil
/// ```
enum PCMDefinition {
    /// `body`'s answer for `name`'s expanded definition, from the process's configuration or
    /// from `configurationFile` alone; nil where it does not resolve.
    static func read<Answer>(_ name: String, configurationFile: String? = nil, _ body: (OpaquePointer) -> Answer) -> Answer? {
        var tree: OpaquePointer?
        if let configurationFile {
            var input: OpaquePointer?
            guard snd_config_top(&tree) == 0, let top = tree else { return nil }
            guard snd_input_stdio_open(&input, configurationFile, "r") == 0, let input else {
                snd_config_delete(top)
                return nil
            }
            let loaded = snd_config_load(top, input)
            snd_input_close(input)
            guard loaded == 0 else {
                snd_config_delete(top)
                return nil
            }
        } else {
            guard snd_config_update_ref(&tree) >= 0 else { return nil }
        }
        guard let tree else { return nil }
        defer {
            if configurationFile == nil { snd_config_unref(tree) } else { _ = snd_config_delete(tree) }
        }
        var definition: OpaquePointer?
        guard snd_config_search_definition(tree, "pcm", name, &definition) >= 0, let definition else { return nil }
        defer { snd_config_delete(definition) }
        return body(definition)
    }
}
