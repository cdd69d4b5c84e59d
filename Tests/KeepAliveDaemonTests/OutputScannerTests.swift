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

    @Test("sinks and plug-ins open no card, so reserve none")
    func cardsOpened() {
        let scanner = OutputScanner(logger: Self.logger)
        #expect(scanner.cardsOpened(by: ["null", "pulse", "default", "pulse:DEVICE=alsa_output.x"]).isEmpty)
    }
}
