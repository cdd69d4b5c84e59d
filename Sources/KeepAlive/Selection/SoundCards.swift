import CALSA
import Glibc

/// One playback device of one sound card, from the kernel's own description of it (ALSA's
/// control interface), not from the configuration's aliases.
///
/// ```swift
/// for device in CardDevice.playbackDevices() { print(device.title, device.kind) }
/// // HDA Intel — Generic Analog   analog
/// ```
package struct CardDevice: Sendable, Equatable {
    /// The card's index (`hw:0`), its id (`CARD=Intel`) and its name ("HDA Intel").
    package var card: Int
    package var cardID: String
    var cardName: String
    /// The kernel driver ("HDA-Intel", "USB-Audio").
    package var driver: String
    /// The device's index on its card (`DEV=0`) and its name ("Generic Analog", "HDMI 0").
    package var device: Int
    var deviceName: String
    package var kind: OutputKind

    /// "HDA Intel — Generic Analog": how a person knows it.
    package var title: String { deviceName.isEmpty || deviceName == cardName ? cardName : "\(cardName) — \(deviceName)" }

    /// The name ALSA's hints give this device's PCMs with `prefix` (`dmix:CARD=Intel,DEV=0`).
    package func pcm(_ prefix: String) -> String { "\(prefix):CARD=\(cardID),DEV=\(device)" }

    /// Every card's playback devices, in card and device order; empty without cards (or
    /// without permission to open their control devices).
    package static func playbackDevices() -> [CardDevice] {
        var devices: [CardDevice] = []
        var card: Int32 = -1
        while snd_card_next(&card) == 0, card >= 0 {
            var control: OpaquePointer?
            guard snd_ctl_open(&control, "hw:\(card)", 0) == 0, let control else { continue }
            defer { snd_ctl_close(control) }
            var info: OpaquePointer?
            guard snd_ctl_card_info_malloc(&info) == 0, let info else { continue }
            defer { snd_ctl_card_info_free(info) }
            guard snd_ctl_card_info(control, info) == 0 else { continue }
            let cardID = String(cString: snd_ctl_card_info_get_id(info))
            let cardName = String(cString: snd_ctl_card_info_get_name(info))
            let driver = String(cString: snd_ctl_card_info_get_driver(info))
            let controls = Self.controlNames(control)
            var pcmInfo: OpaquePointer?
            guard snd_pcm_info_malloc(&pcmInfo) == 0, let pcmInfo else { continue }
            defer { snd_pcm_info_free(pcmInfo) }
            var device: Int32 = -1
            while snd_ctl_pcm_next_device(control, &device) == 0, device >= 0 {
                snd_pcm_info_set_device(pcmInfo, UInt32(device))
                snd_pcm_info_set_subdevice(pcmInfo, 0)
                snd_pcm_info_set_stream(pcmInfo, SND_PCM_STREAM_PLAYBACK)
                guard snd_ctl_pcm_info(control, pcmInfo) == 0 else { continue }
                let name = String(cString: snd_pcm_info_get_name(pcmInfo))
                devices.append(CardDevice(
                    card: Int(card), cardID: cardID, cardName: cardName, driver: driver, device: Int(device),
                    deviceName: name, kind: kind(deviceName: name, driver: driver, controls: controls[Int(device)] ?? [])))
            }
        }
        return devices
    }

    /// The kind from the device's name, its driver and the names of the card's controls bound to
    /// it (IEC958 and ELD controls are per PCM device).
    package static func kind(deviceName: String, driver: String, controls: [String]) -> OutputKind {
        let name = deviceName.lowercased()
        if name.contains("hdmi") || name.contains("displayport") || controls.contains(where: { $0.hasPrefix("ELD") }) {
            return .hdmi
        }
        // A USB device's S/PDIF output has IEC958 controls of its own; on HDA cards those
        // controls are not tied to the PCM device, but the digital device is named for it.
        if ["digital", "s/pdif", "spdif", "iec958"].contains(where: { name.contains($0) })
            || (driver == "USB-Audio" && controls.contains(where: { $0.hasPrefix("IEC958 Playback") })) {
            return .spdif
        }
        return driver == "USB-Audio" ? .usb : .analog
    }

    /// The card's control names by the PCM device they belong to.
    private static func controlNames(_ control: OpaquePointer) -> [Int: [String]] {
        var list: OpaquePointer?
        guard snd_ctl_elem_list_malloc(&list) == 0, let list else { return [:] }
        defer { snd_ctl_elem_list_free(list) }
        guard snd_ctl_elem_list(control, list) == 0 else { return [:] }
        let count = snd_ctl_elem_list_get_count(list)
        guard count > 0, snd_ctl_elem_list_alloc_space(list, count) == 0 else { return [:] }
        defer { snd_ctl_elem_list_free_space(list) }
        guard snd_ctl_elem_list(control, list) == 0 else { return [:] }
        var names: [Int: [String]] = [:]
        for index in 0..<snd_ctl_elem_list_get_used(list) {
            let name = String(cString: snd_ctl_elem_list_get_name(list, index))
            names[Int(snd_ctl_elem_list_get_device(list, index)), default: []].append(name)
        }
        return names
    }
}
