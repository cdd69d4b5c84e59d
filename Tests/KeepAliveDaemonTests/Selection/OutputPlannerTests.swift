import KeepAlive
import Testing

@testable import KeepAliveDaemon

/// The rules by which a choice picks outputs from what the machine offers, without a server or a
/// card: a desktop whose server owns the cards, a headless box without one, the moment before the
/// server answered, a server gone for a restart, a card another program reserved.
@Suite("OutputPlanner: which outputs a choice keeps awake")
struct OutputPlannerTests {
    static let hints = [
        ALSADevice(name: "hw:CARD=Intel,DEV=0", description: "HDA Intel, ALC887 Analog"),
        ALSADevice(name: "dmix:CARD=Intel,DEV=0", description: "HDA Intel, ALC887 Analog\nDirect sample mixing device"),
        ALSADevice(name: "dmix:CARD=Intel,DEV=3", description: "HDA Intel, HDMI 0\nDirect sample mixing device"),
        ALSADevice(name: "dmix:CARD=DAC,DEV=0", description: "USB DAC, USB Audio\nDirect sample mixing device"),
        ALSADevice(name: "my-receiver", description: "Receiver via S/PDIF"),
    ]
    static let cards = ["Intel": 0, "DAC": 1]

    static func sink(_ name: String, _ description: String, _ properties: [String: String]) -> ServerSink {
        ServerSink(name: name, description: description, properties: properties)
    }

    static let hdmi = sink("alsa_output.pci.hdmi-stereo", "Built-in Audio Digital Stereo (HDMI)",
                           ["device.api": "alsa", "alsa.card": "0", "device.profile.name": "hdmi-stereo"])
    static let analog = sink("alsa_output.pci.analog-stereo", "Built-in Audio Analog Stereo",
                             ["device.api": "alsa", "alsa.card": "0", "device.profile.name": "analog-stereo"])
    static let speaker = sink("bluez_output.00_11.1", "JBL Flip 5", ["device.api": "bluez5", "device.bus": "bluetooth"])
    static let effects = sink("easyeffects_sink", "Easy Effects Sink", [:])
    static let desktop = SoundServerView(server: "PulseAudio (on PipeWire 0.3.65) 15.0.0", sinks: [hdmi, analog, speaker, effects])

    static func offer(_ server: SoundServerReachability, reserved: [Int: String] = [:], former: Set<Int> = []) -> OutputOffer {
        OutputOffer(hints: hints, server: server, reservedCards: reserved, formerServerCards: former, cardIndices: cards)
    }

    static func picks(_ choice: OutputChoice, _ offer: OutputOffer) -> [String] {
        OutputPlanner.pick(choice, in: offer).map(\.pcm)
    }

    @Test("the card device an output plays to: its open handle's, else a name that numbers the kernel's device (hw, plughw, dmix), else unknown")
    func hardware() {
        let offer = Self.offer(.unreachable("none"))
        func named(_ pcm: String) -> HardwareDevice? { OutputPlanner.hardware(of: pcm, opened: nil, in: offer) }
        #expect(named("hw:CARD=Intel,DEV=3") == HardwareDevice(card: 0, device: 3))
        #expect(named("hw:1,2") == HardwareDevice(card: 1, device: 2))
        #expect(named("hw:1") == HardwareDevice(card: 1, device: 0))
        #expect(named("plughw:CARD=DAC") == HardwareDevice(card: 1, device: 0))
        #expect(named("dmix:CARD=Intel,DEV=0") == HardwareDevice(card: 0, device: 0))
        #expect(named("hw:CARD=Intel,DEV=x") == nil)
        // Names that count devices their own way, or name none: never guessed.
        #expect(named("hdmi:CARD=Intel,DEV=1") == nil)
        #expect(named("sysdefault:CARD=Intel") == nil)
        #expect(named("front:CARD=Intel,DEV=0") == nil)
        #expect(named("default") == nil)
        #expect(named("pulse:DEVICE=tv") == nil)
        #expect(named("hw:CARD=Nope,DEV=0") == nil)
        // What alsa-lib said of the open handle wins over any name.
        let hdmi = HardwareDevice(card: 0, device: 7)
        #expect(OutputPlanner.hardware(of: "hdmi:CARD=Intel,DEV=1", opened: hdmi, in: offer) == hdmi)
        #expect(OutputPlanner.hardware(of: "default", opened: HardwareDevice(card: 1, device: 0), in: offer) == HardwareDevice(card: 1, device: 0))
        #expect(OutputPlanner.hardware(of: "hw:0,0", opened: hdmi, in: offer) == hdmi)
    }

    @Test("on a desktop, the server's physical sinks, never a card's dmix: not the cards it owns, nor one it does not list yet")
    func desktop() {
        let offer = Self.offer(.connected(Self.desktop))
        #expect(Self.picks(OutputChoice(selection: .all), offer) == ["my-receiver", Self.hdmi.pcm, Self.analog.pcm])
        #expect(Self.picks(OutputChoice(selection: .digital), offer) == ["my-receiver", Self.hdmi.pcm])
        #expect(Self.picks(OutputChoice(selection: .analog), offer) == [Self.analog.pcm])
        #expect(OutputPlanner.cardRefusal("dmix:CARD=Intel,DEV=3", in: offer)?.contains("owns card 0") == true)
        // A USB DAC whose node udev just made: the server is about to claim it.
        #expect(OutputPlanner.cardRefusal("dmix:CARD=DAC,DEV=0", in: offer)?.contains("does not list card 1") == true)
        // Replugged: it was the server's before, and is again.
        let replugged = Self.offer(.connected(Self.desktop), former: [1])
        #expect(OutputPlanner.cardRefusal("dmix:CARD=DAC,DEV=0", in: replugged)?.contains("owns card 1") == true)
    }

    @Test("Bluetooth sinks only with --bluetooth; alone, only them")
    func bluetooth() {
        let offer = Self.offer(.connected(Self.desktop))
        #expect(!Self.picks(OutputChoice(selection: .all), offer).contains(Self.speaker.pcm))
        #expect(Self.picks(OutputChoice(selection: .all, bluetooth: true), offer).contains(Self.speaker.pcm))
        #expect(Self.picks(OutputChoice(bluetooth: true), offer) == [Self.speaker.pcm])
        let verdict = OutputPlanner.verdict(for: Self.speaker, choice: OutputChoice(selection: .all))
        #expect(verdict.pickedBy == ["--bluetooth"])
        #expect(verdict.notPickedBecause["--all"] == "a Bluetooth sink: only with --bluetooth or by name")
        #expect(!verdict.picked)
    }

    @Test("virtual sinks are never picked, whatever the choice")
    func virtualSinks() {
        let verdict = OutputPlanner.verdict(for: Self.effects, choice: OutputChoice(selection: .all, bluetooth: true))
        #expect(verdict.pickedBy.isEmpty)
        #expect(!verdict.picked)
        #expect(Set(verdict.notPickedBecause.keys) == Set(SinkVerdict.options))
    }

    @Test("an exclusion matches a sink's name, its PCM or its description")
    func exclusions() throws {
        let offer = Self.offer(.connected(Self.desktop))
        for pattern in ["*hdmi*", "Built-in Audio Digital*", "pulse:DEVICE=alsa_output.pci.hdmi*"] {
            let choice = OutputChoice(selection: .all, exclusions: [try OutputExclusion(pattern)])
            #expect(!Self.picks(choice, offer).contains(Self.hdmi.pcm), "\(pattern)")
            #expect(Self.picks(choice, offer).contains(Self.analog.pcm), "\(pattern)")
            #expect(OutputPlanner.verdict(for: Self.hdmi, choice: choice).notPickedBecause["--all"] == "excluded by --exclude '\(pattern)'")
        }
    }

    @Test("before the server answers no card is picked; without a server the cards are keepalived's")
    func serverNotYetOrNone() {
        #expect(Self.picks(OutputChoice(selection: .all), Self.offer(.unknown)) == ["my-receiver"])
        #expect(Self.picks(OutputChoice(selection: .all), Self.offer(.unreachable("Connection refused"))) == [
            "dmix:CARD=Intel,DEV=0", "dmix:CARD=Intel,DEV=3", "dmix:CARD=DAC,DEV=0", "my-receiver",
        ])
    }

    @Test("a server gone for a restart keeps its cards; a reserved card is never opened")
    func goneAndReserved() {
        let gone = Self.offer(.unreachable("Connection refused"), former: [0])
        #expect(Self.picks(OutputChoice(selection: .all), gone) == ["dmix:CARD=DAC,DEV=0", "my-receiver"])
        #expect(OutputPlanner.cardRefusal("dmix:CARD=Intel,DEV=0", in: gone)?.contains("does not answer") == true)
        let reserved = Self.offer(.unreachable("Connection refused"), reserved: [1: "JACK (hw:1)"])
        #expect(Self.picks(OutputChoice(selection: .all), reserved) == ["dmix:CARD=Intel,DEV=0", "dmix:CARD=Intel,DEV=3", "my-receiver"])
        #expect(OutputPlanner.cardRefusal("dmix:CARD=DAC,DEV=0", in: reserved) == "card 1 is reserved by JACK (hw:1): left to it until it lets go")
    }

    @Test("a card another user's program has open, or another user's server held, is left alone; our own user's is not judged here")
    func otherUsers() {
        var offer = Self.offer(.unreachable("No such file or directory"))
        offer.uid = 110
        offer.holders = [0: [CardHolder(pid: 812, uid: 1000, command: "pulseaudio")], 1: [CardHolder(pid: 900, uid: 110, command: "aplay")]]
        #expect(Self.picks(OutputChoice(selection: .all), offer) == ["dmix:CARD=DAC,DEV=0", "my-receiver"])
        #expect(OutputPlanner.cardRefusal("dmix:CARD=Intel,DEV=0", in: offer)
            == "card 0 is open by pulseaudio (pid 812, uid 1000), another user's program: left to it")
        offer.holders = [:]
        offer.otherUsersServerCards = [0: "pulseaudio (pid 812, uid 1000)"]
        #expect(Self.picks(OutputChoice(selection: .all), offer) == ["dmix:CARD=DAC,DEV=0", "my-receiver"])
        #expect(OutputPlanner.cardRefusal("dmix:CARD=Intel,DEV=3", in: offer)
            == "card 0 belongs to pulseaudio (pid 812, uid 1000), another user's sound server: left to it")
    }

    @Test("the card a PCM name plays to, by index or id", arguments: [
        ("dmix:CARD=Intel,DEV=3", 0), ("plughw:CARD=DAC", 1), ("hw:1,0", 1), ("plughw:0", 0), ("dmix:CARD=\"DAC\",DEV=0", 1),
    ])
    func cards(_ pcm: String, _ card: Int) {
        #expect(OutputPlanner.card(of: pcm, in: Self.offer(.unknown)) == card)
    }

    @Test("names that name no card", arguments: ["default", "pulse", "pulse:DEVICE=alsa_output.x", "my-receiver", "dmix:CARD=Nope,DEV=0"])
    func noCard(_ pcm: String) {
        #expect(OutputPlanner.card(of: pcm, in: Self.offer(.unknown)) == nil)
    }

    @Test("what a choice says it waits for, and its flags")
    func choiceWords() {
        #expect(OutputChoice(selection: .all).awaited == "output")
        #expect(OutputChoice(selection: .digital, bluetooth: true).awaited == "digital output")
        #expect(OutputChoice(bluetooth: true).awaited == "Bluetooth sink")
        #expect(OutputChoice(selection: .analog, bluetooth: true).flags == ["--analog", "--bluetooth"])
        #expect(OutputChoice().isEmpty)
    }
}

@Suite("BluetoothDefaults: a Bluetooth sink's own signal, under the user's settings")
struct BluetoothDefaultsTests {
    @Test("with nothing of the user's: a 30 Hz sine at −50 dBFS, 2 s in every 30")
    func defaults() {
        let settings = BluetoothDefaults.settings(under: nil, ceiling: .defaultCeiling)
        #expect(settings.signal == .sine(frequency: 30))
        #expect(abs((settings.volume?.linear ?? 0) - 0.0031623) < 1e-6)
        #expect(settings.schedule == PlaySchedule(playFor: .seconds(2), pauseFor: .seconds(28), fade: .milliseconds(200)))
    }

    @Test("every setting the user gave wins; the volume stays under both ceilings")
    func userWins() throws {
        let own = OutputSettings(signal: .pink, volume: try Level(parsing: "-60dB"))
        let settings = BluetoothDefaults.settings(under: own, ceiling: .defaultCeiling)
        #expect(settings.signal == .pink)
        #expect(settings.volume == own.volume)
        #expect(settings.schedule != nil)
        let low = BluetoothDefaults.settings(under: nil, ceiling: try Level(parsing: "-60dB"))
        #expect(low.volume == (try Level(parsing: "-60dB")))
        let ownCeiling = BluetoothDefaults.settings(under: OutputSettings(ceiling: try Level(parsing: "-55dB")), ceiling: .defaultCeiling)
        #expect(ownCeiling.volume == (try Level(parsing: "-55dB")))
        let clip = BluetoothDefaults.settings(under: OutputSettings(clip: .embedded), ceiling: .defaultCeiling)
        #expect(clip.signal == nil, "a clip given for the output is what it plays")
    }
}

@Suite("SinkDefaults: a sink's own buffer and rate and, for Bluetooth, its own signal")
struct SinkDefaultsTests {
    @Test("a sink asks for a 6 s buffer and its own rate; a Bluetooth one gets its signal too; a card-like kind gets nothing else")
    func defaults() {
        let hdmi = SinkDefaults.settings(for: .hdmi, rate: 44100, under: nil, buffer: SinkDefaults.buffer, ceiling: .defaultCeiling)
        var expected = OutputSettings(bufferDuration: .seconds(8))
        expected.generatedSignalRate = 44100
        #expect(hdmi == expected)
        let bluetooth = SinkDefaults.settings(for: .bluetooth, rate: 48000, under: nil, buffer: SinkDefaults.buffer, ceiling: .defaultCeiling)
        #expect(bluetooth.signal == BluetoothDefaults.signal && bluetooth.bufferDuration == .seconds(8) && bluetooth.generatedSignalRate == 48000)
        // A server that gives no rate: generated signals keep the library's 48 kHz.
        #expect(SinkDefaults.settings(for: .hdmi, rate: nil, under: nil, buffer: SinkDefaults.buffer, ceiling: .defaultCeiling).generatedSignalRate == nil)
    }

    @Test("--buffer (no sink buffer) and an output's own buffer win")
    func userWins() {
        #expect(SinkDefaults.settings(for: .analog, rate: nil, under: nil, buffer: nil, ceiling: .defaultCeiling) == OutputSettings())
        let own = OutputSettings(bufferDuration: .seconds(1))
        #expect(SinkDefaults.settings(for: .usb, rate: 44100, under: own, buffer: SinkDefaults.buffer, ceiling: .defaultCeiling).bufferDuration == .seconds(1))
    }

    @Test("the sink's rate reaches the output's configuration, and a configuration without one renders at 48 kHz")
    func rateApplied() {
        var settings = OutputSettings()
        settings.generatedSignalRate = 44100
        #expect(OutputConfiguration().applying(settings).generatedSignalRate == 44100)
        #expect(OutputConfiguration().applying(OutputSettings()).generatedSignalRate == nil)
    }

    @Test("an output a server's sink carries plays through keepalived's own stream into it, at its rate; the default sink's names follow the server's default; other names are left as they are")
    func playThroughSinks() {
        var hdmi = OutputPlannerTests.hdmi
        hdmi.sampleRate = 44100
        let view = SoundServerView(server: "pulseaudio 16.1", defaultSink: OutputPlannerTests.analog.name, sinks: [hdmi, OutputPlannerTests.analog, OutputPlannerTests.speaker])
        let own = OutputSettings(bufferDuration: .seconds(1), serverSink: "chosen")
        var configuration = KeepAliveConfiguration(devices: ["pulse", hdmi.pcm, OutputPlannerTests.speaker.pcm, "hw:CARD=Intel,DEV=0", "pulse:DEVICE=gone", "mine"])
        configuration.outputSettings["mine"] = own
        let kept = OutputPlanner.playThroughSinks(&configuration, view: view, inForce: [:], sinkBuffer: SinkDefaults.buffer)
        // The default sink is the server's to follow: its stream is not one the watcher keeps.
        #expect(kept == [hdmi.name, OutputPlannerTests.speaker.name])
        #expect(configuration.outputSettings["pulse"]?.serverSink == ServerDefaultOutput.defaultSink)
        #expect(configuration.outputSettings["pulse"]?.bufferDuration == SinkDefaults.buffer)
        let tv = configuration.outputSettings[hdmi.pcm]
        #expect(tv?.serverSink == hdmi.name && tv?.deviceFormat == DeviceFormat(rate: 44100) && tv?.bufferDuration == SinkDefaults.buffer)
        #expect(configuration.outputSettings[OutputPlannerTests.speaker.pcm]?.signal == BluetoothDefaults.signal)
        #expect(configuration.outputSettings["hw:CARD=Intel,DEV=0"] == nil)
        #expect(configuration.outputSettings["pulse:DEVICE=gone"] == nil, "a sink the server does not list: the plug-in, which retries")
        #expect(configuration.outputSettings["mine"] == own, "an output that names its sink already is left alone")

        // No sink buffer (--buffer given): the configuration's own buffer, not the sink's 8 s.
        var buffered = KeepAliveConfiguration(devices: [hdmi.pcm])
        _ = OutputPlanner.playThroughSinks(&buffered, view: view, inForce: [:], sinkBuffer: nil)
        #expect(buffered.outputSettings[hdmi.pcm]?.bufferDuration == nil)
    }

    @Test("while no server answers, an output that played on the default sink's stream stays on it (no plug-in thread kept after the server is back); one that never did is left to the plug-in")
    func playThroughSinksWithoutServer() {
        var outage = KeepAliveConfiguration(devices: ["pulse", "pipewire", OutputPlannerTests.hdmi.pcm])
        let inForce = ["pulse": OutputSettings(serverSink: ServerDefaultOutput.defaultSink), OutputPlannerTests.hdmi.pcm: OutputSettings(serverSink: OutputPlannerTests.hdmi.name)]
        let kept = OutputPlanner.playThroughSinks(&outage, view: nil, inForce: inForce, sinkBuffer: SinkDefaults.buffer)
        #expect(kept == [])
        #expect(outage.outputSettings["pulse"]?.serverSink == ServerDefaultOutput.defaultSink)
        #expect(outage.outputSettings["pulse"]?.bufferDuration == SinkDefaults.buffer)
        #expect(outage.outputSettings["pipewire"] == nil)
        #expect(outage.outputSettings[OutputPlannerTests.hdmi.pcm] == nil, "a named sink's output waits on the plug-in until the server lists its sink again")
    }
}
