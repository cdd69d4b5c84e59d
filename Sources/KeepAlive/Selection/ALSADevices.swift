import CALSA
#if canImport(Glibc)
import Glibc
#endif

/// An ALSA playback device as the device-name hints describe it.
///
/// ```swift
/// for device in ALSADevice.playbackDevices() where device.isDigital {
///     print(device.name, device.description)  // hdmi:CARD=PCH,DEV=0  HDA Intel PCH, HDMI 0
/// }
/// ```
public struct ALSADevice: Sendable, Equatable {
    /// The PCM name to open, e.g. `hdmi:CARD=PCH,DEV=0`.
    public var name: String
    /// The human description, one line.
    public var description: String
    /// Whether it is a digital output (HDMI, DisplayPort, S/PDIF, IEC958).
    public var isDigital: Bool

    /// A device from its PCM name and description; ``isDigital`` is derived from both.
    public init(name: String, description: String) {
        self.name = name
        self.description = description
        let haystack = (name + " " + description).lowercased()
        isDigital = ["hdmi", "spdif", "s/pdif", "iec958", "displayport", "digital"].contains { haystack.contains($0) }
    }

    /// The PCMs ALSA's configuration and cards offer for playback (`aplay -L`'s list).
    public static func playbackDevices() -> [ALSADevice] {
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        guard snd_device_name_hint(-1, "pcm", &hints) == 0, let hints else { return [] }
        defer { snd_device_name_free_hint(hints) }
        var devices: [ALSADevice] = []
        var cursor = hints
        while let hint = cursor.pointee {
            defer { cursor += 1 }
            let name = take(snd_device_name_get_hint(hint, "NAME"))
            let description = take(snd_device_name_get_hint(hint, "DESC"))
            let direction = take(snd_device_name_get_hint(hint, "IOID"))
            guard let name, direction == nil || direction == "Output" else { continue }
            let oneLine = (description ?? "").split(whereSeparator: { $0 == "\n" }).joined(separator: ", ")
            devices.append(ALSADevice(name: name, description: oneLine))
        }
        return devices
    }

    /// Makes the next open read ALSA's configuration files again. alsa-lib notices changes to
    /// its top-level files on its own, but not to files they include (`~/.asoundrc`); the hint
    /// list does see them, so a caller that finds new PCMs there calls this before opening them.
    /// Safe while other threads hold open PCMs: alsa-lib reference-counts its configuration tree.
    public static func reloadConfiguration() {
        _ = snd_config_update_free_global()
    }

    private static func take(_ pointer: UnsafeMutablePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        defer { free(pointer) }
        return String(cString: pointer)
    }
}
