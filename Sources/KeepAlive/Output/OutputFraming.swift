/// How the samples reach the device: as plain linear samples, or inside IEC 60958 subframes.
///
/// A Raspberry Pi's HDMI (`vc4-hdmi`) takes nothing but `IEC958_SUBFRAME_LE`: each 32-bit word a
/// subframe with its preamble, a 24-bit sample, the validity, user, channel-status and parity
/// bits, framed in software. On such a device keepalived renders its signal as 24-bit samples and
/// frames them itself, once, when it renders (``OutputFormat/framing``).
///
/// ```swift
/// if manager.outputs.first?.format?.framing == .iec958 {
///     print("the device takes IEC958 subframes; keepalived frames its signal itself")
/// }
/// ```
///
/// A struct rather than an enum, so that a new framing is not a breaking change.
public struct OutputFraming: Sendable, Hashable, CustomStringConvertible {
    private enum Kind: Hashable {
        case linear
        case iec958
    }

    private let kind: Kind

    /// Plain interleaved samples in ``OutputFormat/sampleFormat``.
    public static let linear = OutputFraming(kind: .linear)
    /// IEC 60958 subframes (ALSA's `IEC958_SUBFRAME_LE`), carrying ``SampleFormat/s24`` samples.
    public static let iec958 = OutputFraming(kind: .iec958)

    /// `linear` or `IEC958_SUBFRAME_LE`.
    public var description: String {
        switch kind {
        case .linear: "linear"
        case .iec958: "IEC958_SUBFRAME_LE"
        }
    }
}
