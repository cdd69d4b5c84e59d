import Testing
@testable import KeepAlive

@Suite("Choosing outputs from ALSA's device hints")
struct OutputSelectionTests {
    /// What `aplay -L` lists on a laptop with an Intel HDA codec (analog + HDMI) and a USB DAC
    /// whose configuration offers no dmix, plus the usual software devices.
    static let hints: [ALSADevice] = [
        ALSADevice(name: "null", description: "Discard all samples (playback) or generate zero samples (capture)"),
        ALSADevice(name: "pulse", description: "PulseAudio Sound Server"),
        ALSADevice(name: "default", description: "Default ALSA Output (currently PulseAudio Sound Server)"),
        ALSADevice(name: "samplerate", description: "Rate Converter Plugin Using Samplerate Library"),
        ALSADevice(name: "hw:CARD=PCH,DEV=0", description: "HDA Intel PCH, ALC3246 Analog, Direct hardware device without any conversions"),
        ALSADevice(name: "plughw:CARD=PCH,DEV=0", description: "HDA Intel PCH, ALC3246 Analog, Hardware device with all software conversions"),
        ALSADevice(name: "sysdefault:CARD=PCH", description: "HDA Intel PCH, ALC3246 Analog, Default Audio Device"),
        ALSADevice(name: "front:CARD=PCH,DEV=0", description: "HDA Intel PCH, ALC3246 Analog, Front output / input"),
        ALSADevice(name: "dmix:CARD=PCH,DEV=0", description: "HDA Intel PCH, ALC3246 Analog, Direct sample mixing device"),
        ALSADevice(name: "hdmi:CARD=PCH,DEV=0", description: "HDA Intel PCH, HDMI 0, HDMI Audio Output"),
        ALSADevice(name: "dmix:CARD=PCH,DEV=3", description: "HDA Intel PCH, HDMI 0, Direct sample mixing device"),
        ALSADevice(name: "hw:CARD=DAC,DEV=0", description: "USB DAC, USB Audio, Direct hardware device without any conversions"),
        ALSADevice(name: "plughw:CARD=DAC,DEV=0", description: "USB DAC, USB Audio, Hardware device with all software conversions"),
        ALSADevice(name: "iec958:CARD=DAC,DEV=0", description: "USB DAC, USB Audio, IEC958 (S/PDIF) Digital Audio Output"),
        ALSADevice(name: "my-receiver", description: "Living room receiver, HDMI"),
    ]

    @Test("digital: the HDMI device through dmix, never hdmi: itself; user PCMs as named")
    func digital() {
        #expect(OutputSelection.digital.pick(from: Self.hints) == ["dmix:CARD=PCH,DEV=3", "my-receiver"])
    }

    @Test("analog: the codec through dmix; virtual devices and direct hardware never")
    func analog() {
        #expect(OutputSelection.analog.pick(from: Self.hints) == ["dmix:CARD=PCH,DEV=0"])
    }

    @Test("all: shared forms only, unless exclusive use is allowed for a card without one")
    func all() {
        #expect(OutputSelection.all.pick(from: Self.hints) == ["dmix:CARD=PCH,DEV=0", "dmix:CARD=PCH,DEV=3", "my-receiver"])
        #expect(OutputSelection.all.pick(from: Self.hints, allowExclusive: true)
                == ["dmix:CARD=PCH,DEV=0", "dmix:CARD=PCH,DEV=3", "plughw:CARD=DAC,DEV=0", "my-receiver"])
    }

    @Test("the keepalived: PCM for players is never picked: it is the hardware itself, for a player")
    func playersPCM() {
        let hints = Self.hints + [
            ALSADevice(name: "keepalived:CARD=PCH,DEV=0", description: "HDA Intel PCH, ALC3246 Analog, Direct hardware device, released by keepalived"),
            ALSADevice(name: "keepalived-plug:CARD=PCH,DEV=3", description: "HDA Intel PCH, HDMI 0, Hardware device with all software conversions, released by keepalived"),
            ALSADevice(name: "keepalived", description: "Direct hardware device, released by keepalived"),
        ]
        for selection in OutputSelection.allCases {
            #expect(!selection.pick(from: hints, allowExclusive: true).contains { $0.hasPrefix("keepalived") }, "\(selection)")
        }
    }

    @Test("--exclude: a card device by any description or hw/plughw/dmix name, a configured PCM by its own")
    func exclusions() throws {
        let usb = try OutputExclusion("USB*")
        #expect(OutputSelection.all.pick(from: Self.hints, allowExclusive: true, excluding: [usb])
                == ["dmix:CARD=PCH,DEV=0", "dmix:CARD=PCH,DEV=3", "my-receiver"])
        // The HDMI device through its dmix form's description; the analog device stays.
        #expect(OutputSelection.all.pick(from: Self.hints, excluding: [try OutputExclusion("*HDMI 0*")]) == ["dmix:CARD=PCH,DEV=0", "my-receiver"])
        // hdmi:CARD=PCH,DEV=0 is the first HDMI device, not PCM device 0: it must not exclude the analog one.
        #expect(OutputSelection.all.pick(from: Self.hints, excluding: [try OutputExclusion("hdmi:*")])
                == ["dmix:CARD=PCH,DEV=0", "dmix:CARD=PCH,DEV=3", "my-receiver"])
        #expect(OutputSelection.analog.pick(from: Self.hints, excluding: [try OutputExclusion("hw:CARD=PCH,DEV=0")]).isEmpty)
        #expect(OutputSelection.digital.pick(from: Self.hints, excluding: [try OutputExclusion("my-*")]) == ["dmix:CARD=PCH,DEV=3"])
        // Case-sensitive as in the shell; line by line in a multi-line description.
        #expect(OutputSelection.digital.pick(from: Self.hints, excluding: [try OutputExclusion("*hdmi*")]) == ["dmix:CARD=PCH,DEV=3", "my-receiver"])
        #expect(try OutputExclusion("Front*").matches(ALSADevice(name: "x", description: "Test Card\nFront speakers")))
        #expect(throws: OutputExclusionError.empty) { try OutputExclusion(" ") }
        #expect(throws: OutputExclusionError.nulByte("a\u{0}b")) { try OutputExclusion("a\u{0}b") }
    }

    @Test("a configuration with no device yet validates: a caller's scanner adds outputs as they appear")
    func emptyDevices() throws {
        try KeepAliveConfiguration(devices: []).validate()
    }
}
