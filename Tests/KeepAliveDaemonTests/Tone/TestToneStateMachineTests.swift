import KeepAlive
import Testing

@testable import KeepAliveDaemon

/// The daemon's test tone decided without a device: where it sounds (only where the keep-alive
/// plays, never above a ceiling, never on a player's stream), one at a time, and what each
/// output gets back afterwards.
@Suite("Test tone state machine")
struct TestToneStateMachineTests {
    typealias Output = TestToneStateMachine.Output

    static let card = "hw:CARD=PCH,DEV=3"
    static let sink = "pulse:DEVICE=tv"
    static let dac = "hw:CARD=DAC,DEV=0"

    /// Three outputs: the sink with its own settings (its buffer and sink), the card and the DAC
    /// with none.
    static var configuration: KeepAliveConfiguration {
        KeepAliveConfiguration(devices: [card, sink, dac],
                               outputSettings: [sink: OutputSettings(bufferDuration: .seconds(8), serverSink: "tv")])
    }

    static func playing(_ devices: String...) -> [Output] { devices.map { Output(device: $0, state: .playing) } }

    @Test("pressed: the tone's settings on every playing output over its own (its sink kept), the others untouched")
    func soundsWherePlaying() throws {
        var machine = TestToneStateMachine()
        let outputs = Self.playing(Self.card, Self.sink) + [Output(device: Self.dac, state: .paused(.lent))]
        guard case .sound(let devices, let next, let skipped) = machine.pressed(outputs: outputs, configuration: Self.configuration) else {
            Issue.record("no tone")
            return
        }
        #expect(devices == [Self.card, Self.sink] && skipped.isEmpty)
        #expect(machine.isSounding)
        #expect(next.devices == Self.configuration.devices)
        #expect(next.outputSettings[Self.dac] == nil, "a lent output keeps its settings")
        let sink = next.configuration(for: Self.sink)
        #expect(sink.serverSink == "tv" && sink.bufferDuration == TestTone.buffer && sink.volume == TestTone.level)
        #expect(sink.signal == TestTone.signal && sink.schedule == TestTone.schedule)
        #expect(next.configuration(for: Self.card).signal == TestTone.signal)
        try next.validate()
    }

    @Test("never on a carried player's stream, nor on an output held, waiting or starting: refused with each output's state")
    func refusedWithoutPlayingOutputs() {
        var machine = TestToneStateMachine()
        let outputs = [Output(device: Self.card, state: .playing, carrying: "mpd"),
                       Output(device: Self.sink, state: .paused(.switchedOff)),
                       Output(device: Self.dac, state: .waitingForDevice(.noDevice))]
        guard case .refuse(let why) = machine.pressed(outputs: outputs, configuration: Self.configuration) else {
            Issue.record("a tone on outputs that do not play the keep-alive")
            return
        }
        #expect(why.contains("no output plays the keep-alive") && why.contains("\(Self.card) carrying mpd") && why.contains("switched-off"), "\(why)")
        #expect(!machine.isSounding)
        guard case .refuse(let none) = machine.pressed(outputs: [], configuration: KeepAliveConfiguration(devices: [])) else {
            Issue.record("a tone without outputs")
            return
        }
        #expect(none.contains("no output"), "\(none)")
    }

    @Test("a --max-level below the tone's peak: that output left out and named; every one, or the global one, refused")
    func ceilings() throws {
        var low = Self.configuration
        low.outputSettings[Self.dac] = OutputSettings(ceiling: try Level(decibels: -40))
        var machine = TestToneStateMachine()
        guard case .sound(let devices, _, let skipped) = machine.pressed(outputs: Self.playing(Self.card, Self.dac), configuration: low) else {
            Issue.record("no tone")
            return
        }
        #expect(devices == [Self.card] && skipped == [Self.dac])

        var only = TestToneStateMachine()
        guard case .refuse(let why) = only.pressed(outputs: Self.playing(Self.dac), configuration: low) else {
            Issue.record("a tone above a ceiling")
            return
        }
        #expect(why.contains(Self.dac) && why.contains("below the tone's peak"), "\(why)")

        var global = Self.configuration
        global.defaults.ceiling = try Level(decibels: -35)
        var globally = TestToneStateMachine()
        guard case .refuse(let text) = globally.pressed(outputs: Self.playing(Self.card), configuration: global) else {
            Issue.record("a tone above the global ceiling")
            return
        }
        #expect(text.contains("--max-level"), "\(text)")
    }

    @Test("one tone at a time: a second press while it sounds is refused, and the first one's restore is unchanged")
    func oneAtATime() {
        var machine = TestToneStateMachine()
        guard case .sound(_, let toned, _) = machine.pressed(outputs: Self.playing(Self.card), configuration: Self.configuration) else {
            Issue.record("no tone")
            return
        }
        guard case .refuse(let why) = machine.pressed(outputs: Self.playing(Self.card), configuration: toned) else {
            Issue.record("a second tone over the first")
            return
        }
        #expect(why.contains("sounds already"), "\(why)")
        #expect(machine.restoreDue(outputs: Self.playing(Self.card), configuration: toned)
            == .restore(configuration: Self.configuration, reopen: [Self.card], replaced: []))
        #expect(!machine.isSounding)
    }

    @Test("restored: each output's own settings back (none where it had none), reopened unless carrying a player or held")
    func restores() {
        var machine = TestToneStateMachine()
        guard case .sound(_, let toned, _) = machine.pressed(outputs: Self.playing(Self.card, Self.sink, Self.dac), configuration: Self.configuration) else {
            Issue.record("no tone")
            return
        }
        // Meanwhile a player is carried on the card's stream and the DAC was lent.
        let later = [Output(device: Self.card, state: .playing, carrying: "mpd"), Output(device: Self.sink, state: .playing),
                     Output(device: Self.dac, state: .paused(.lent))]
        guard case .restore(let next, let reopen, let replaced) = machine.restoreDue(outputs: later, configuration: toned) else {
            Issue.record("no restore")
            return
        }
        #expect(next == Self.configuration)
        #expect(reopen == [Self.sink] && replaced.isEmpty)
    }

    @Test("a reload or rescan that replaced an output's settings meanwhile wins; an output gone is left out")
    func newerSettingsWin() throws {
        var machine = TestToneStateMachine()
        guard case .sound(_, var toned, _) = machine.pressed(outputs: Self.playing(Self.card, Self.sink, Self.dac), configuration: Self.configuration) else {
            Issue.record("no tone")
            return
        }
        let reloaded = OutputSettings(volume: try Level(decibels: -50))
        toned.outputSettings[Self.card] = reloaded
        toned.devices.removeAll { $0 == Self.dac }
        toned.outputSettings[Self.dac] = nil
        guard case .restore(let next, let reopen, let replaced) = machine.restoreDue(outputs: Self.playing(Self.card, Self.sink), configuration: toned) else {
            Issue.record("no restore")
            return
        }
        #expect(next.outputSettings[Self.card] == reloaded)
        #expect(next.outputSettings[Self.sink] == Self.configuration.outputSettings[Self.sink])
        #expect(next.devices == [Self.card, Self.sink])
        #expect(replaced == [Self.card] && reopen == [Self.card, Self.sink])
    }
}
