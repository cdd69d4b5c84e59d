/// What kind of output a card's playback device is, as a person would name it.
package enum OutputKind: String, Sendable, CaseIterable {
    case analog
    /// HDMI or DisplayPort: the device is named so, or its card has an ELD control for it.
    case hdmi = "HDMI/DisplayPort"
    /// S/PDIF: the device is named so ("… Digital", "IEC958"), or its card has an IEC958
    /// playback control for it. A USB device's generic `iec958:` alias alone is not one.
    case spdif = "S/PDIF"
    /// A USB audio device without an S/PDIF control.
    case usb = "USB"
    /// A Bluetooth speaker or headset (a sound server's sink): never picked by a selection
    /// unless Bluetooth is asked for, since a headset must sleep to save its battery.
    case bluetooth = "Bluetooth"

    /// Whether `--digital` keeps it awake.
    package var isDigital: Bool { self == .hdmi || self == .spdif }
}
