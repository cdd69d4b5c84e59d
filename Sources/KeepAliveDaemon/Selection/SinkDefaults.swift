import KeepAlive

/// What a sound server's sink asks for unless its `--output` or `--buffer` says otherwise.
///
/// Why a longer buffer than a card's: a sink output is a stream through ALSA's pulse plug-in,
/// and every period costs a round trip to the server and a wakeup of the plug-in's thread as
/// well as keepalived's. At 4 s (the plug-in's fewest periods, three of 1.33 s; tuned aplay's
/// 4 s and 2 s periods come out as 6 s and 2 s under the same rule) a sink output wakes no more
/// often than tuned aplay on the same server (BENCHMARKS.md, "Sink outputs"). The cost:
/// a server that dies or stalls is noticed at the stream's next write, up to half a buffer
/// later: 2 s instead of 1 (docs/recovery.md).
///
/// ```swift
/// let settings = SinkDefaults.settings(for: .hdmi, under: nil, buffer: SinkDefaults.buffer, ceiling: .defaultCeiling)
/// settings.bufferDuration   // 4 s
/// ```
enum SinkDefaults {
    static let buffer: Duration = .seconds(4)

    /// A sink's settings: the user's own for it, then a Bluetooth sink's signal
    /// (``BluetoothDefaults``), then `buffer` (nil when `--buffer` holds for every output).
    static func settings(for kind: OutputKind, under own: OutputSettings?, buffer: Duration?, ceiling: Level) -> OutputSettings {
        var settings = own ?? OutputSettings()
        if kind == .bluetooth { settings = BluetoothDefaults.settings(under: settings, ceiling: ceiling) }
        if settings.bufferDuration == nil { settings.bufferDuration = buffer }
        return settings
    }
}
