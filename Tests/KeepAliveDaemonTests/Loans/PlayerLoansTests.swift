import Foundation
import KeepAlive
import Logging
import Testing
import _KeepalivedControlProtocol
import TestSupport

@testable import KeepAliveDaemon

/// ``PlayerLoans`` with a real manager (its outputs open through the real alsa-lib) and the
/// kernel's view of the card device written by the test into a `/proc` of its own: a player's
/// release closes keepalived's output there, its play and its close are seen, and the device comes
/// back once it is free. (The decisions themselves are LoanStateMachineTests'; a real player on a
/// real card, through the `keepalived:` PCM, is PlayerReleaseTests' and the VM's.)
@Suite("Player loans: a release, the player's use and the take-back", .serialized)
struct PlayerLoansTests {
    static let logger = Logger.quiet
    static let card = HardwareDevice(card: 0, device: 0)

    let proc = NSTemporaryDirectory() + "loans-proc-\(UUID().uuidString)"
    let mainLoop = ThreadOwner.claimed("the test's thread")

    /// A manager playing `null` and waiting for `hw:0,0` (no card here), its scanner, the loans.
    func parts() throws -> (manager: KeepAliveManager, loans: PlayerLoans) {
        let scanner = OutputScanner(logger: Self.logger)
        var configuration = KeepAliveConfiguration(devices: ["hw:0,0", "null"])
        configuration.defaults.retry = RetryPolicy(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(200))
        scanner.use(configuration, choice: OutputChoice())
        let manager = try KeepAliveManager(configuration: scanner.planned(), logger: Self.logger)
        scanner.attach(manager)
        manager.start()
        return (manager, try PlayerLoans(manager: manager, scanner: scanner, logger: Self.logger, proc: proc))
    }

    /// The kernel's status of the card device's substream: open by `pid` in `format`, or closed.
    /// `format` nil: open, but no `hw_params` set yet (a probe's open).
    func substream(openBy pid: Int32?, format: String? = "S24_3LE", rate: Int = 96000) throws {
        let directory = proc + Self.card.procDirectory + "/sub0"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let status = pid.map { "state: RUNNING\nowner_pid   : \($0)\ntrigger_time: 1.0\n" } ?? "closed\n"
        let hwParams = pid == nil || format == nil ? "closed\n" : "access: RW_INTERLEAVED\nformat: \(format!)\nsubformat: STD\nchannels: 2\nrate: \(rate) (\(rate)/1)\n"
        try status.write(toFile: directory + "/status", atomically: true, encoding: .utf8)
        try hwParams.write(toFile: directory + "/hw_params", atomically: true, encoding: .utf8)
    }

    func state(of output: String, in manager: KeepAliveManager) -> KeepAliveState? {
        manager.outputs.first { $0.device == output }?.state
    }

    /// Looks at the lent devices (as the main loop does on the loans' timer) until `done`, within
    /// a bounded deadline.
    func process(_ loans: PlayerLoans, until done: () -> Bool) -> Bool {
        pollUntil(timeout: .seconds(10)) {
            if done() { return true }
            loans.process(on: mainLoop)
            return false
        }
    }

    @Test("a release closes the output on its card device only, the player's play is seen with its format, and its close gives the device back in that format")
    func releasePlayClose() throws {
        defer { try? FileManager.default.removeItem(atPath: proc) }
        let (manager, loans) = try parts()
        defer { manager.stop() }
        try substream(openBy: nil)

        let reply = loans.releaseReply(ReleaseRequest(card: 0, device: 0, program: "mpd"), pid: getpid(), arrived: .now) { false }
        #expect(reply.ok && reply.released == ["hw:0,0"], "\(reply)")
        #expect(state(of: "hw:0,0", in: manager) == .paused(.lent))
        #expect(state(of: "null", in: manager)?.pauseReason == nil, "the other output plays on")
        #expect(loans.reports.map(\.state) == ["lent"])
        #expect(loans.reports.first?.program == "mpd")

        let again = loans.releaseReply(ReleaseRequest(card: 0, device: 0, program: "mpd"), pid: getpid(), arrived: .now) { false }
        #expect(again.ok && again.released == [], "lent already: nothing more to close")

        try substream(openBy: getpid())
        #expect(process(loans) { loans.reports.first?.state == "playing" }, "\(loans.reports)")
        #expect(loans.reports.first?.format == "S24_3LE" && loans.reports.first?.rate == 96000)
        #expect(state(of: "hw:0,0", in: manager) == .paused(.lent), "held while the player plays")

        try substream(openBy: nil)
        #expect(process(loans) { loans.reports.isEmpty }, "taken back after the player's close: \(loans.reports)")
        #expect(state(of: "hw:0,0", in: manager)?.pauseReason == nil, "the output is no longer held")
        let format = manager.configuration.outputSettings["hw:0,0"]?.deviceFormat
        #expect(format == DeviceFormat(sampleFormat: .s24Packed, rate: 96000, channels: 2), "reopened in the player's format: \(String(describing: format))")
    }

    @Test("a loan says why its player was not carried, only for that player and only while it is lent")
    func whyNotCarried() throws {
        defer { try? FileManager.default.removeItem(atPath: proc) }
        let (manager, loans) = try parts()
        defer { manager.stop() }
        try substream(openBy: nil)

        loans.notCarried(Self.card, pid: getpid() + 1, because: "another player's reason")
        loans.notCarried(Self.card, pid: getpid(), because: "--no-carry")
        let reply = loans.releaseReply(ReleaseRequest(card: 0, device: 0, program: "mpd"), pid: getpid(), arrived: .now) { false }
        #expect(reply.ok)
        #expect(loans.reports.map(\.notCarriedBecause) == ["--no-carry"])

        try substream(openBy: nil)
        #expect(process(loans) { loans.reports.isEmpty }, "taken back: \(loans.reports)")
        // The next player's ask came without a carry request (an older plug-in): no reason shown.
        let next = loans.releaseReply(ReleaseRequest(card: 0, device: 0, program: "aplay"), pid: getpid(), arrived: .now) { false }
        #expect(next.ok)
        #expect(loans.reports.map(\.notCarriedBecause) == [nil])
    }

    @Test("a probe's loan (opened, no format set) gives the device back with the outputs still in the last player's format")
    func probeKeepsFormat() throws {
        defer { try? FileManager.default.removeItem(atPath: proc) }
        let (manager, loans) = try parts()
        defer { manager.stop() }
        try substream(openBy: nil)
        for format in ["S24_3LE", nil] as [String?] {
            #expect(loans.releaseReply(ReleaseRequest(card: 0, device: 0, program: format == nil ? "probe" : "mpd"), pid: getpid(), arrived: .now) { false }.ok)
            try substream(openBy: getpid(), format: format)
            #expect(process(loans) { loans.reports.first?.state == "playing" }, "\(loans.reports)")
            try substream(openBy: nil)
            #expect(process(loans) { loans.reports.isEmpty }, "\(loans.reports)")
            #expect(manager.configuration.outputSettings["hw:0,0"]?.deviceFormat == DeviceFormat(sampleFormat: .s24Packed, rate: 96000, channels: 2),
                    "after \(format == nil ? "the probe" : "the player"): \(String(describing: manager.configuration.outputSettings["hw:0,0"]?.deviceFormat))")
        }
    }

    @Test("a player that is gone gives the device back at the next look")
    func playerGone() throws {
        defer { try? FileManager.default.removeItem(atPath: proc) }
        let (manager, loans) = try parts()
        defer { manager.stop() }
        try substream(openBy: nil)
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()

        let reply = loans.releaseReply(ReleaseRequest(card: 0, device: 0, program: "gone"), pid: child.processIdentifier, arrived: .now) { false }
        #expect(reply.released == ["hw:0,0"])
        #expect(process(loans) { loans.reports.isEmpty }, "\(loans.reports)")
        #expect(state(of: "hw:0,0", in: manager)?.pauseReason == nil)
    }

    @Test("a release the player stopped waiting for is not applied; one for a device keepalived does not play on closes nothing")
    func notApplied() throws {
        defer { try? FileManager.default.removeItem(atPath: proc) }
        let (manager, loans) = try parts()
        defer { manager.stop() }
        let late = loans.releaseReply(ReleaseRequest(card: 0, device: 0, program: "mpd"), pid: getpid(), arrived: .now) { true }
        #expect(!late.ok && late.error == "the player stopped waiting")
        #expect(state(of: "hw:0,0", in: manager)?.pauseReason == nil)
        #expect(loans.reports.isEmpty)

        let elsewhere = loans.releaseReply(ReleaseRequest(card: 3, device: 0, program: "mpd"), pid: getpid(), arrived: .now) { false }
        #expect(elsewhere.ok && elsewhere.released == [])
        #expect(manager.outputs.allSatisfy { $0.state.pauseReason == nil })
    }
}

extension PlayerLoans {
    /// A release as the control socket's thread answers it: its reply, once keepalived's outputs
    /// on the device are closed (on the loans' own thread), within a bounded deadline.
    func releaseReply(_ request: ReleaseRequest, pid: Int32, arrived: ContinuousClock.Instant, hungUp: () -> Bool) -> ControlReply {
        switch release(request, pid: pid, arrived: arrived, hungUp: hungUp) {
        case .reply(let reply):
            return reply
        case .afterClose(let closing, let reply):
            var descriptor = pollfd(fd: closing.descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 10_000) == 1, closing.isFinished else { return .failure("the outputs did not close within 10 s") }
            return reply
        case .afterPowerOn:
            return .failure("held for the power, which these tests never ask for")
        }
    }
}
