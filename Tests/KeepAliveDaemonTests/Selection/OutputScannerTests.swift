import Foundation
import KeepAlive
import Logging
import TestSupport
import Testing

@testable import KeepAliveDaemon

/// The scanner's decisions that read nothing from the machine: without a selection it plans the
/// options' own outputs, and a rescan applies only what differs from what plays.
@Suite("OutputScanner: its decisions without a selection")
struct OutputScannerTests {
    static let logger = Logger.quiet

    @Test("without a selection the plan is the options' own configuration, and no rescan happens before a manager is attached")
    func planned() throws {
        let scanner = OutputScanner(logger: Self.logger)
        let base = KeepAliveConfiguration(devices: ["null", "hw:0"])
        scanner.use(base, choice: OutputChoice())
        #expect(scanner.planned() == base)
        #expect(scanner.base == base)
        #expect(scanner.choice.isEmpty)
        #expect(scanner.withheld().isEmpty)
        #expect(scanner.serverDescriptor == -1)
        #expect(!scanner.rescan(on: .claimed("the test's thread")))
    }

    @Test("a rescan that finds what already plays changes nothing; one after the options changed applies them")
    func rescan() throws {
        let scanner = OutputScanner(logger: Self.logger)
        scanner.use(KeepAliveConfiguration(devices: ["null"]), choice: OutputChoice())
        let manager = try KeepAliveManager(configuration: scanner.planned(), logger: Self.logger)
        scanner.attach(manager)
        #expect(!scanner.rescan(on: .claimed("the test's thread")))
        scanner.use(KeepAliveConfiguration(devices: ["null", "other"]), choice: OutputChoice())
        #expect(scanner.rescan(on: .claimed("the test's thread")))
        #expect(manager.configuration.devices == ["null", "other"])
        #expect(!scanner.rescan(on: .claimed("the test's thread")))
    }

    @Test("a card id is looked up once; later its /proc id is read instead, and a card replugged at another index or gone is looked up anew")
    func cardIndicesRemembered() throws {
        let proc = NSTemporaryDirectory() + "scanner-proc-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: proc) }
        func card(_ index: Int, id: String?) throws {
            let directory = "\(proc)/asound/card\(index)"
            try? FileManager.default.removeItem(atPath: directory)
            guard let id else { return }
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try (id + "\n").write(toFile: directory + "/id", atomically: true, encoding: .utf8)
        }
        let scanner = OutputScanner(logger: Self.logger)
        var asked: [String] = []
        var cards = ["Intel": Int32(0), "Audio": 3]
        func indices(_ names: [String]) -> [String: Int] {
            scanner.cardIndices(naming: names, proc: proc) { id in asked.append(id); return cards[id] ?? -19 }
        }
        try card(0, id: "Intel")
        try card(3, id: "Audio")
        let names = ["hw:CARD=Intel,DEV=0", "plughw:CARD=Intel,DEV=3", "hw:CARD=Audio,DEV=0", "null", "pulse"]
        #expect(indices(names) == ["Intel": 0, "Audio": 3])
        #expect(asked == ["Intel", "Audio"])
        asked = []
        #expect(indices(names) == ["Intel": 0, "Audio": 3])
        #expect(asked.isEmpty, "looked up again: \(asked)")
        // The USB DAC unplugged and plugged back in as card 4; card 3 now another one.
        try card(3, id: "Other")
        try card(4, id: "Audio")
        cards["Audio"] = 4
        #expect(indices(names) == ["Intel": 0, "Audio": 4])
        #expect(asked == ["Audio"])
        // Gone: no index, and none remembered.
        asked = []
        try card(4, id: nil)
        cards["Audio"] = nil
        #expect(indices(names) == ["Intel": 0])
        #expect(indices(names) == ["Intel": 0])
        #expect(asked == ["Audio", "Audio"])
    }

    @Test("sinks and plug-ins open no card, so reserve none")
    func cardsOpened() {
        let scanner = OutputScanner(logger: Self.logger)
        #expect(scanner.cardsOpened(by: ["null", "pulse", "default", "pulse:DEVICE=alsa_output.x"]).isEmpty)
    }

    @Test("an output on the server's default sink waits while the server has not answered or has no sink, and only then")
    func defaultSinkWait() {
        // `default` as a desktop's ALSA configuration makes it (the pulse plug-in), `dmix` a box's.
        let follows: (String) -> Bool = { ["default", "pulse"].contains($0) }
        func wait(_ pcm: String, _ server: SoundServerReachability) -> String? {
            OutputScanner.defaultSinkWait(pcm, server: server, follows: follows)
        }
        let starting = SoundServerView(server: "PulseAudio (on PipeWire 0.3.65)", defaultSink: "auto_null", sinks: [])
        let card = ServerSink(name: "alsa_output.pci-0000_00_04.0.analog-stereo", description: "Built-in Audio",
                              properties: ["device.api": "alsa", "alsa.card": "0"])
        let ready = SoundServerView(server: "PulseAudio (on PipeWire 0.3.65)", defaultSink: card.name, sinks: [card])
        // A session starting: the server not answering yet, then answering without a sink.
        #expect(wait("default", .unknown) == "the sound server has not answered yet: plays once it does")
        #expect(wait("default", .connected(starting)) == "PulseAudio (on PipeWire 0.3.65) has no sink yet: plays on its default sink once it has one")
        #expect(wait("pulse", .connected(starting)) != nil)
        // The card's sink made: it plays. No server: as named, as before.
        #expect(wait("default", .connected(ready)) == nil)
        #expect(wait("default", .unreachable("Connection refused")) == nil)
        // Names that play to no default sink never wait for one.
        for pcm in ["dmix:CARD=Intel,DEV=0", "pulse:DEVICE=\(card.name)", "null"] {
            #expect(wait(pcm, .unknown) == nil)
            #expect(wait(pcm, .connected(starting)) == nil)
        }
    }
}
