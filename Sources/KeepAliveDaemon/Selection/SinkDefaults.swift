import KeepAlive

/// What a sound server's sink asks for unless its `--output` or `--buffer` says otherwise.
///
/// Why a longer buffer than a card's: a sink output is a stream into the server (keepalived's
/// own, `ServerSinkPCM`), and every period costs a round trip to the server and a wakeup of the
/// stream's thread. 2 s is the longest period a PulseAudio sink serves whole (asked for 8 s in
/// three periods of 2.67 s, it ran its sink at tens of milliseconds and cost keepalived more
/// than twice the CPU), and tuned aplay's "4 s buffer, 2 s periods" really runs in 2 s periods
/// (`aplay -v`). A server grants room a period at a time, so up to a period it played is not
/// room yet: the stream takes four periods (``ServerSinkPCM``), and keepalived writes two of
/// them every 4 s with more than a period still queued (``StreamPacer``). Three periods of 2 s
/// (6 s, until 27 Nov 2026) written two at a time left pipewire-pulse nothing queued at a write
/// that just missed a grant: an underrun in a loaded VM. The cost: 4 s of loop per sink (353 kB
/// at 44.1 kHz mono), 8 s queued in the server, and a server that dies and stays down is
/// noticed at the stream's next write, up to 4 s later (docs/recovery.md).
///
/// ```swift
/// let settings = SinkDefaults.settings(for: .hdmi, rate: 44100, under: nil, buffer: SinkDefaults.buffer, ceiling: .defaultCeiling)
/// settings.bufferDuration        // 8 s
/// settings.generatedSignalRate   // 44100
/// ```
enum SinkDefaults {
    static let buffer: Duration = .seconds(8)

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
