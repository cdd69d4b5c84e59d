import Testing
@testable import KeepAlive

/// Which PCM chains replay their ring on their own, from alsa-lib's dump text.
@Suite("PCM chains")
struct PCMChainTests {
    @Test("hardware, and per-sample conversions over it, can loop their ring", arguments: [
        "Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\nIts setup is:\n  stream       : PLAYBACK\n",
        "Plug PCM: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n",
        "Plug PCM: Linear conversion PCM (S32_LE)\nIts setup is:\n  stream : PLAYBACK\nSlave: Hardware PCM card 1 'USB' device 0 subdevice 0\n",
        "Hooks PCM\nIts setup is:\n  format : S16_LE\nSlave: Hardware PCM card 0 'HDA Intel PCH' device 3 subdevice 0\n",
    ])
    func loops(_ dump: String) {
        #expect(PCMChain(dump: dump).canLoopRing, "\(PCMChain(dump: dump).layers)")
    }

    @Test("mixing, sharing, resampling, servers, null and unknown layers stream", arguments: [
        "Plug PCM: Direct Stream Mixing PCM\nIts setup is:\n  stream : PLAYBACK\nSlave: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n",
        "Direct Stream Mixing PCM\nSlave: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n",
        "Plug PCM: Rate conversion PCM (48000)\nSlave: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n",
        "ALSA <-> PulseAudio PCM I/O Plugin\n",
        "Null PCM\n",
        "File PCM (file=/tmp/x.raw)\nSlave: Null PCM\n",
        "Something New PCM\nSlave: Hardware PCM card 0 'X' device 0 subdevice 0\n",
        "",
    ])
    func streams(_ dump: String) {
        #expect(!PCMChain(dump: dump).canLoopRing, "\(PCMChain(dump: dump).layers)")
    }

    @Test("a chain that ends in a card's own PCM has no sound server behind it", arguments: [
        ("Plug PCM: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n", true),
        ("Plug PCM: Direct Stream Mixing PCM\nIts setup is:\n  stream : PLAYBACK\nSlave: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n", true),
        ("Hooks PCM\nSlave: Hardware PCM card 0 'HDA Intel PCH' device 3 subdevice 0\n", true),
        ("ALSA <-> PulseAudio PCM I/O Plugin\n", false),
        ("Plug PCM: Linear conversion PCM (S16_LE)\nSlave: ALSA <-> PipeWire PCM I/O Plugin\n", false),
        ("Null PCM\n", false),
        ("", false),
    ])
    func endsInHardware(_ dump: String, _ hardware: Bool) {
        #expect(PCMChain(dump: dump).endsInHardware == hardware, "\(PCMChain(dump: dump).layers)")
    }

    @Test("a player is carried only where nothing between keepalived's frames and the card can change them", arguments: [
        ("Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n", true),
        ("Hooks PCM\nSlave: Hardware PCM card 0 'HDA Intel PCH' device 3 subdevice 0\n", true),
        ("Plug PCM: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n", false),
        ("Plug PCM: Linear conversion PCM (S32_LE)\nSlave: Hardware PCM card 1 'USB' device 0 subdevice 0\n", false),
        ("Soft volume PCM\nControl: PCM Playback Volume\nSlave: Hardware PCM card 0 'vc4-hdmi-0' device 0 subdevice 0\n", false),
        ("IEC958 subframe conversion PCM (IEC958_SUBFRAME_LE)\nSlave: Hooks PCM\nSlave: Hardware PCM card 0 'vc4-hdmi-0' device 0 subdevice 0\n", false),
        ("Direct Stream Mixing PCM\nSlave: Hardware PCM card 0 'HDA Intel' device 0 subdevice 0\n", false),
        ("ALSA <-> PulseAudio PCM I/O Plugin\n", false),
        ("", false),
    ] as [(String, Bool)])
    func carriesPlayers(_ dump: String, _ carries: Bool) {
        #expect(PCMChain(dump: dump).carriesPlayersUnchanged == carries, "\(PCMChain(dump: dump).layers)")
    }

    @Test("layers are read outermost first")
    func layers() {
        let chain = PCMChain(dump: "Plug PCM: Linear conversion PCM (S32_LE)\nIts setup is:\n  x\nSlave: Hardware PCM card 1 'USB' device 0 subdevice 0\n")
        #expect(chain.layers == ["Plug PCM", "Linear conversion PCM", "Hardware PCM"])
    }

    @Test("the card device behind a chain is its hardware layer's, whatever sits on top and whatever the card's name", arguments: [
        ("Direct Stream Mixing PCM\nIts setup is:\n  stream : PLAYBACK\nHardware PCM card 0 'HDA Intel' device 0 subdevice 0\nIts setup is:\n  x\n", HardwareDevice(card: 0, device: 0)),
        ("Plug PCM: Direct Stream Mixing PCM\nSlave: Hardware PCM card 2 'HDA Intel PCH' device 7 subdevice 0\n", HardwareDevice(card: 2, device: 7)),
        ("Hooks PCM\nSlave: Hardware PCM card 1 'it's a device 3 DAC' device 3 subdevice 1\n", HardwareDevice(card: 1, device: 3)),
        ("ALSA <-> PulseAudio PCM I/O Plugin\n", nil),
        ("Null PCM\n", nil),
        ("Hardware PCM card x 'bad' device 0 subdevice 0\n", nil),
        ("", nil),
    ] as [(String, HardwareDevice?)])
    func hardware(_ dump: String, _ device: HardwareDevice?) {
        #expect(PCMChain(dump: dump).hardware == device)
    }

    @Test("the format preference order matches the documented rule")
    func preferenceOrder() {
        #expect(SampleFormat.s16.preferenceOrder == [.s16, .s24, .s24Packed, .u8, .s32, .float32], "8 bits below is nearer than 16 above")
        #expect(SampleFormat.s24.preferenceOrder == [.s24, .s24Packed, .s32, .float32, .s16, .u8], "the packed layout of the same 24 bits next")
        #expect(SampleFormat.s24Packed.preferenceOrder == [.s24Packed, .s24, .s32, .float32, .s16, .u8])
        #expect(SampleFormat.float32.preferenceOrder == [.float32, .s32, .s24, .s24Packed, .s16, .u8])
        #expect(SampleFormat.u8.preferenceOrder == [.u8, .s16, .s24, .s24Packed, .s32, .float32])
    }
}
