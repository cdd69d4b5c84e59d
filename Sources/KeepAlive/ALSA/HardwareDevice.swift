/// One card's playback device, as the kernel numbers it (`/dev/snd/pcmC0D3p`): what a player
/// asks keepalived to release.
///
/// ```swift
/// let device = HardwareDevice(card: 0, device: 3)
/// device.pcm    // hw:CARD=0,DEV=3
/// ```
struct HardwareDevice: Hashable, Comparable, Sendable, CustomStringConvertible {
    var card: Int
    var device: Int

    /// The device as `hw:` names it.
    var pcm: String { "hw:CARD=\(card),DEV=\(device)" }
    /// The `keepalived:` PCM a player names to get it.
    var keepalivedPCM: String { "keepalived:CARD=\(card),DEV=\(device)" }
    /// Its character device, whose opens and closes inotify reports.
    var node: String { "/dev/snd/pcmC\(card)D\(device)p" }
    /// Its substreams' status and hardware parameters.
    var procDirectory: String { "/asound/card\(card)/pcm\(device)p" }

    var description: String { pcm }

    static func < (a: HardwareDevice, b: HardwareDevice) -> Bool { (a.card, a.device) < (b.card, b.device) }
}
