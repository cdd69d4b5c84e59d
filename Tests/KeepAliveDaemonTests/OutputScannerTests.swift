import Foundation
import KeepAlive
import Logging
import Testing

@testable import KeepAliveDaemon

/// The scanner's decisions that read nothing from the machine: without a selection it plans the
/// options' own outputs, and a rescan applies only what differs from what plays.
@Suite("OutputScanner: its decisions without a selection")
struct OutputScannerTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

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
        #expect(!scanner.rescan())
    }

    @Test("a rescan that finds what already plays changes nothing; one after the options changed applies them")
    func rescan() throws {
        let scanner = OutputScanner(logger: Self.logger)
        scanner.use(KeepAliveConfiguration(devices: ["null"]), choice: OutputChoice())
        let manager = try KeepAliveManager(configuration: scanner.planned(), logger: Self.logger)
        scanner.attach(manager)
        #expect(!scanner.rescan())
        scanner.use(KeepAliveConfiguration(devices: ["null", "other"]), choice: OutputChoice())
        #expect(scanner.rescan())
        #expect(manager.configuration.devices == ["null", "other"])
        #expect(!scanner.rescan())
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
}
