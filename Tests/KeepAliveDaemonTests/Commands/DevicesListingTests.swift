import _KeepalivedControlProtocol
import Testing

@testable import KeepAliveDaemon

/// `keepalived devices` as `--json` and as text, for card devices and a sink. The machines the
/// suite runs on have no sound card, so the card blocks' form is held here: one flat object each,
/// its selections' fields beside its own.
@Suite("devices: the listing as JSON and as text")
struct DevicesListingTests {
    static var listing: DevicesCommand.Listing {
        DevicesCommand.Listing(
            soundServer: "pulseaudio 16.1",
            sinks: [
                DevicesCommand.Block(
                    DevicesCommand.Sink(name: "tv", description: "Living-room TV", card: 5, kind: "HDMI/DisplayPort", virtual: false,
                                        state: "running", isDefault: true, opens: "pulse:DEVICE=tv"),
                    DevicesCommand.Selections(pickedBy: ["--all", "--digital"], notPickedBecause: ["--analog": "a digital output"],
                                              playing: "playing, stream")),
            ],
            outputs: [
                DevicesCommand.Block(
                    DevicesCommand.Output(title: "HDA Intel — Generic Analog", card: 0, cardID: "Intel", device: 0, kind: "analog",
                                          opens: "dmix:CARD=Intel,DEV=0", shared: true, leftAlone: "PulseAudio holds it",
                                          forPlayers: "keepalived:CARD=Intel,DEV=0"),
                    DevicesCommand.Selections(
                        pickedBy: [],
                        notPickedBecause: ["--all": "PulseAudio holds it", "--analog": "PulseAudio holds it", "--digital": "not a digital output"])),
                DevicesCommand.Block(
                    DevicesCommand.Output(title: "HDA Intel — HDMI 0", card: 0, cardID: "Intel", device: 3, kind: "HDMI/DisplayPort",
                                          shared: false, excludedBy: "HDMI*", forPlayers: "keepalived:CARD=Intel,DEV=3"),
                    DevicesCommand.Selections(pickedBy: [], notPickedBecause: ["--all": "excluded by --exclude 'HDMI*'"],
                                              playing: "playing, ring-loop as hw:0,3")),
            ],
            configured: [])
    }

    @Test("--json: one flat object per card device and per sink, keys sorted, absent fields left out")
    func json() throws {
        let expected = #"{"configured":[],"outputs":[{"card":0,"cardID":"Intel","device":0,"forPlayers":"keepalived:CARD=Intel,DEV=0","kind":"analog","leftAlone":"PulseAudio holds it","notPickedBecause":{"--all":"PulseAudio holds it","--analog":"PulseAudio holds it","--digital":"not a digital output"},"opens":"dmix:CARD=Intel,DEV=0","pickedBy":[],"shared":true,"title":"HDA Intel — Generic Analog"},{"card":0,"cardID":"Intel","device":3,"excludedBy":"HDMI*","forPlayers":"keepalived:CARD=Intel,DEV=3","kind":"HDMI/DisplayPort","notPickedBecause":{"--all":"excluded by --exclude 'HDMI*'"},"pickedBy":[],"playing":"playing, ring-loop as hw:0,3","shared":false,"title":"HDA Intel — HDMI 0"}],"sinks":[{"card":5,"description":"Living-room TV","isDefault":true,"kind":"HDMI/DisplayPort","name":"tv","notPickedBecause":{"--analog":"a digital output"},"opens":"pulse:DEVICE=tv","pickedBy":["--all","--digital"],"playing":"playing, stream","state":"running","virtual":false}],"soundServer":"pulseaudio 16.1"}"#
        let encoded = ControlJSON.encode(Self.listing)
        #expect(encoded == expected)
        #expect(try ControlJSON.decode(DevicesCommand.Listing.self, from: Array(encoded.utf8)) == Self.listing)
    }

    @Test("text: a block per sink and per card device, the selections' lines last")
    func text() {
        #expect(DevicesCommand.describe(Self.listing) == """
            Sound server: pulseaudio 16.1

            Living-room TV    (sink tv, the default)
              kind: HDMI/DisplayPort, card 5, running
              keepalived opens: pulse:DEVICE=tv
              picked by: --all, --digital
              not by --analog: a digital output
              now: playing, stream

            HDA Intel — Generic Analog    (card 0 "Intel", device 0)
              kind: analog
              keepalived opens: dmix:CARD=Intel,DEV=0 (shared with other programs)
              left alone: PulseAudio holds it
              for players: keepalived:CARD=Intel,DEV=0 (the hardware itself, handed over by keepalived while they play)
              picked by: no selection
              not by --all: PulseAudio holds it
              not by --analog: PulseAudio holds it
              not by --digital: not a digital output

            HDA Intel — HDMI 0    (card 0 "Intel", device 3)
              kind: HDMI/DisplayPort
              keepalived opens: nothing without --exclusive (no shared dmix form)
              for players: keepalived:CARD=Intel,DEV=3 (the hardware itself, handed over by keepalived while they play)
              picked by: no selection
              not by --all: excluded by --exclude 'HDMI*'
              now: playing, ring-loop as hw:0,3
            """)
    }

    @Test("text: an IEC958-only HDMI port (a Pi's) says what keepalived opens, that it is exclusive, and what players name")
    func iec958Only() {
        let listing = DevicesCommand.Listing(
            soundServer: "none answers", sinks: [],
            outputs: [DevicesCommand.Block(
                DevicesCommand.Output(title: "vc4-hdmi-0 — MAI PCM i2s-hifi-0", card: 1, cardID: "vc4hdmi0", device: 0, kind: "HDMI/DisplayPort",
                                      opens: "hdmi:CARD=vc4hdmi0,DEV=0", shared: false, forPlayers: "keepalived:CARD=vc4hdmi0,DEV=0",
                                      hardware: "IEC958 only"),
                DevicesCommand.Selections(pickedBy: ["--all", "--digital"], notPickedBecause: ["--analog": "a digital output"]))],
            configured: [])
        #expect(DevicesCommand.describe(listing) == """
            Sound server: none answers

            vc4-hdmi-0 — MAI PCM i2s-hifi-0    (card 1 "vc4hdmi0", device 0)
              kind: HDMI/DisplayPort, its hardware: IEC958 only
              keepalived opens: hdmi:CARD=vc4hdmi0,DEV=0 (exclusive: no shared form exists for IEC958-only hardware;
                a program that opens the card's default, hdmi: or hw: gets "busy" while keepalived plays)
              for players: keepalived:CARD=vc4hdmi0,DEV=0 (handed over by keepalived while they play, their samples framed into IEC958)
              picked by: --all, --digital
              not by --analog: a digital output
            """)
        #expect(ControlJSON.encode(listing).contains(#""hardware":"IEC958 only""#))
    }
}
