/// The format a device is asked for, in place of the one the signal would choose: a sample
/// format and a channel count (nil: the signal's own) and a rate.
///
/// ```swift
/// let player = DeviceFormat(sampleFormat: .s16, rate: 44100, channels: 2)
/// ```
package struct DeviceFormat: Sendable, Hashable, CustomStringConvertible {
    /// nil when the player's format is not one keepalived writes (`S24_3LE`): the signal's own
    /// is asked for, or the nearest the device takes.
    package var sampleFormat: SampleFormat?
    package var rate: Int
    package var channels: Int?

    package init(sampleFormat: SampleFormat? = nil, rate: Int, channels: Int? = nil) {
        self.sampleFormat = sampleFormat
        self.rate = rate
        self.channels = channels
    }

    package var description: String {
        "\(sampleFormat.map { "\($0) " } ?? "")\(rate) Hz\(channels.map { " \($0) ch" } ?? "")"
    }
}
