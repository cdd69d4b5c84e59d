import KeepAlive

/// What a sound server's sink asks for unless its `--output` or `--buffer` says otherwise.
///
/// Why a longer buffer than a card's: a sink output is a stream into the server (keepalived's
/// own, `ServerSinkPCM`), and every period costs a round trip to the server and a wakeup of the
/// stream's thread. A server grants room a period at a time and the stream takes no fewer than
/// three (as ALSA's pulse plug-in), so 6 s is three of 2 s: the shape tuned aplay's "4 s
/// buffer, 2 s periods" really runs in (`aplay -v`), and the longest period a PulseAudio sink
/// serves whole (asked for 8 s, it ran its sink at tens of milliseconds and cost keepalived
/// more than twice the CPU). keepalived writes a period at a time (``StreamPacer``: a server's
/// room lags what it played by up to a period, and two periods of three left pipewire-pulse
/// nothing queued at a write that just missed a grant), so it wakes every 2 s, as aplay does
/// (BENCHMARKS.md, "Sink outputs", measured at two periods a write). The cost: 2 s of loop per
/// sink (176 kB at 44.1 kHz mono), and a server that dies and stays down is noticed at the
/// stream's next write, up to 2 s later (docs/recovery.md).
///
/// ```swift
/// let settings = SinkDefaults.settings(for: .hdmi, rate: 44100, under: nil, buffer: SinkDefaults.buffer, ceiling: .defaultCeiling)
/// settings.bufferDuration        // 6 s
/// settings.generatedSignalRate   // 44100
/// ```
enum SinkDefaults {
    static let buffer: Duration = .seconds(6)

    /// A sink's settings: the user's own for it, then a Bluetooth sink's signal
    /// (``BluetoothDefaults``), then `buffer` (nil when `--buffer` holds for every output), and
    /// the sink's own `rate` for generated signals (the server resamples nothing).
    static func settings(for kind: OutputKind, rate: Int?, under own: OutputSettings?, buffer: Duration?, ceiling: Level) -> OutputSettings {
        var settings = own ?? OutputSettings()
        if kind == .bluetooth { settings = BluetoothDefaults.settings(under: settings, ceiling: ceiling) }
        if settings.bufferDuration == nil { settings.bufferDuration = buffer }
        if settings.generatedSignalRate == nil { settings.generatedSignalRate = rate }
        return settings
    }
}
