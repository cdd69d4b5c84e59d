/// One card's playback device, as the kernel numbers it (`/dev/snd/pcmC0D3p`): what an output's
/// open handle plays to in the end, whatever its name (`default`, `hdmi:CARD=PCH,DEV=1`,
/// `dmix:…`), and what a player on the same machine asks keepalived to release.
///
/// ```swift
/// let device = HardwareDevice(card: 0, device: 3)
/// device.pcm    // hw:CARD=0,DEV=3
/// ```
public struct HardwareDevice: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The card's index (`/proc/asound/card0`).
    public var card: Int
    /// The card's PCM device (`/dev/snd/pcmC0D3p` is device 3).
    public var device: Int

    /// A card device by its indices.
    ///
    /// ```swift
    /// let hdmi = HardwareDevice(card: 0, device: 3)
    /// ```
    public init(card: Int, device: Int) {
        self.card = card
        self.device = device
    }

    /// The device as `hw:` names it.
    public var pcm: String { "hw:CARD=\(card),DEV=\(device)" }
    /// The `keepalived:` PCM a player names to get it.
    public var keepalivedPCM: String { "keepalived:CARD=\(card),DEV=\(device)" }
    /// Its character device, whose opens and closes inotify reports.
    public var node: String { "/dev/snd/pcmC\(card)D\(device)p" }
    /// Its substreams' status and hardware parameters, below `/proc`.
    public var procDirectory: String { "/asound/card\(card)/pcm\(device)p" }

    /// `hw:CARD=0,DEV=3`.
    public var description: String { pcm }

    /// By card, then device.
    public static func < (a: HardwareDevice, b: HardwareDevice) -> Bool { (a.card, a.device) < (b.card, b.device) }
}
