import ArgumentParser
import CALSA
import ControlProtocol
import FoundationEssentials
import KeepAlive

/// `keepalived devices`: the ALSA playback outputs, digital ones marked.
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List ALSA playback outputs from the device-name hints, marking the digital ones.")

    @Flag(help: "Print a JSON array.")
    var json = false

    @Flag(help: "Show what --all/--digital/--analog would pick with --exclusive.")
    var exclusive = false

    struct Entry: Codable {
        var name: String
        var description: String
        var digital: Bool
        /// The selections (all, digital, analog) that would open this PCM.
        var pickedBy: [String]
    }

    func run() throws {
        calsa_silence_library_errors()
        let devices = ALSADevice.playbackDevices()
        let picks = OutputSelection.allCases.map { ($0, Set($0.pick(from: devices, allowExclusive: exclusive))) }
        func pickedBy(_ device: ALSADevice) -> [String] { picks.filter { $0.1.contains(device.name) }.map(\.0.rawValue) }
        if json {
            printOutput(ControlJSON.encode(devices.map {
                Entry(name: $0.name, description: $0.description, digital: $0.isDigital, pickedBy: pickedBy($0))
            }))
            return
        }
        if devices.isEmpty {
            printOutput("no ALSA playback devices found")
            return
        }
        for device in devices {
            let by = pickedBy(device)
            printOutput("\(device.isDigital ? "digital" : "analog ")  \(device.name)\(by.isEmpty ? "" : "   [--\(by.joined(separator: ", --"))]")\n         \(device.description)")
        }
    }
}
