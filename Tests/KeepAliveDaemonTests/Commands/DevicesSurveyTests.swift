import Testing

@testable import KeepAlive
@testable import KeepAliveDaemon

/// What `keepalived devices` says of each card device, from ALSA's hints, the probe's mixing and
/// the sound server's answer, without a card: which selections pick it, and why the others do not.
/// (The suite's machines have no sound card; the VM's scenarios list real ones.)
@Suite("devices: a card device's verdicts")
struct DevicesSurveyTests {
    static let analog = CardDevice(card: 0, cardID: "Intel", cardName: "HDA Intel", driver: "HDA-Intel", device: 0, deviceName: "Generic Analog", kind: .analog)
    static let hdmi = CardDevice(card: 0, cardID: "Intel", cardName: "HDA Intel", driver: "HDA-Intel", device: 3, deviceName: "HDMI 0", kind: .hdmi)
    static let piHDMI = CardDevice(card: 1, cardID: "vc4hdmi0", cardName: "vc4-hdmi-0", driver: "vc4-hdmi", device: 0, deviceName: "MAI PCM i2s-hifi-0", kind: .hdmi)

    static let hints = [
        ALSADevice(name: "dmix:CARD=Intel,DEV=0", description: "HDA Intel, Generic Analog\nDirect sample mixing device"),
        ALSADevice(name: "plughw:CARD=Intel,DEV=0", description: "HDA Intel, Generic Analog\nHardware device with all software conversions"),
        ALSADevice(name: "hdmi:CARD=Intel,DEV=0", description: "HDA Intel, HDMI 0\nHDMI Audio Output"),
        ALSADevice(name: "dmix:CARD=Intel,DEV=3", description: "HDA Intel, HDMI 0\nDirect sample mixing device"),
        ALSADevice(name: "plughw:CARD=Intel,DEV=3", description: "HDA Intel, HDMI 0\nHardware device with all software conversions"),
        ALSADevice(name: "hdmi:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0\nHDMI Audio Output"),
        ALSADevice(name: "hw:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0\nDirect hardware device without any conversions"),
    ]

    static func survey(server: SoundServerReachability = .unreachable("no server answers"), exclusions: [String] = [],
                       mixing: [String: CardDeviceMixing] = [:]) throws -> DevicesCommand.Survey {
        var offer = OutputOffer(hints: hints, server: server, cardIndices: ["Intel": 0, "vc4hdmi0": 1])
        offer.mixing = mixing
        return DevicesCommand.Survey(hints: hints, offer: offer, exclusions: try exclusions.map(OutputExclusion.init), exclusive: false, status: nil)
    }

    @Test("an analog and an HDMI device with dmix: each opened shared, picked by --all and by its own kind")
    func byKind() throws {
        let survey = try Self.survey()
        let analog = survey.block(for: Self.analog)
        #expect(analog.opens == "dmix:CARD=Intel,DEV=0" && analog.shared)
        #expect(analog.selections.pickedBy == ["--all", "--analog"])
        #expect(analog.selections.notPickedBecause == ["--digital": "not a digital output"])
        let hdmi = survey.block(for: Self.hdmi)
        #expect(hdmi.opens == "dmix:CARD=Intel,DEV=3" && hdmi.shared)
        #expect(hdmi.selections.pickedBy == ["--all", "--digital"])
        #expect(hdmi.selections.notPickedBecause == ["--analog": "a digital output"])
        #expect(hdmi.forPlayers == "keepalived:CARD=Intel,DEV=3")
    }

    @Test("an excluded device names the pattern for the selections that would pick it")
    func excluded() throws {
        let hdmi = try Self.survey(exclusions: ["HDMI*"]).block(for: Self.hdmi)
        #expect(hdmi.excludedBy == "HDMI*")
        #expect(hdmi.selections.pickedBy.isEmpty)
        #expect(hdmi.selections.notPickedBecause == ["--all": "excluded by --exclude 'HDMI*'", "--digital": "excluded by --exclude 'HDMI*'",
                                                     "--analog": "a digital output"])
    }

    @Test("before the sound server answers, no selection takes a card: each says why")
    func serverNotAnswered() throws {
        let analog = try Self.survey(server: .unknown).block(for: Self.analog)
        #expect(analog.leftAlone == "waiting for the sound server's answer")
        #expect(analog.selections.pickedBy.isEmpty)
        #expect(Set(analog.selections.notPickedBecause.values) == ["waiting for the sound server's answer"])
    }

    @Test("an IEC958-only device (a Raspberry Pi's HDMI) has no shared form: opened as IEC958, digital, picked without --exclusive")
    func iec958Only() throws {
        let pi = try Self.survey(mixing: ["vc4hdmi0,0": .iec958Only]).block(for: Self.piHDMI)
        #expect(pi.opens == OutputSelection.iec958Form("vc4hdmi0,0", in: Self.hints))
        #expect(!pi.shared)
        #expect(pi.hardware == CardDeviceMixing.iec958Only.rawValue)
        #expect(pi.selections.pickedBy == ["--all", "--digital"])
        #expect(pi.selections.notPickedBecause == ["--analog": "a digital output"])
    }

    @Test("an unmixable device is opened only with --exclusive, and says so")
    func unmixable() throws {
        let analog = try Self.survey(mixing: ["Intel,0": .unmixable]).block(for: Self.analog)
        #expect(analog.opens == nil && !analog.shared)
        #expect(analog.selections.pickedBy.isEmpty)
        #expect(analog.selections.notPickedBecause["--all"] == "dmix cannot mix what its hardware takes: only with --exclusive, as plughw:CARD=Intel,DEV=0")
    }
}
