import CALSA
import Testing
@testable import KeepAlive

@Suite("Where dmix can mix, and a Raspberry Pi's IEC958-only HDMI")
struct CardDeviceMixingTests {
    /// What `aplay -L` lists on a Raspberry Pi 4 with Raspberry Pi OS (Debian 12's alsa.conf: a
    /// dmix for every card): both HDMI ports (vc4hdmi0, vc4hdmi1; vc4-hdmi.conf gives each an
    /// `hdmi:`), the analog jack (Headphones), and a USB DAC.
    static let pi4: [ALSADevice] = [
        ALSADevice(name: "null", description: "Discard all samples (playback) or generate zero samples (capture)"),
        ALSADevice(name: "hw:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, Direct hardware device without any conversions"),
        ALSADevice(name: "plughw:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, Hardware device with all software conversions"),
        ALSADevice(name: "default:CARD=vc4hdmi0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, Default Audio Device"),
        ALSADevice(name: "sysdefault:CARD=vc4hdmi0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, Default Audio Device"),
        ALSADevice(name: "hdmi:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, HDMI Audio Output"),
        ALSADevice(name: "dmix:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, Direct sample mixing device"),
        ALSADevice(name: "hw:CARD=vc4hdmi1,DEV=0", description: "vc4-hdmi-1, MAI PCM i2s-hifi-0, Direct hardware device without any conversions"),
        ALSADevice(name: "plughw:CARD=vc4hdmi1,DEV=0", description: "vc4-hdmi-1, MAI PCM i2s-hifi-0, Hardware device with all software conversions"),
        ALSADevice(name: "hdmi:CARD=vc4hdmi1,DEV=0", description: "vc4-hdmi-1, MAI PCM i2s-hifi-0, HDMI Audio Output"),
        ALSADevice(name: "dmix:CARD=vc4hdmi1,DEV=0", description: "vc4-hdmi-1, MAI PCM i2s-hifi-0, Direct sample mixing device"),
        ALSADevice(name: "hw:CARD=Headphones,DEV=0", description: "bcm2835 Headphones, bcm2835 Headphones, Direct hardware device without any conversions"),
        ALSADevice(name: "plughw:CARD=Headphones,DEV=0", description: "bcm2835 Headphones, bcm2835 Headphones, Hardware device with all software conversions"),
        ALSADevice(name: "dmix:CARD=Headphones,DEV=0", description: "bcm2835 Headphones, bcm2835 Headphones, Direct sample mixing device"),
        ALSADevice(name: "hw:CARD=DAC,DEV=0", description: "USB DAC, USB Audio, Direct hardware device without any conversions"),
        ALSADevice(name: "plughw:CARD=DAC,DEV=0", description: "USB DAC, USB Audio, Hardware device with all software conversions"),
        ALSADevice(name: "dmix:CARD=DAC,DEV=0", description: "USB DAC, USB Audio, Direct sample mixing device"),
    ]
    static let probed: [String: CardDeviceMixing] = ["vc4hdmi0,0": .iec958Only, "vc4hdmi1,0": .iec958Only, "Headphones,0": .mixable, "DAC,0": .mixable]

    @Test("the verdict from the formats the hardware takes: any format dmix mixes, else IEC958, else nothing")
    func judge() {
        func verdict(_ formats: [snd_pcm_format_t]) -> CardDeviceMixing { CardDeviceMixing.judge { formats.contains($0) } }
        #expect(verdict([SND_PCM_FORMAT_IEC958_SUBFRAME_LE]) == .iec958Only, "a Pi's vc4-hdmi")
        #expect(verdict([SND_PCM_FORMAT_IEC958_SUBFRAME_BE]) == .iec958Only)
        #expect(verdict([SND_PCM_FORMAT_S16_LE]) == .mixable)
        #expect(verdict([SND_PCM_FORMAT_S32_LE, SND_PCM_FORMAT_IEC958_SUBFRAME_LE]) == .mixable, "HDA's HDMI takes both")
        #expect(verdict([SND_PCM_FORMAT_S24_3LE]) == .mixable, "USB DACs")
        #expect(verdict([SND_PCM_FORMAT_U8]) == .mixable)
        #expect(verdict([SND_PCM_FORMAT_FLOAT_LE]) == .unmixable)
        #expect(verdict([SND_PCM_FORMAT_S20_LE]) == .unmixable, "a linear format dmix does not mix")
        #expect(verdict([]) == .unmixable)
    }

    @Test("a Pi: --digital and --all keep each HDMI port awake through its hdmi:, never its dmix; the analog jack and the DAC through dmix")
    func raspberryPi() {
        #expect(OutputSelection.digital.pick(from: Self.pi4, mixing: Self.probed) == ["hdmi:CARD=vc4hdmi0,DEV=0", "hdmi:CARD=vc4hdmi1,DEV=0"])
        #expect(OutputSelection.all.pick(from: Self.pi4, mixing: Self.probed)
            == ["hdmi:CARD=vc4hdmi0,DEV=0", "hdmi:CARD=vc4hdmi1,DEV=0", "dmix:CARD=Headphones,DEV=0", "dmix:CARD=DAC,DEV=0"])
        #expect(OutputSelection.analog.pick(from: Self.pi4, mixing: Self.probed) == ["dmix:CARD=Headphones,DEV=0", "dmix:CARD=DAC,DEV=0"])
        // --exclusive changes nothing there: no plughw for an IEC958-only device (1.2.8's plug
        // cannot convert to IEC958), and the others have their dmix.
        #expect(OutputSelection.all.pick(from: Self.pi4, allowExclusive: true, mixing: Self.probed)
            == OutputSelection.all.pick(from: Self.pi4, mixing: Self.probed))
        // Unprobed (today's reading of the hints alone): the dmix, which never plays there.
        #expect(OutputSelection.digital.pick(from: Self.pi4) == ["dmix:CARD=vc4hdmi0,DEV=0", "dmix:CARD=vc4hdmi1,DEV=0"])
    }

    @Test("an IEC958-only device is digital whatever its description; --exclude reaches it by its card's names")
    func digitalWhateverItsName() {
        let plain: [ALSADevice] = [
            ALSADevice(name: "hw:CARD=Board,DEV=0", description: "Board, out, Direct hardware device without any conversions"),
            ALSADevice(name: "dmix:CARD=Board,DEV=0", description: "Board, out, Direct sample mixing device"),
        ]
        #expect(OutputSelection.digital.pick(from: plain, mixing: ["Board,0": .iec958Only]) == ["hw:CARD=Board,DEV=0"])
        #expect(OutputSelection.analog.pick(from: plain, mixing: ["Board,0": .iec958Only]) == [])
        #expect(OutputSelection.analog.pick(from: plain) == ["dmix:CARD=Board,DEV=0"])
        let exclusions = [try! OutputExclusion("*CARD=vc4hdmi1,*")]
        #expect(OutputSelection.digital.pick(from: Self.pi4, excluding: exclusions, mixing: Self.probed) == ["hdmi:CARD=vc4hdmi0,DEV=0"])
        #expect(OutputSelection.all.pick(from: Self.pi4, excluding: [try! OutputExclusion("vc4-hdmi-*")], mixing: Self.probed)
            == ["dmix:CARD=Headphones,DEV=0", "dmix:CARD=DAC,DEV=0"])
    }

    @Test("the form of an IEC958-only device: its hdmi: where the card has as many hdmi: as devices, else hw:; hw: at the hw hint without a dmix")
    func iec958Form() {
        #expect(OutputSelection.iec958Form("vc4hdmi1,0", in: Self.pi4) == "hdmi:CARD=vc4hdmi1,DEV=0")
        // Carrying players: the port's own hw:, where they can be carried.
        #expect(OutputSelection.iec958Form("vc4hdmi1,0", in: Self.pi4, carrying: true) == "hw:CARD=vc4hdmi1,DEV=0")
        #expect(OutputSelection.digital.pick(from: Self.pi4, mixing: Self.probed, carrying: true) == ["hw:CARD=vc4hdmi0,DEV=0", "hw:CARD=vc4hdmi1,DEV=0"])
        let noAlias = Self.pi4.filter { !$0.name.hasPrefix("hdmi:") }
        #expect(OutputSelection.iec958Form("vc4hdmi0,0", in: noAlias) == "hw:CARD=vc4hdmi0,DEV=0")
        #expect(OutputSelection.digital.pick(from: noAlias, mixing: Self.probed) == ["hw:CARD=vc4hdmi0,DEV=0", "hw:CARD=vc4hdmi1,DEV=0"])
        // HDA: hdmi:…,DEV=0 is PCM device 3; with the analog device 0 the counts differ: hw:.
        let hda: [ALSADevice] = [
            ALSADevice(name: "dmix:CARD=PCH,DEV=0", description: "HDA Intel PCH, ALC3246 Analog, Direct sample mixing device"),
            ALSADevice(name: "hdmi:CARD=PCH,DEV=0", description: "HDA Intel PCH, HDMI 0, HDMI Audio Output"),
            ALSADevice(name: "dmix:CARD=PCH,DEV=3", description: "HDA Intel PCH, HDMI 0, Direct sample mixing device"),
        ]
        #expect(OutputSelection.iec958Form("PCH,3", in: hda) == "hw:CARD=PCH,DEV=3")
        // Without a dmix hint, at the hw hint's place, and once.
        let withoutDmix = Self.pi4.filter { !$0.name.hasPrefix("dmix:CARD=vc4hdmi0") }
        #expect(OutputSelection.digital.pick(from: withoutDmix, mixing: Self.probed) == ["hdmi:CARD=vc4hdmi0,DEV=0", "hdmi:CARD=vc4hdmi1,DEV=0"])
    }

    @Test("an unmixable device: never its dmix; its plughw only with --exclusive")
    func unmixable() {
        let mixing: [String: CardDeviceMixing] = ["DAC,0": .unmixable]
        #expect(!OutputSelection.all.pick(from: Self.pi4, mixing: mixing).contains("dmix:CARD=DAC,DEV=0"))
        #expect(OutputSelection.all.pick(from: Self.pi4, allowExclusive: true, mixing: mixing).contains("plughw:CARD=DAC,DEV=0"))
    }
}
