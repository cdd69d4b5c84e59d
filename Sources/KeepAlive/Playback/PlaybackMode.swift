/// How an output keeps its device awake.
///
/// ```swift
/// for output in manager.outputs where output.mode == .ringLoop {
///     print("\(output.device): the hardware loops the signal; the process sleeps")
/// }
/// ```
///
/// New modes may be added in a minor release: switch over it with a `default` case.
public enum PlaybackMode: String, Sendable, Hashable, CustomStringConvertible {
    /// The signal is written as the device plays it, about twice per buffer (sound servers,
    /// dmix, and hardware when the signal cannot loop in its ring).
    case stream
    /// The hardware's ring buffer holds the signal, tiled to its length, and the device replays
    /// it for ever: nothing is written after the start and the process sleeps (a `hw:` device,
    /// or `plughw:`, `hdmi:`, `iec958:` over one, held exclusively).
    case ringLoop = "ring-loop"
    /// The device is opened, prepared and held; nothing is written (``KeepAliveSignal/openOnly``).
    case openOnly = "open-only"

    /// The name used in logs and `status`: `stream`, `ring-loop`, `open-only`.
    public var description: String { rawValue }
}
