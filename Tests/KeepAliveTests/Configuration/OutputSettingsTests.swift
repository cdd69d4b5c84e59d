import Logging
import TestSupport
import Testing
@testable import KeepAlive

@Suite("Settings of one output")
struct OutputSettingsTests {
    static func configuration() throws -> KeepAliveConfiguration {
        var configuration = KeepAliveConfiguration(devices: ["tv", "dac"], defaults: OutputConfiguration(volume: try Level(parsing: "0.01")))
        configuration.outputSettings["dac"] = OutputSettings(signal: .sine(frequency: 30), volume: try Level(parsing: "-50dB"))
        return configuration
    }

    @Test("an output plays its own settings over the configuration's; the others play the configuration's")
    func effective() throws {
        let configuration = try Self.configuration()
        let dac = configuration.configuration(for: "dac")
        let quiet = try Level(parsing: "-50dB")
        #expect(dac.signal == .sine(frequency: 30) && dac.volume == quiet)
        #expect(dac.ceiling == configuration.defaults.ceiling && dac.bufferDuration == configuration.defaults.bufferDuration)
        let tv = configuration.configuration(for: "tv")
        #expect(tv.signal == .clip && tv.volume == configuration.defaults.volume)
        try configuration.validate()
    }

    @Test("an output's own buffer applies to it alone and is checked like the defaults'")
    func buffer() throws {
        var configuration = try Self.configuration()
        configuration.outputSettings["tv"] = OutputSettings(bufferDuration: .seconds(4))
        #expect(configuration.configuration(for: "tv").bufferDuration == .seconds(4))
        #expect(configuration.configuration(for: "dac").bufferDuration == .seconds(2))
        try configuration.validate()
        configuration.outputSettings["tv"] = OutputSettings(bufferDuration: .seconds(11))
        #expect(throws: KeepAliveConfigurationError.bufferOutOfRange(.seconds(11))) { try configuration.validate() }
    }

    @Test("the configuration's ceiling stays a ceiling: an output may lower it, never raise it or play above it")
    func ceilings() throws {
        var configuration = try Self.configuration()
        configuration.outputSettings["dac"] = OutputSettings(ceiling: try Level(parsing: "0.1"))
        let (high, low, middle) = (try Level(parsing: "0.1"), try Level(parsing: "0.015"), try Level(parsing: "0.02"))
        #expect(throws: KeepAliveConfigurationError.outputCeilingAboveCeiling(device: "dac", ceiling: high, limit: configuration.defaults.ceiling)) {
            try configuration.validate()
        }
        configuration.outputSettings["dac"] = OutputSettings(volume: try Level(parsing: "0.02"), ceiling: try Level(parsing: "0.015"))
        #expect(throws: KeepAliveConfigurationError.outputVolumeAboveCeiling(device: "dac", volume: middle, ceiling: low)) {
            try configuration.validate()
        }
        configuration.outputSettings["dac"] = OutputSettings(volume: try Level(parsing: "0.2"))
        #expect(throws: KeepAliveConfigurationError.self) { try configuration.validate() }
        configuration.outputSettings["dac"] = OutputSettings(volume: try Level(parsing: "0.005"), ceiling: try Level(parsing: "0.01"))
        try configuration.validate()
    }

    @Test("a reconfiguration that changes one output's settings updates that output only")
    func reconfigureOne() throws {
        let manager = try KeepAliveManager(configuration: try Self.configuration(), isOn: false, logger: .quiet)
        var next = manager.configuration
        next.outputSettings["dac"]?.volume = try Level(parsing: "-45dB")
        let outcome = try manager.reconfigure(next)
        #expect(outcome.updatedInPlace == ["dac"] && outcome.added.isEmpty && outcome.removed.isEmpty, "\(outcome)")
        let (dacLevel, tvLevel) = (try Level(parsing: "-45dB"), try Level(parsing: "0.01"))
        #expect(manager.snapshot.outputs.first { $0.device == "dac" }?.volume == dacLevel)
        #expect(manager.snapshot.outputs.first { $0.device == "tv" }?.volume == tvLevel)
        // A change of everyone's level reaches the output without its own level only.
        var louder = manager.configuration
        louder.defaults.volume = try Level(parsing: "0.02")
        #expect(try manager.reconfigure(louder).updatedInPlace == ["tv"])
    }

    @Test("an output plays the same frames when only what its device is asked for at the next open changed (a sink's new rate); a level or signal change is another sound")
    func playsTheSame() throws {
        let base = OutputConfiguration(volume: try Level(parsing: "0.01"))
        var moved = base
        moved.deviceFormat = DeviceFormat(sampleFormat: .s16, rate: 44100, channels: 2)
        moved.generatedSignalRate = 44100
        moved.carryLeadIn = .seconds(2)
        #expect(moved.playsTheSame(as: base) && base.playsTheSame(as: moved))
        var louder = moved
        louder.volume = try Level(parsing: "0.02")
        #expect(!louder.playsTheSame(as: base))
        var sine = base
        sine.signal = .sine(frequency: 30)
        #expect(!sine.playsTheSame(as: base))
    }
}
