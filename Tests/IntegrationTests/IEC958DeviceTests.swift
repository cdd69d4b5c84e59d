import Foundation
import TestSupport
import Testing

extension Integration {
    /// A device that takes nothing but IEC 60958 subframes, as a Raspberry Pi's HDMI (vc4-hdmi)
    /// does, stood in for by the fault-injecting test PCM limited to `IEC958_SUBFRAME_LE`, through
    /// the real alsa-lib (Debian 12's 1.2.8 here; the VM's Debian 13 guest has 1.2.14): directly
    /// (the card's `hw`), under `plug` (which alsa-lib before 1.2.12 cannot convert to
    /// subframes), and under alsa-lib's own `type iec958` as `cards/vc4-hdmi.conf` defines the
    /// card's `hdmi:`. Every subframe the device received is decoded by the tests' own decoder.
    ///
    /// The test PCM is no ring buffer the hardware replays (keepalived streams to it); the ring
    /// loop on such a device is the VM's kernel stand-in's to show.
    @Suite("keepalived keeps an IEC958-only device awake")
    struct IEC958DeviceTests {
        let device: FaultyDevice

        init() throws {
            device = try FaultyDevice()
            let config = """
                pcm.faulty-iec { type faulty state "\(device.stateDirectory("faulty-iec").path)" format "IEC958_SUBFRAME_LE" channels 2 }
                pcm.faulty-iec-hdmi {
                    type iec958
                    slave { pcm "faulty-iec" format IEC958_SUBFRAME_LE }
                    status [ 0x04 0x82 0x00 0x01 ]
                    hdmi_mode true
                }
                # alsa-lib's pcm/hdmi.conf (its arguments and their defaults: AES3 0x02, 48 kHz) and
                # cards/vc4-hdmi.conf's hdmi (the iec958 layer with that status) in one, over the
                # device: what a Raspberry Pi's hdmi:CARD=vc4hdmi0 is, without a card. Where a card's
                # configuration puts hdmi.conf's: under `cards`, which alsa.conf's pcm.hdmi names.
                cards.pcm.hdmi {
                    @args [ CARD DEV AES0 AES1 AES2 AES3 ]
                    @args.CARD { type string default "standin" }
                    @args.DEV { type integer default 0 }
                    @args.AES0 { type integer default 0x04 }
                    @args.AES1 { type integer default 0x82 }
                    @args.AES2 { type integer default 0x00 }
                    @args.AES3 { type integer default 0x02 }
                    type iec958
                    slave { pcm "faulty-iec" format IEC958_SUBFRAME_LE }
                    status [ $AES0 $AES1 $AES2 $AES3 ]
                    hdmi_mode true
                }

                """
            let handle = try FileHandle(forWritingTo: device.home.appendingPathComponent(".asoundrc"))
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(config.utf8))
        }

        /// Plays `name` until the device holds `blocks` whole channel-status blocks, stops
        /// keepalived and decodes everything the device received.
        func play(_ name: String, blocks: Int = 50, _ arguments: [String] = []) async throws -> (IEC958Decoder, [String: String]) {
            let daemon = try device.launch(name, arguments)
            try await waitUntil("\(blocks) blocks of IEC958 frames at the device", timeout: .seconds(20)) {
                device.capturedBytes(device: "faulty-iec") >= blocks * 192 * 8
            }
            #expect(try await daemon.terminate(within: .seconds(5)) == 0)
            let fields = try #require(logFields(daemon.stderr, line: " opened "), "no 'opened' line:\n\(daemon.stderr)")
            let capture = try FileContents.bytes(device.stateDirectory("faulty-iec").appendingPathComponent("capture.raw").path)
            let report = IEC958Decoder.decode(capture, channels: 2)
            print("\(name): \(report)")
            return (report, fields)
        }

        @Test("The card's hw: keepalived frames its own signal: every subframe valid, consumer PCM status, the clip's -10 LSB in the 24-bit field")
        func hardware() async throws {
            let (report, fields) = try await play("faulty-iec")
            #expect(fields["format"] == "IEC958_SUBFRAME_LE", "\(fields)")
            #expect(report.problems.isEmpty, "\(report)")
            #expect(report.blocks >= 49)
            // The embedded clip asks for 44.1 kHz, which the device takes: code 0x00; 24-bit words.
            #expect(fields["rate"] == "44100")
            #expect(Array(report.channelStatus.prefix(5)) == [0x04, 0x82, 0x00, 0x00, 0x0B], "\(report)")
            #expect(report.sampleRange == -10 ... -10, "\(report)")
        }

        @Test("A generated signal at its own rate: framed as it is written, valid across every write, within the level")
        func generated() async throws {
            let (report, fields) = try await play("faulty-iec", ["--signal", "pink", "--volume", "0.0005"])
            #expect(fields["format"] == "IEC958_SUBFRAME_LE" && fields["rate"] == "48000", "\(fields)")
            #expect(report.problems.isEmpty, "\(report)")
            #expect(report.channelStatus.prefix(4) == [0x04, 0x82, 0x00, 0x02], "\(report)")
            let range = try #require(report.sampleRange)
            #expect(range.lowerBound != range.upperBound, "noise varies: \(report)")
            // --volume 0.0005 is the peak: at most 4194 of 8388608.
            #expect(max(range.lowerBound.magnitude, range.upperBound.magnitude) <= 4194, "\(report)")
        }

        @Test("plug: over it: alsa-lib 1.2.8's plug cannot convert to subframes, so keepalived gives them as they are; later ones convert")
        func plug() async throws {
            let (report, fields) = try await play("plug:faulty-iec")
            #expect(report.problems.isEmpty, "\(report)")
            #expect(report.channelStatus.prefix(3) == [0x04, 0x82, 0x00], "\(report)")
            #expect(report.sampleRange.map { $0.lowerBound < 0 && $0.upperBound < 0 } == true, "never digital silence: \(report)")
            print("plug:faulty-iec opened as \(fields["format"] ?? "?")")
        }

        @Test("alsa-lib's own iec958 layer (a Pi's hdmi:): keepalived writes samples, alsa-lib frames them validly")
        func alsaLayer() async throws {
            let (report, fields) = try await play("faulty-iec-hdmi")
            #expect(fields["format"] != "IEC958_SUBFRAME_LE", "the layer takes linear samples: \(fields)")
            #expect(report.problems.isEmpty, "\(report)")
            #expect(report.channelStatus.prefix(4) == [0x04, 0x82, 0x00, 0x00], "the layer fills in 44.1 kHz: \(report)")
            #expect(report.sampleRange.map { $0.upperBound < 0 } == true, "\(report)")
        }

        /// A 16-bit stereo clip at `rate`: four frames, never zero.
        func clip(rate: UInt32) throws -> String {
            var wav = Data("RIFF".utf8) + le32(4 + 24 + 8 + 16) + Data("WAVE".utf8)
            wav += Data("fmt ".utf8) + le32(16) + le16(1) + le16(2) + le32(rate) + le32(rate * 4) + le16(4) + le16(16)
            wav += Data("data".utf8) + le32(16) + Data([0x00, 0xC0, 0x00, 0x40, 0x00, 0xD0, 0x00, 0x30, 0x00, 0xC0, 0x00, 0x40, 0x00, 0xD0, 0x00, 0x30])
            let path = device.directory.appendingPathComponent("clip-\(rate).wav")
            try wav.write(to: path)
            return path.path
        }

        @Test("hdmi: tells the receiver the rate it plays (issue 58): alsa-lib's hdmi.conf would say 48 kHz at every rate", arguments: [44100, 48000, 96000])
        func hdmiChannelStatusRate(rate: Int) async throws {
            // The embedded clip is 44.1 kHz; the others are clips at their rate.
            let arguments = rate == 44100 ? [] : ["--clip", try clip(rate: UInt32(rate))]
            let (report, fields) = try await play("hdmi:CARD=standin", blocks: 20, arguments)
            #expect(fields["rate"] == "\(rate)", "\(fields)")
            #expect(report.problems.isEmpty, "\(report)")
            let code = try #require(IEC958Decoder.frequencyCode(rate))
            #expect(Array(report.channelStatus.prefix(4)) == [0x04, 0x82, 0x00, code], "AES3 must be \(rate) Hz's code: \(report)")
        }

        @Test("hdmi: with an AES3 of the user's own keeps it")
        func hdmiUsersOwnAES3() async throws {
            let (report, fields) = try await play("hdmi:CARD=standin,AES3=0x02", blocks: 20)
            #expect(fields["rate"] == "44100", "\(fields)")
            #expect(Array(report.channelStatus.prefix(4)) == [0x04, 0x82, 0x00, 0x02], "\(report)")
        }

        @Test("An HDMI output with no display (the kernel's ENOTSUPP at open): waited for as no-display, at info (a box's normal state), with a message that says so, then played")
        func noDisplay() async throws {
            try device.control("refuse-open 524 1500")
            let daemon = try device.launch("faulty", ["--retry-max", "0.3"])
            try await daemon.waitForLog("waiting for device (no-display)")
            try await daemon.waitForLog(" recovered ", timeout: .seconds(10))
            let waiting = try #require(daemon.stderr.split(separator: "\n").first { $0.contains("waiting for device (no-display)") })
            #expect(waiting.contains("HDMI output with no display") && waiting.contains("ENOTSUPP"), "\(waiting)")
            #expect(waiting.contains(" info: "), "\(waiting)")
            #expect(!daemon.stderr.contains("Unknown error 524"), "\(daemon.stderr)")
            #expect(try await daemon.terminate(within: .seconds(5)) == 0)
        }
    }
}
