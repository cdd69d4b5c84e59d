import Foundation
import KeepAlive
import Testing

@testable import KeepAliveDaemon

@Suite("Loans: a card device lent to a player comes back when the kernel shows it closed, in the player's format")
struct LoanStateMachineTests {
    let device = HardwareDevice(card: 0, device: 0)
    let mpd = LoanStateMachine.Holder(pid: 812, program: "mpd")
    let start = ContinuousClock.now
    let cd = PlayerFormat(name: "S16_LE", rate: 44100, channels: 2)
    let hiRes = PlayerFormat(name: "S32_LE", rate: 96000, channels: 2)

    func open(_ format: PlayerFormat? = nil) -> SubstreamState { SubstreamState(openBy: 813, format: format) }
    let closed = SubstreamState()

    /// Released at `start`, its outputs closed at once.
    func lent() -> LoanStateMachine {
        var machine = LoanStateMachine()
        #expect(machine.releaseAsked(device, by: mpd, outputs: ["hw:0,0"], at: start) == .close(["hw:0,0"]))
        machine.outputsClosed(device, at: start)
        return machine
    }

    @Test("a release closes the outputs on the device; nothing held, nothing to close")
    func release() {
        var machine = LoanStateMachine()
        #expect(machine.releaseAsked(device, by: mpd, outputs: [], at: start) == .nothingHeld)
        #expect(machine.devices.isEmpty)
        #expect(machine.releaseAsked(device, by: mpd, outputs: ["hw:0,0", "dmix:0"], at: start) == .close(["hw:0,0", "dmix:0"]))
        #expect(machine.devices == [device])
        #expect(machine.isLent(device))
        machine.outputsClosed(device, at: start)
        #expect(machine.nextDeadline == start + LoanStateMachine.openWindow)
    }

    @Test("while its outputs close: no deadline, nothing the kernel shows counts, a second player waits for the close; the window starts at the close")
    func whileClosing() {
        var machine = LoanStateMachine()
        #expect(machine.releaseAsked(device, by: mpd, outputs: ["hw:0,0"], at: start) == .close(["hw:0,0"]))
        #expect(machine.isLent(device))
        #expect(machine.nextDeadline == nil, "no look is due while keepalived's own outputs still close")
        let later = start + .seconds(5)
        // keepalived's own open is what /proc shows; the player is gone, or late: still lent.
        for alive in [true, false] {
            #expect(machine.observed(device, open(cd), holderAlive: alive, at: later) == .none)
            #expect(machine.observed(device, closed, holderAlive: alive, at: later) == .none)
        }
        #expect(machine.loans.first?.playing == false, "keepalived's own open is not the player's")
        let other = LoanStateMachine.Holder(pid: 900, program: "aplay")
        #expect(machine.releaseAsked(device, by: other, outputs: ["hw:0,0"], at: later) == .afterClose)
        #expect(machine.loans.first?.loan.holder == mpd)
        machine.outputsClosed(device, at: later)
        #expect(machine.nextDeadline == later + LoanStateMachine.openWindow)
        #expect(machine.releaseAsked(device, by: other, outputs: [], at: later) == .alreadyLent)
        #expect(machine.observed(device, closed, holderAlive: true, at: later + LoanStateMachine.openWindow - .milliseconds(1)) == .none)
        #expect(machine.observed(device, closed, holderAlive: true, at: later + LoanStateMachine.openWindow) == .takeBack(outputs: ["hw:0,0"], format: nil, because: .neverOpened))
    }

    @Test("outputs closed for a device no release is closing is a caller's bug")
    func closedWithoutRelease() async {
        await #expect(processExitsWith: .failure) {
            var machine = LoanStateMachine()
            machine.outputsClosed(HardwareDevice(card: 0, device: 0), at: .now)
        }
        await #expect(processExitsWith: .failure) {
            var machine = LoanStateMachine()
            let device = HardwareDevice(card: 0, device: 0)
            _ = machine.releaseAsked(device, by: LoanStateMachine.Holder(pid: 1, program: nil), outputs: ["hw:0,0"], at: .now)
            machine.outputsClosed(device, at: .now)
            machine.outputsClosed(device, at: .now)
        }
    }

    @Test("a second release while lent closes nothing more (a second player gets busy from the hardware)")
    func secondRelease() {
        var machine = lent()
        let other = LoanStateMachine.Holder(pid: 900, program: "aplay")
        #expect(machine.releaseAsked(device, by: other, outputs: [], at: start) == .alreadyLent)
        _ = machine.observed(device, open(cd), holderAlive: true, at: start)
        #expect(machine.releaseAsked(device, by: other, outputs: [], at: start) == .alreadyLent)
        #expect(machine.loans.first?.loan.holder == mpd)
    }

    @Test("lent, then open, then closed: taken back in the last format seen")
    func playThenClose() {
        var machine = lent()
        #expect(machine.observed(device, closed, holderAlive: true, at: start + .milliseconds(1)) == .none)
        #expect(machine.observed(device, open(), holderAlive: true, at: start + .milliseconds(2)) == .none)
        #expect(machine.loans.first?.playing == true)
        #expect(machine.nextDeadline == nil)
        #expect(machine.observed(device, open(cd), holderAlive: true, at: start + .seconds(1)) == .none)
        #expect(machine.observed(device, open(hiRes), holderAlive: true, at: start + .seconds(2)) == .none)
        // hw_params unreadable for a moment (between a player's hw_free and hw_params): the last one stands.
        #expect(machine.observed(device, open(), holderAlive: true, at: start + .seconds(3)) == .none)
        #expect(machine.loans.first?.loan.format == hiRes)
        // Closed: kept for the grace in which a player reopens between two tracks.
        let closedAt = start + .seconds(4)
        #expect(machine.observed(device, closed, holderAlive: true, at: closedAt) == .none)
        #expect(machine.nextDeadline == closedAt + LoanStateMachine.reopenGrace)
        #expect(machine.observed(device, closed, holderAlive: true, at: closedAt + LoanStateMachine.reopenGrace - .milliseconds(1)) == .none)
        #expect(machine.observed(device, closed, holderAlive: true, at: closedAt + LoanStateMachine.reopenGrace) == .takeBack(outputs: ["hw:0,0"], format: hiRes, because: .closed))
        #expect(machine.devices.isEmpty)
    }

    @Test("a player that closes and reopens within the grace (MPD between tracks of two formats) keeps the device; the last format goes back")
    func reopenWithinGrace() {
        var machine = lent()
        #expect(machine.observed(device, open(cd), holderAlive: true, at: start) == .none)
        #expect(machine.observed(device, closed, holderAlive: true, at: start + .seconds(3)) == .none)
        // Its reopen through keepalived: asks again: nothing to close, the loan goes on.
        #expect(machine.releaseAsked(device, by: mpd, outputs: [], at: start + .seconds(3) + .milliseconds(5)) == .lentAgain)
        #expect(machine.observed(device, open(hiRes), holderAlive: true, at: start + .seconds(3) + .milliseconds(10)) == .none)
        #expect(machine.loans.first?.playing == true)
        #expect(machine.observed(device, closed, holderAlive: true, at: start + .seconds(9)) == .none)
        #expect(machine.observed(device, closed, holderAlive: true, at: start + .seconds(10)) == .takeBack(outputs: ["hw:0,0"], format: hiRes, because: .closed))
    }

    @Test("a player that dies with the device closed: taken back at once, no grace")
    func diedAfterPlaying() {
        var machine = lent()
        _ = machine.observed(device, open(cd), holderAlive: true, at: start)
        #expect(machine.observed(device, closed, holderAlive: false, at: start + .seconds(1)) == .takeBack(outputs: ["hw:0,0"], format: cd, because: .playerGone))
    }

    @Test("a loan that never set a format (a probe's open) goes back with none: its outputs keep the one a player set before (OutputScanner's record)")
    func probeKeepsFormat() {
        var machine = lent()
        _ = machine.observed(device, open(cd), holderAlive: true, at: start)
        _ = machine.observed(device, closed, holderAlive: false, at: start + .seconds(1))
        #expect(machine.releaseAsked(device, by: mpd, outputs: ["hw:0,0"], at: start + .seconds(2)) == .close(["hw:0,0"]))
        machine.outputsClosed(device, at: start + .seconds(2))
        #expect(machine.observed(device, open(), holderAlive: true, at: start + .seconds(2)) == .none)
        #expect(machine.observed(device, closed, holderAlive: false, at: start + .seconds(3)) == .takeBack(outputs: ["hw:0,0"], format: nil, because: .playerGone))
    }

    @Test("an output that opens on a lent device later is held with the loan's, once")
    func foundLater() {
        var machine = lent()
        #expect(machine.found(["hw:0,0", "default"], on: device) == ["default"])
        #expect(machine.found(["default"], on: device) == [])
        #expect(machine.found(["default"], on: HardwareDevice(card: 1, device: 0)) == [])
        #expect(machine.observed(device, closed, holderAlive: false, at: start) == .takeBack(outputs: ["hw:0,0", "default"], format: nil, because: .playerGone))
    }

    @Test("a player that never opens it: taken back when its window ends, not before")
    func neverOpened() {
        var machine = lent()
        #expect(machine.observed(device, closed, holderAlive: true, at: start + LoanStateMachine.openWindow - .milliseconds(1)) == .none)
        #expect(machine.observed(device, closed, holderAlive: true, at: start + LoanStateMachine.openWindow) == .takeBack(outputs: ["hw:0,0"], format: nil, because: .neverOpened))
    }

    @Test("a player that dies before it opens: taken back at once")
    func diedBeforeOpen() {
        var machine = lent()
        #expect(machine.observed(device, closed, holderAlive: false, at: start + .milliseconds(5)) == .takeBack(outputs: ["hw:0,0"], format: nil, because: .playerGone))
    }

    @Test("a player that dies while a child still holds the device open: kept until it is closed")
    func diedButOpen() {
        var machine = lent()
        #expect(machine.observed(device, open(cd), holderAlive: false, at: start) == .none)
        #expect(machine.observed(device, open(cd), holderAlive: false, at: start + .seconds(10)) == .none)
        #expect(machine.observed(device, closed, holderAlive: false, at: start + .seconds(11)) == .takeBack(outputs: ["hw:0,0"], format: cd, because: .playerGone))
    }

    @Test("devices are independent, and lent again after their return")
    func independentDevices() {
        var machine = lent()
        let hdmi = HardwareDevice(card: 0, device: 3)
        #expect(machine.releaseAsked(hdmi, by: mpd, outputs: ["hw:0,3"], at: start) == .close(["hw:0,3"]))
        machine.outputsClosed(hdmi, at: start)
        #expect(machine.devices == [device, hdmi])
        #expect(machine.observed(hdmi, closed, holderAlive: false, at: start) == .takeBack(outputs: ["hw:0,3"], format: nil, because: .playerGone))
        #expect(machine.devices == [device])
        #expect(machine.releaseAsked(hdmi, by: mpd, outputs: ["hw:0,3"], at: start) == .close(["hw:0,3"]))
    }

    /// Every state × every observation: the table the runtime relies on.
    @Test("every state and observation", arguments: [false, true], [false, true])
    func table(open isOpen: Bool, alive: Bool) {
        for playing in [false, true] {
            for late in [false, true] {
                var machine = lent()
                if playing { _ = machine.observed(device, open(cd), holderAlive: true, at: start) }
                let at = start + (late ? LoanStateMachine.openWindow : .zero)
                let action = machine.observed(device, isOpen ? open(cd) : closed, holderAlive: alive, at: at)
                // Closed after playing: back at once only when its player is gone (else after the grace).
                let expectBack = !isOpen && (playing ? !alive : (!alive || late))
                #expect((action != .none) == expectBack, "playing \(playing) late \(late) open \(isOpen) alive \(alive)")
                #expect(machine.isLent(device) == !expectBack)
            }
        }
    }
}

@Suite("The kernel's view of a card device: /proc/asound's status and hw_params")
struct SubstreamStateTests {
    @Test("hw_params: format, rate, channels; closed or partial is none")
    func hwParams() {
        let text = "access: RW_INTERLEAVED\nformat: S16_LE\nsubformat: STD\nchannels: 2\nrate: 44100 (44100/1)\nperiod_size: 1024\nbuffer_size: 4096\n"
        #expect(SubstreamState.format(hwParams: text) == PlayerFormat(name: "S16_LE", rate: 44100, channels: 2))
        #expect(SubstreamState.format(hwParams: "closed\n") == nil)
        #expect(SubstreamState.format(hwParams: "format: S24_3LE\nchannels: 6\n") == nil)
        let packed = PlayerFormat(name: "S24_3LE", rate: 96000, channels: 6)
        #expect(SubstreamState.format(hwParams: "format: S24_3LE\nchannels: 6\nrate: 96000 (96000/1)\n") == packed)
        #expect(packed.deviceFormat.sampleFormat == .s24Packed)
        // A format keepalived does not write: the device comes back in the player's rate and channels only.
        #expect(PlayerFormat(name: "S20_3LE", rate: 96000, channels: 6).deviceFormat.sampleFormat == nil)
        #expect(PlayerFormat(name: "S32_LE", rate: 48000, channels: 2).deviceFormat.sampleFormat == .s32)
    }

    @Test("read: open by its owner thread, with its format; closed without")
    func read() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("substream-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: url) }
        func write(_ path: String, _ text: String) throws {
            let file = url.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: file, atomically: true, encoding: .utf8)
        }
        let root = url.path
        try write("asound/card1/pcm3p/sub0/status", "state: RUNNING\nowner_pid   : 4242\ntrigger_time: 1.0\n")
        try write("asound/card1/pcm3p/sub0/hw_params", "format: S16_LE\nchannels: 2\nrate: 48000 (48000/1)\n")
        try write("asound/card1/pcm4p/sub0/status", "closed\n")
        try write("asound/card1/pcm4p/sub0/hw_params", "closed\n")
        #expect(SubstreamState.read(HardwareDevice(card: 1, device: 3), proc: root) == SubstreamState(openBy: 4242, format: PlayerFormat(name: "S16_LE", rate: 48000, channels: 2)))
        #expect(SubstreamState.read(HardwareDevice(card: 1, device: 4), proc: root) == SubstreamState())
        #expect(SubstreamState.read(HardwareDevice(card: 7, device: 0), proc: root) == SubstreamState())
    }
}
