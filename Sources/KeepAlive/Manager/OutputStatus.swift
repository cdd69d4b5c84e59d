/// A snapshot of one output, as ``KeepAliveManager/outputs`` reports it.
///
/// ```swift
/// for output in manager.outputs {
///     print(output.device, output.state, output.framesPlayed, output.totalRecoveries)
/// }
/// ```
public struct OutputStatus: Sendable, Equatable {
    /// The ALSA PCM name.
    public var device: String
    /// Where the output stands.
    public var state: KeepAliveState
    /// The format negotiated at the last open, if it ever opened.
    public var format: OutputFormat?
    /// How the output played at its last open, if it ever opened.
    public var mode: PlaybackMode?
    /// The card device the output's handle played to at its last open, as alsa-lib describes
    /// the open handle (through plug, hooks and dmix layers alike); nil before the first open
    /// and for outputs that end in no card (a sound server's stream, a file, null).
    public var hardware: HardwareDevice?
    /// The gain applied to the clip.
    public var volume: Level
    /// Frames played since the manager started: written, or (in a ring loop) replayed by the
    /// device.
    public var framesPlayed: Int
    /// Recoveries so far, by reason.
    public var recoveries: [InterruptionReason: Int]
    /// The last fault, as ALSA described it.
    public var lastError: String?
    /// The player whose audio this output carries on its open stream now (the program its
    /// `keepalived:` PCM named), if any.
    public var carrying: String?
    /// Whether the player it carries has sent nothing above silence (about −84 dBFS) for a second
    /// or more: it holds the device open without music, and the box's activity counts it idle.
    public var carriedSilent = false

    /// Recoveries so far, all reasons together.
    public var totalRecoveries: Int { recoveries.values.reduce(0, +) }

    /// A snapshot with every field given; the manager makes these as the output reports.
    public init(device: String, state: KeepAliveState, format: OutputFormat? = nil, mode: PlaybackMode? = nil,
                hardware: HardwareDevice? = nil, volume: Level, framesPlayed: Int = 0, recoveries: [InterruptionReason: Int] = [:],
                lastError: String? = nil) {
        self.device = device
        self.state = state
        self.format = format
        self.mode = mode
        self.hardware = hardware
        self.volume = volume
        self.framesPlayed = framesPlayed
        self.recoveries = recoveries
        self.lastError = lastError
    }
}
