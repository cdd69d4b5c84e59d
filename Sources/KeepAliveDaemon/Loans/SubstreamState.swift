import KeepAlive
import Glibc

/// What the kernel says of a card device's playback substreams now
/// (`/proc/asound/card0/pcm0p/sub*/status` and `hw_params`): whether a program has one open,
/// and the format it set.
///
/// ```swift
/// let now = SubstreamState.read(HardwareDevice(card: 0, device: 0))
/// if now.openBy == nil { print("closed") } else if let format = now.format { print(format) }
/// ```
struct SubstreamState: Equatable, Sendable {
    /// The thread that opened an open substream (`owner_pid`); nil when every one is closed.
    var openBy: Int32?
    /// The format set on the open substream, once its program set one.
    var format: PlayerFormat?

    /// Reads every substream of `device`; one open substream is enough to count as open.
    static func read(_ device: HardwareDevice, proc: String = "/proc") -> SubstreamState {
        let directory = proc + device.procDirectory
        var state = SubstreamState()
        for sub in 0..<32 {
            guard let status = readSmallFile("\(directory)/sub\(sub)/status") else { break }
            guard let owner = CardHolders.ownerPID(status: status) else { continue }
            state.openBy = owner
            state.format = format(hwParams: readSmallFile("\(directory)/sub\(sub)/hw_params") ?? "")
            break
        }
        return state
    }

    /// The format in a substream's `hw_params` (`format: S16_LE`, `channels: 2`,
    /// `rate: 44100 (44100/1)`); nil while it is `closed` or not yet set.
    static func format(hwParams text: String) -> PlayerFormat? {
        var name: String?
        var rate: Int?
        var channels: Int?
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let value = parts[1].drop { $0 == " " || $0 == "\t" }
            switch parts[0] {
            case "format": name = String(value.prefix { !$0.isWhitespace })
            case "rate": rate = Int(value.prefix { $0.isNumber })
            case "channels": channels = Int(value.prefix { $0.isNumber })
            default: break
            }
        }
        guard let name, let rate, let channels, rate > 0, channels > 0 else { return nil }
        return PlayerFormat(name: name, rate: rate, channels: channels)
    }
}

/// The format a player set on a card device, as the kernel names it (`S24_3LE`, 96000, 2).
struct PlayerFormat: Equatable, Sendable, CustomStringConvertible {
    var name: String
    var rate: Int
    var channels: Int

    /// What keepalived asks the device for when it takes it back: the same rate and channels,
    /// and the same sample format when it is one keepalived writes.
    var deviceFormat: DeviceFormat { DeviceFormat(sampleFormat: SampleFormat(rawValue: name), rate: rate, channels: channels) }

    var description: String { "\(name) \(rate) Hz \(channels) ch" }
}
