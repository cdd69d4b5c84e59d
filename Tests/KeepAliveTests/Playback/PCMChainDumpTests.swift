import Testing
@testable import KeepAlive

/// `PCMChain` on whole dumps alsa-lib printed (`snd_pcm_dump`, as `aplay -v` shows it), read by
/// their structure (issue 58): softvol's unindented "Control: …" and "min_dB: …" lines are the
/// layer's own, no layers, whatever the control's name.
@Suite("PCM chains from alsa-lib's dumps")
struct PCMChainDumpTests {
    @Test("a softvol chain is the same layers whatever its control's name, on 1.2.8 and 1.2.14", arguments: PCMDumpFixtures.softvolChains)
    func softvol(_ fixture: PCMDumpFixtures.Fixture) {
        let chain = PCMChain(dump: fixture.dump)
        #expect(chain.layers == fixture.layers, "\(fixture.name)")
        #expect(chain.canLoopRing, "\(fixture.name): \(chain.layers)")
        #expect(chain.ringBlockFrames == 192, "\(fixture.name): the iec958 layer under softvol")
        #expect(chain.hardware == fixture.hardware, "\(fixture.name)")
    }

    @Test("other unindented lines of a layer's own are no layers either: rate's protocol version, multi's slaves")
    func otherOwnLines() {
        let rate = PCMChain(dump: """
            Rate conversion PCM (44100, sformat=S16_LE)
            Converter: linear-interpolation
            Protocol version: 10002
            Its setup is:
              stream       : PLAYBACK
            Slave: Hardware PCM card 0 'HDA Intel PCH' device 0 subdevice 0
            Its setup is:
              stream       : PLAYBACK

            """)
        #expect(rate.layers == ["Rate conversion PCM", "Hardware PCM"])
        #expect(!rate.canLoopRing)
        let multi = PCMChain(dump: """
            Multi PCM
              Channel bindings:
                0: slave 0, channel 0
                1: slave 1, channel 0
            Slave #0: Hardware PCM card 0 'HDA Intel PCH' device 0 subdevice 0
            Its setup is:
              stream       : PLAYBACK
            Slave #1: Hardware PCM card 1 'USB Audio' device 0 subdevice 0

            """)
        #expect(multi.layers == ["Multi PCM", "Hardware PCM", "Hardware PCM"])
        #expect(!multi.canLoopRing)
    }

    @Test("a plug-in's own name without \"PCM\" is a layer of its own (unknown: the chain streams)")
    func namedPlugin() {
        let chain = PCMChain(dump: "Plug PCM: Upmix Plugin\nIts setup is:\n  stream       : PLAYBACK\nSlave: Hardware PCM card 0 'X' device 0 subdevice 0\n")
        #expect(chain.layers == ["Plug PCM", "Upmix Plugin", "Hardware PCM"])
        #expect(!chain.canLoopRing)
    }
}
