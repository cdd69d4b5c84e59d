import ArgumentParser
import _KeepalivedControlProtocol
@testable import KeepAlive
import Glibc
import Testing

@testable import KeepAliveDaemon

/// What `keepalived test` decides without a device: the tone's level, the configuration that
/// plays it on one output, the ceilings it refuses, the labels, the exit code.
@Suite("keepalived test: the tone, its ceilings and its exit code")
struct KeepaliveTestPlanTests {
    @Test("the tone peaks at −30 dBFS (0.0316, 1036 LSB in 16 bits), its RMS is peak/√2 (−33 dBFS), under the default ceiling")
    func level() {
        #expect(abs(TestTone.level.linear - 0.031_623) < 1e-6)
        #expect(abs(TestTone.level.decibels + 30) < 1e-9)
        #expect(abs(TestTone.rms - 0.022_361) < 1e-6)
        #expect(abs(20 * log10(TestTone.rms) + 33.01) < 0.01)
        #expect(abs(TestTone.peak(bits: 16) - 1036.2) < 0.1)
        #expect(TestTone.level < Level.defaultCeiling)
        #expect(TestTone.describe(TestTone.level) == "0.0316 (-30 dBFS)")
        #expect(TestTone.describe(try! Level(parsing: "0.01")) == "0.01 (-40 dBFS)")
        // A sampled sine's RMS is its peak over √2 (whole cycles at the sink's rate).
        let samples = (0..<44100).map { TestTone.level.linear * sin(2 * Double.pi * TestTone.frequency * Double($0) / 44100) }
        let rms = (samples.reduce(0) { $0 + $1 * $1 } / Double(samples.count)).squareRoot()
        #expect(abs(rms - TestTone.rms) < 1e-6)
    }

    @Test("one burst of 1 s, fades of 15 ms, then silence for longer than the output is held")
    func burst() throws {
        let schedule = TestTone.schedule
        try schedule.validate()
        #expect(schedule.playFor == .seconds(1) && schedule.fade == .milliseconds(15))
        #expect(schedule.pauseFor > TestTone.heldFor + TestTone.startTimeout)
        #expect(TestTone.signal == .sine(frequency: 440))
    }

    @Test("the configuration for one output keeps what the plan gave it (its sink, the sink's rate, its ceiling) and plays the tone")
    func configuration() throws {
        var planned = KeepAliveConfiguration(devices: ["pulse:DEVICE=tv", "dmix:CARD=PCH,DEV=3"])
        planned.defaults.volume = try Level(parsing: "-50dB")
        var sink = OutputSettings(signal: .fluctuate(perSecond: 50), ceiling: try Level(parsing: "0.04"), bufferDuration: .seconds(6))
        sink.serverSink = "tv"
        sink.generatedSignalRate = 44100
        planned.outputSettings["pulse:DEVICE=tv"] = sink

        let tone = TestTone.configuration(for: "pulse:DEVICE=tv", in: planned)
        try tone.validate()
        #expect(tone.devices == ["pulse:DEVICE=tv"])
        let own = tone.configuration(for: "pulse:DEVICE=tv")
        #expect(own.serverSink == "tv" && own.generatedSignalRate == 44100)
        #expect(own.ceiling == (try Level(parsing: "0.04")))
        #expect(own.signal == .sine(frequency: 440) && own.volume == TestTone.level && own.schedule == TestTone.schedule)
        #expect(own.bufferDuration == .seconds(1))

        let card = TestTone.configuration(for: "dmix:CARD=PCH,DEV=3", in: planned).configuration(for: "dmix:CARD=PCH,DEV=3")
        #expect(card.serverSink == nil && card.ceiling == .defaultCeiling && card.volume == TestTone.level)
    }

    @Test("a ceiling below the tone is refused naming both values: the global --max-level, or an output's")
    func ceilings() throws {
        #expect(TestTone.ceilingRefusal(globalCeiling: .defaultCeiling) == nil)
        #expect(TestTone.ceilingRefusal(globalCeiling: TestTone.level) == nil)
        let low = try #require(TestTone.ceilingRefusal(globalCeiling: try Level(parsing: "0.01")))
        #expect(low.contains("--max-level 0.01 (-40 dBFS)") && low.contains("0.0316 (-30 dBFS)"), "\(low)")

        var configuration = KeepAliveConfiguration(devices: ["hw:0", "hw:1"])
        #expect(TestTone.ceilingRefusal(devices: configuration.devices, in: configuration) == nil)
        configuration.outputSettings["hw:1"] = OutputSettings(ceiling: try Level(parsing: "0.02"))
        let output = try #require(TestTone.ceilingRefusal(devices: configuration.devices, in: configuration))
        #expect(output.contains("--output 'hw:1'") && output.contains("0.02 (-34 dBFS)"), "\(output)")
        // Only the outputs tested count.
        #expect(TestTone.ceilingRefusal(devices: ["hw:0"], in: configuration) == nil)
        configuration.defaults.ceiling = try Level(parsing: "-40dB")
        #expect(TestTone.ceilingRefusal(devices: ["hw:0"], in: configuration)?.contains("--max-level 0.01") == true)
    }

    @Test("exit 0 when every output sounded, 69 when none did or none was picked, 75 when some did", arguments: [
        (2, 0, 0), (1, 0, 0), (0, 2, 69), (0, 0, 69), (1, 1, 75), (3, 1, 75),
    ])
    func exitCode(_ sounded: Int, _ failed: Int, _ code: Int32) {
        #expect(TestTone.exitCode(sounded: sounded, failed: failed).rawValue == code)
    }

    @Test("only y or yes answers the question")
    func answers() {
        for yes in ["y", "Y", "yes", "YES\n", " y "] { #expect(TestTone.isYes(yes), "\(yes)") }
        for no in [nil, "", "\n", "n", "no", "yess", "ja"] { #expect(!TestTone.isYes(no), "\(String(describing: no))") }
    }

    @Test("each output is named as a person knows it: a sink by its description and kind, a card device by its card, any other PCM by ALSA's description")
    func labels() {
        let sink = ServerSink(name: "tv", description: "Living-room TV", properties: ["device.api": "alsa", "alsa.card": "5", "device.profile.name": "hdmi-stereo"])
        #expect(TestTone.label(sink: sink, card: nil, hint: nil) == "sink \"Living-room TV\", HDMI/DisplayPort")
        let null = ServerSink(name: "keep", description: "Null Output")
        #expect(TestTone.label(sink: null, card: nil, hint: nil) == "sink \"Null Output\", virtual")
        let card = CardDevice(card: 0, cardID: "PCH", cardName: "HDA Intel PCH", driver: "HDA-Intel", device: 3, deviceName: "HDMI 0", kind: .hdmi)
        #expect(TestTone.label(sink: nil, card: card, hint: nil) == "card 0 \"PCH\": HDA Intel PCH — HDMI 0, HDMI/DisplayPort")
        let hint = ALSADevice(name: "my-receiver", description: "Receiver\nvia S/PDIF")
        #expect(TestTone.label(sink: nil, card: nil, hint: hint) == "ALSA PCM: Receiver, via S/PDIF")
        #expect(TestTone.label(sink: nil, card: nil, hint: nil) == "ALSA PCM")
    }

    @Test("a running daemon is named, and the outputs it holds in a ring loop said to be busy")
    func daemonWarning() {
        func output(_ device: String, _ mode: String) -> OutputReport {
            OutputReport(device: device, state: "playing", mode: mode, volume: 0.01, ceiling: 0.05, framesPlayed: 0, recoveriesByReason: [:])
        }
        var status = DaemonStatus(state: "playing", pid: 4242, uptimeSeconds: 1, socket: "/run/k.sock", outputs: [output("pulse:DEVICE=tv", "stream")])
        let shared = TestTone.daemonWarning(status, socket: "/run/k.sock")
        #expect(shared.contains("pid 4242") && shared.contains("1 output awake") && shared.contains("share"), "\(shared)")
        status.outputs.append(output("hw:0", "ring-loop"))
        let held = TestTone.daemonWarning(status, socket: "/run/k.sock")
        #expect(held.contains("holds hw:0 in a ring loop") && held.contains("keepalived stop"), "\(held)")
    }

    @Test("test takes run's options, --yes, -y and --config; the words after 'test' are its own")
    func parsing() throws {
        let command = try TestCommand.parse(["--all", "--exclude", "*bluez*", "-y"])
        #expect(command.yes && command.playback.all && command.playback.exclusions.map(\.pattern) == ["*bluez*"])
        #expect(try TestCommand.parse(["-d", "hw:0", "--max-level", "-30dB"]).playback.sound.maxLevel == (try Level(parsing: "-30dB")))
        #expect(!(try TestCommand.parse([])).yes)
        #expect(TestCommand.commandLineWords(["keepalived", "test", "-d", "test", "--yes"]) == ["-d", "test", "--yes"])
        #expect(TestCommand.commandLineWords(["keepalived"]) == [])
    }
}
