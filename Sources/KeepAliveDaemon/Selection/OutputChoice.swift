import KeepAlive

/// Which outputs the daemon keeps awake besides the named ones: `--all`, `--digital` or
/// `--analog`, `--bluetooth`, less what `--exclude` leaves out. The scanner holds it; a reload
/// replaces it.
///
/// ```swift
/// let choice = OutputChoice(selection: .all, bluetooth: true, exclusions: [try OutputExclusion("*Headset*")])
/// choice.flags   // ["--all", "--bluetooth"]
/// ```
struct OutputChoice: Sendable, Equatable {
    var selection: OutputSelection?
    /// Also the Bluetooth sinks, which no selection picks on its own: a headset must sleep to
    /// save its battery.
    var bluetooth = false
    var exclusions: [OutputExclusion] = []
    /// Take a card device without a dmix form through plughw (`--exclusive`).
    var allowExclusive = false
    /// The buffer a sound server's sink asks for unless its `--output` gives one; nil when
    /// `--buffer` was given, which then holds for every output.
    var sinkBuffer: Duration? = SinkDefaults.buffer
    /// `--carry`: an IEC958-only port (a Raspberry Pi's HDMI) is opened on its `hw:`, where
    /// keepalived frames its own signal and a player can be carried, not on its `hdmi:` (alsa-lib's
    /// IEC958 layer, which carries none).
    var carriesPlayers = false

    /// Whether anything is chosen besides named outputs.
    var isEmpty: Bool { selection == nil && !bluetooth }

    /// The options that made it, for logs and reasons.
    var flags: [String] {
        (selection.map { ["--\($0)"] } ?? []) + (bluetooth ? ["--bluetooth"] : [])
    }

    /// What a selection that found nothing waits for: "output", "digital output", "Bluetooth sink".
    var awaited: String {
        switch (selection, bluetooth) {
        case (nil, true): "Bluetooth sink"
        case (.all?, _), (nil, false): "output"
        case (let selection?, _): "\(selection) output"
        }
    }
}
