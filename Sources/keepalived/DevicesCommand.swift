import ArgumentParser
import FoundationEssentials
import KeepAlive

/// `keepalived devices`: the ALSA playback outputs, digital ones marked.
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List ALSA playback outputs from the device-name hints, marking the digital ones.")

    @Flag(help: "Print a JSON array.")
    var json = false

    struct Entry: Codable {
        var name: String
        var description: String
        var digital: Bool
    }

    func run() throws {
        let devices = ALSADevice.playbackDevices()
        if json {
            printOutput(ControlJSON.encode(devices.map { Entry(name: $0.name, description: $0.description, digital: $0.isDigital) }))
            return
        }
        if devices.isEmpty {
            printOutput("no ALSA playback devices found")
            return
        }
        for device in devices {
            printOutput("\(device.isDigital ? "digital" : "analog ")  \(device.name)\n         \(device.description)")
        }
    }
}
