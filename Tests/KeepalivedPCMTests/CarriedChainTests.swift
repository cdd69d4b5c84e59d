import CKeepalivedPCM
import Testing

/// The chain a `slave` names, rewritten so that a player is carried through it
/// (ckeepalived_pcm_carried_chain_text): the plug-in's own walk, over configurations written as
/// alsa-lib's cards/*.conf write theirs.
@Suite("The ALSA plug-in's slave chains carried on keepalived's stream")
struct CarriedChainTests {
    /// A Raspberry Pi's HDMI as alsa-lib 1.2.8 and 1.2.14 define it (cards/vc4-hdmi.conf): the
    /// card's default is asym → plug → softvol → the hdmi PCM (iec958 → hooks → hw), named with
    /// arguments and a concatenation, as the real file names it.
    static let piHDMI = """
        pcm.hdmipi {
            @args [ CARD AES3 ]
            @args.CARD { type string }
            @args.AES3 { type integer }
            type iec958
            slave {
                format IEC958_SUBFRAME_LE
                pcm {
                    type hooks
                    slave.pcm { type hw card $CARD device 0 }
                    hooks.0 { type ctl_elems hook_args [ { name "IEC958 Playback Default" interface PCM optional true lock true preserve true value [ 4 130 0 $AES3 ] } ] }
                }
            }
            status [ 4 130 0 $AES3 ]
            hdmi_mode true
        }
        pcm.pidefault {
            @args [ CARD ]
            @args.CARD { type string }
            type asym
            playback.pcm {
                type plug
                slave.pcm {
                    type softvol
                    slave.pcm { @func concat strings [ "hdmipi:CARD=" $CARD ",AES3=1" ] }
                    control { name "PCM Playback Volume" card $CARD }
                }
            }
        }
        pcm.alias "pidefault:CARD=3"
        pcm.viaslave { type plug slave "piSlave" }
        pcm_slave.piSlave { pcm "hdmipi:CARD=3,AES3=1" rate 48000 }
        pcm.shared { type plug slave.pcm { type dmix ipc_key 1 slave.pcm { type hw card 3 device 0 } } }
        pcm.fixedrate { type plug slave.pcm { type hw card 3 device 0 rate 48000 } }
        pcm.otherdevice { type plug slave.pcm { type hw card 3 device 1 } }
        pcm.external { type plug slave.pcm { type speex slave.pcm { type hw card 3 device 0 } } }
        pcm.loop { type plug slave.pcm "loop" }
        pcm.nested { type keepalived card 3 device 0 }
        pcm.throughnested { type plug slave.pcm "nested" }
        """

    /// The rewritten chain as alsa-lib saves it, or the result when it is not rewritten.
    static func chain(_ slave: String, card: Int32 = 3, device: Int32 = 0, config: String = piHDMI, size: Int = 8192) -> (result: Int32, text: String) {
        var buffer = [CChar](repeating: 0, count: size)
        let result = ckeepalived_pcm_carried_chain_text(config, slave, card, device, &buffer, size)
        return (result, String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// The words of a saved configuration, without its layout.
    static func words(_ text: String) -> [Substring] {
        text.split(whereSeparator: { " \t\n{}".contains($0) })
    }

    @Test("a Pi's default: every layer kept as it is but the hooks' hooks, its hw PCM replaced by the carried stream")
    func piDefault() throws {
        let (result, text) = Self.chain("pidefault:CARD=3")
        #expect(result == 1, "\(text)")
        let words = Self.words(text)
        // The layers in order, the arguments filled in, the framing's status and the hook intact.
        let types = words.indices.filter { words[$0] == "type" }.map { words[$0 + 1] }
        #expect(types == ["asym", "plug", "softvol", "iec958", "hooks", "keepalived"], "\(text)")
        #expect(text.contains("IEC958_SUBFRAME_LE") && text.contains("PCM Playback Volume") && text.contains("status"), "\(text)")
        // The hooks act on the card at the player's hw_params, which the card's stream (keepalived's)
        // never sees, and find no card under a carried PCM: they go, the layer stays.
        #expect(!text.contains("IEC958 Playback Default") && !text.contains("ctl_elems"), "\(text)")
        #expect(!words.contains("hw"), "\(text)")
        let last = try #require(text.range(of: "keepalived"))
        let tail = Self.words(String(text[last.upperBound...]))
        #expect(tail.starts(with: ["card", "'3'", "device", "0", "carried_below", "1"]), "\(tail)")
    }

    @Test("an alias and a pcm_slave name are followed as alsa-lib follows them")
    func aliasesFollowed() {
        #expect(Self.chain("alias").result == 1)
        let (result, text) = Self.chain("viaslave")
        #expect(result == 1, "\(text)")
        // The slave's own constraint stays where the plug applies it.
        #expect(text.contains("rate 48000"), "\(text)")
    }

    @Test("not carried: another card or device, dmix, a hw PCM with its own constraint, an external plug-in, a nested keepalived PCM, a loop")
    func notCarried() {
        #expect(Self.chain("pidefault:CARD=3", card: 2).result == 0)
        #expect(Self.chain("pidefault:CARD=3", device: 1).result == 0)
        #expect(Self.chain("otherdevice").result == 0)
        #expect(Self.chain("otherdevice", device: 1).result == 1)
        #expect(Self.chain("shared").result == 0)
        #expect(Self.chain("fixedrate").result == 0)
        #expect(Self.chain("external").result == 0)
        #expect(Self.chain("throughnested").result == 0)
        #expect(Self.chain("loop").result == 0)
    }

    @Test("an undefined slave, an unreadable configuration, a buffer too small: an error")
    func errors() {
        #expect(Self.chain("nothing").result < 0)
        #expect(Self.chain("pidefault:CARD=3", config: "pcm.broken {").result < 0)
        #expect(Self.chain("pidefault:CARD=3", size: 16).result == -28)  // ENOSPC
    }
}
