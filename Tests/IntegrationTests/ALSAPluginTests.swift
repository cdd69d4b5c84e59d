import Foundation
import TestSupport
import Testing

extension Integration {
    /// The `keepalived` ALSA PCM plug-in (Sources/CKeepalivedPCM, built by scripts/build-alsa-plugin)
    /// loaded by the real alsa-lib from packaging/alsa/50-keepalived.conf, in a small C program
    /// that opens one PCM as a player does (non-blocking) and times only that open. A socket of
    /// the test's own stands in for keepalived's control socket.
    ///
    /// This machine has no sound card, so every open ends as hw's does: without the card. The
    /// PCMs with an integer card (`card 0`, as in a user's `pcm.dac { type keepalived card 0 }`)
    /// ask keepalived before that, since an integer is taken as it is; `keepalived:CARD=0` passes
    /// the card as a string, which is looked up (snd_card_get_index), exactly as for `hw:CARD=0`,
    /// and fails here before there is anything to release (a playback open's carry request comes
    /// first, since carrying needs no card of the player's; ReleaseListener refuses it apart).
    @Suite("the keepalived ALSA plug-in")
    struct ALSAPluginTests {
        static let released = #"{"ok":true,"released":["hw:CARD=0,DEV=0"]}"#

        /// The line the opener (`alsa-open`) sends for `card` and `device`.
        static func line(card: Int, device: Int) -> String {
            #"{"request":"release","card":\#(card),"device":\#(device),"program":"alsa-open"}"# + "\n"
        }

        static var noCardZero: Bool { !FileManager.default.fileExists(atPath: "/dev/snd/controlC0") }

        @Test("keepalived:… fails as hw:… does (an unknown card's id too); a card that is not there is not asked for")
        func failsAsHardwareDoes() async throws {
            let setup = try PluginSetup("errors")
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            var results: [String: Int32] = [:]
            for (ours, hardware) in [("keepalived:CARD=0,DEV=0", "hw:CARD=0,DEV=0"), ("keepalived:0,0", "hw:0,0"),
                                     ("keepalived", "hw"), ("keepalived-plug:0,0", "plughw:0,0"),
                                     ("keepalived:CARD=nosuch", "hw:CARD=nosuch"),
                                     ("keepalived-plug:CARD=nosuch,DEV=1", "plughw:CARD=nosuch,DEV=1")] {
                let opened = try await setup.open(ours, socket: listener.path)
                let expected = try await setup.open(hardware, socket: listener.path)
                #expect(opened.result == expected.result, "\(ours): \(opened), \(hardware): \(expected)")
                #expect(opened.leakedDescriptors == 0, "\(ours): \(opened)")
                results[ours] = opened.result
            }
            listener.stop()
            #expect(results["keepalived:CARD=nosuch"] == -ENODEV)
            if Self.noCardZero {
                #expect(results["keepalived:CARD=0,DEV=0"] == -ENOENT)
                #expect(listener.received == [], "no card 0: its lookup fails before keepalived is asked")
            }
        }

        @Test("a playback open sends one release line for its card and device, waits for the answer, then opens hw")
        func asksForTheDevice() async throws {
            let setup = try PluginSetup("release")
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            // A 5 s release timeout: an open that returns in under half of it was answered, not
            // timed out, however slow a loaded machine is (the plug-in's speed is bench/'s).
            let patient = ["KEEPALIVED_RELEASE_TIMEOUT": "5000"]
            let opened = try await setup.open("keepalived-card0", socket: listener.path, extra: patient)
            let expected = try await setup.open("hw:0,0", socket: listener.path)
            let other = try await setup.open("keepalived-card3", socket: listener.path, extra: patient)
            let otherExpected = try await setup.open("hw:CARD=3,DEV=7,SUBDEV=1", socket: listener.path)
            listener.stop()

            #expect(listener.received == [Self.line(card: 0, device: 0), Self.line(card: 3, device: 7)])
            #expect(opened.result == expected.result, "\(opened) \(expected)")
            #expect(other.result == otherExpected.result, "\(other) \(otherExpected)")
            for result in [opened, other] {
                #expect(!result.stderr.contains("keepalived"), "an answered request is silent: \(result.stderr)")
                #expect(result.elapsed < .milliseconds(2500), "answered at once: no wait for the 5 s deadline (\(result))")
                #expect(result.leakedDescriptors == 0, "\(result)")
            }
        }

        @Test("a refusal is reported with keepalived's reason; the open goes on to the hardware")
        func refusal() async throws {
            let setup = try PluginSetup("refusal")
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(#"{"ok":false,"error":"card 0 is not \"kept\" awake"}"#))
            defer { listener.stop() }
            let opened = try await setup.open("keepalived-card0", socket: listener.path)
            let expected = try await setup.open("hw:0,0", socket: listener.path)
            listener.stop()
            #expect(listener.received == [Self.line(card: 0, device: 0)])
            #expect(opened.stderr.contains(#"keepalived did not release the device: card 0 is not "kept" awake"#), "\(opened.stderr)")
            #expect(opened.result == expected.result, "\(opened) \(expected)")
            #expect(opened.leakedDescriptors == 0)
        }

        @Test("keepalived that never answers: the open goes on after 200 ms and says so once")
        func silence() async throws {
            let setup = try PluginSetup("silence")
            let listener = try ReleaseListener(path: setup.socket, answer: .silence)
            defer { listener.stop() }
            let opened = try await setup.open("keepalived-card0", socket: listener.path)
            let expected = try await setup.open("hw:0,0", socket: listener.path)
            listener.stop()
            #expect(listener.received == [Self.line(card: 0, device: 0)])
            #expect(opened.elapsed >= .milliseconds(190), "it waits for the answer until the deadline: \(opened)")
            // The documented 200 ms release timeout, with a margin for a loaded machine's wakeup.
            #expect(opened.elapsed < Duration.seconds(1).underSanitizer, "and not longer: \(opened)")
            #expect(opened.stderr.components(separatedBy: "keepalived did not answer within 200 ms").count == 2, "\(opened.stderr)")
            #expect(opened.result == expected.result, "\(opened) \(expected)")
            #expect(opened.leakedDescriptors == 0)
        }

        @Test("keepalived holds the open while the power comes on: an interim wait line, then the reply, and no message")
        func powerOnWait() async throws {
            let setup = try PluginSetup("power")
            let held = try ReleaseListener(path: setup.socket, answer: .lines([
                (.zero, #"{"ok":true,"wait":3000}"#), (.milliseconds(700), Self.released)]))
            let opened = try await setup.open("keepalived-card0", socket: held.path)
            held.stop()
            let expected = try await setup.open("hw:0,0", socket: nil)
            #expect(held.received == [Self.line(card: 0, device: 0)])
            #expect(opened.elapsed >= .milliseconds(690), "held until the reply, past the 200 ms the release has: \(opened)")
            #expect(opened.elapsed < Duration.milliseconds(2500).underSanitizer, "and no longer: \(opened)")
            #expect(!opened.stderr.contains("keepalived"), "a hold that ends in a reply is silent: \(opened.stderr)")
            #expect(opened.result == expected.result, "\(opened) \(expected)")
            #expect(opened.leakedDescriptors == 0)

            // Both lines in one read: the reply is taken at once.
            let together = try ReleaseListener(path: setup.socket, answer: .reply(#"{"ok":true,"wait":3000}"# + "\n" + Self.released))
            let quick = try await setup.open("keepalived-card0", socket: together.path)
            together.stop()
            // Under the 3 s the interim line asked for: the reply read with it ended the wait.
            #expect(quick.elapsed < .milliseconds(2500), "\(quick)")
            #expect(!quick.stderr.contains("keepalived"), "\(quick.stderr)")
        }

        @Test("a hold whose reply never comes ends at the wait keepalived asked for, and says so once")
        func powerOnWaitBound() async throws {
            let setup = try PluginSetup("power-bound")
            let held = try ReleaseListener(path: setup.socket, answer: .lines([(.milliseconds(50), #"{"ok":true,"wait":500}"#), (.seconds(3), Self.released)]))
            let opened = try await setup.open("keepalived-card0", socket: held.path)
            held.stop()
            #expect(opened.elapsed >= .milliseconds(540), "\(opened)")
            #expect(opened.elapsed < Duration.milliseconds(1500).underSanitizer, "\(opened)")
            #expect(opened.stderr.components(separatedBy: "keepalived did not answer within").count == 2, "\(opened.stderr)")
            #expect(opened.leakedDescriptors == 0)
        }

        @Test("KEEPALIVED_RELEASE_TIMEOUT sets the wait in ms; a value that is not one is named and the default kept")
        func releaseTimeout() async throws {
            let setup = try PluginSetup("timeout")
            let listener = try ReleaseListener(path: setup.socket, answer: .silence)
            defer { listener.stop() }
            let short = try await setup.open("keepalived-card0", socket: listener.path, extra: ["KEEPALIVED_RELEASE_TIMEOUT": "40"])
            // The message names the deadline the plug-in computed; the lower bound says it waited
            // for it. No upper bound: a loaded machine may wake the open late.
            #expect(short.elapsed >= .milliseconds(35), "\(short)")
            #expect(short.stderr.contains("keepalived did not answer within 40 ms"), "\(short.stderr)")
            let bad = try await setup.open("keepalived-card0", socket: listener.path, extra: ["KEEPALIVED_RELEASE_TIMEOUT": "0.5s"])
            #expect(bad.stderr.contains("KEEPALIVED_RELEASE_TIMEOUT=0.5s is not a whole number of milliseconds from 0 to 10000; waiting 200 ms"), "\(bad.stderr)")
            #expect(bad.elapsed >= .milliseconds(190), "\(bad)")
        }

        @Test("the bare names (no CARD) open the default card and ask keepalived for nothing")
        func bareNamesAskNothing() async throws {
            let setup = try PluginSetup("bare")
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            for (ours, hardware) in [("keepalived", "hw"), ("keepalived-plug", "plughw"), ("keepalived:DEV=0", "hw:DEV=0")] {
                let opened = try await setup.open(ours, socket: listener.path)
                let expected = try await setup.open(hardware, socket: listener.path)
                #expect(opened.result == expected.result, "\(ours): \(opened), \(hardware): \(expected)")
            }
            listener.stop()
            #expect(listener.received == [], "a probe of the bare names takes no card from keepalived")
        }

        @Test("no keepalived (no socket, a stale one, not a socket): no wait and no message")
        func nobodyListening() async throws {
            let setup = try PluginSetup("nobody")
            // A socket bound but never listened on refuses connections, as one a daemon left behind.
            let stale = setup.directory.appendingPathComponent("stale.sock").path
            let bound = try ReleaseListener.boundSocket(stale)
            close(bound)
            let plainFile = setup.directory.appendingPathComponent("plain-file").path
            #expect(FileManager.default.createFile(atPath: plainFile, contents: Data()))
            let expected = try await setup.open("hw:0,0", socket: nil)
            for socket in [setup.directory.appendingPathComponent("absent.sock").path, stale, plainFile] {
                let opened = try await setup.open("keepalived-card0", socket: socket, extra: ["KEEPALIVED_RELEASE_TIMEOUT": "5000"])
                #expect(opened.result == expected.result, "\(socket): \(opened) \(expected)")
                // Far under the 5 s timeout: nothing was waited for.
                #expect(opened.elapsed < .milliseconds(2500), "\(socket): nobody to wait for (\(opened))")
                #expect(!opened.stderr.contains("keepalived"), "\(socket): \(opened.stderr)")
                #expect(opened.leakedDescriptors == 0, "\(socket): \(opened)")
            }
        }

        @Test("a capture open asks nothing")
        func captureAsksNothing() async throws {
            let setup = try PluginSetup("capture")
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            let opened = try await setup.open("keepalived-card0", stream: "capture", socket: listener.path)
            let expected = try await setup.open("hw:0,0", stream: "capture", socket: listener.path)
            let named = try await setup.open("keepalived:0,0", stream: "capture", socket: listener.path)
            listener.stop()
            #expect(listener.received == [], "no connection at all")
            #expect(opened.result == expected.result && named.result == expected.result, "\(opened) \(named) \(expected)")
            #expect(!opened.stderr.contains("keepalived"), "\(opened.stderr)")
        }

        @Test("without KEEPALIVED_SOCKET: the user's daemon at $XDG_RUNTIME_DIR/keepalived/control.sock is asked",
              .enabled(if: !FileManager.default.fileExists(atPath: "/run/keepalived-audio/control.sock"),
                       "a system keepalived runs on this machine: the test would ask it"))
        func defaultSockets() async throws {
            let setup = try PluginSetup("default")
            let directory = setup.runtimeDirectory.appendingPathComponent("keepalived")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let listener = try ReleaseListener(path: directory.appendingPathComponent("control.sock").path, answer: .reply(Self.released))
            defer { listener.stop() }
            let opened = try await setup.open("keepalived-card0", socket: "", extra: ["KEEPALIVED_RELEASE_TIMEOUT": "5000"])
            listener.stop()
            #expect(listener.received == [Self.line(card: 0, device: 0)])
            #expect(!opened.stderr.contains("keepalived"), "the system service's socket is absent: silently skipped (\(opened.stderr))")
            // Answered, not timed out: far under the 5 s timeout.
            #expect(opened.elapsed < .milliseconds(2500), "\(opened)")
        }

        @Test("the shipped names are no outputs of their own: not among the device hints, not in keepalived devices")
        func notListed() async throws {
            let setup = try PluginSetup("hints")
            let names = try await setup.hintNames()
            #expect(names.contains("null"), "the hints are read: \(names)")
            // With cards, alsa-lib lists keepalived:CARD=…,DEV=… beside hw:CARD=…,DEV=… (a card's
            // device, which keepalived's selections skip); never the bare names.
            #expect(!names.contains { $0 == "keepalived" || $0 == "keepalived-plug" }, "\(names)")
            let devices = try await runCommand(TestPaths.keepalivedBinary.path, ["devices", "--json", "--verbose"],
                                               environment: setup.environment, timeout: .seconds(20))
            #expect(devices.status == 0, "\(devices.stderr)")
            #expect(devices.stdout.contains(#""null""#), "\(devices.stdout)")
            // (The test's own PCMs, without hints, are there: alsa.conf's namehint.showall lists those.)
            #expect(!devices.stdout.contains(#""name":"keepalived""#) && !devices.stdout.contains(#""name":"keepalived-plug""#),
                    "\(devices.stdout)")
        }

        /// Interleaved stereo test samples: every bit of the sample field in play, both signs and
        /// both extremes, the channels unlike each other (a swap would show).
        static func pattern(frames: Int, bits: Int) -> [[Int32]] {
            let top = Int32(1) << (bits - 1)
            return (0..<frames).map { frame -> [Int32] in
                switch frame {
                case 0: return [-top, top - 1]
                case 1: return [top - 1, -top]
                default:
                    let left = Int32(truncatingIfNeeded: frame &* 2_654_435_761 >> 7) % top
                    let right = Int32(truncatingIfNeeded: ~(frame &* 40_503 &+ 7) << 3) % top
                    return [left, right]
                }
            }
        }

        /// `samples` as S16_LE (2 bytes) or S24_LE (4 bytes, the sample in the low 3, sign-extended).
        static func bytes(_ samples: [[Int32]], width: Int) -> [UInt8] {
            samples.flatMap { $0 }.flatMap { sample in (0..<width).map { UInt8(truncatingIfNeeded: sample >> ($0 * 8)) } }
        }

        @Test("a card whose hardware takes only IEC958 subframes (a Pi's vc4-hdmi): 16- and 24-bit players through keepalived: get it, their samples framed unchanged at their rate",
              arguments: [(format: "S16_LE", bits: 16, rate: 44100, frames: 1000), (format: "S24_LE", bits: 24, rate: 96000, frames: 2000)])
        func iec958OnlyHardware(player: (format: String, bits: Int, rate: Int, frames: Int)) async throws {
            let state = try TestPaths.makeTemporaryDirectory("pi-hdmi-state")
            defer { try? FileManager.default.removeItem(at: state) }
            let setup = try PluginSetup("iec958-\(player.bits)", hardware: PluginSetup.faultyHardware(state: state, format: "IEC958_SUBFRAME_LE"))
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            let samples = Self.pattern(frames: player.frames, bits: player.bits)
            let played = try await setup.play("keepalived-card0", format: player.format, rate: player.rate,
                                              data: Self.bytes(samples, width: player.bits == 16 ? 2 : 4), socket: listener.path)
            listener.stop()
            #expect(played.status == 0 && played.fields["result"] == "0", "\(played)")
            #expect(played.fields["frames"] == "\(player.frames)" && played.fields["type"] == "IEC958", "\(played)")
            #expect(listener.received == [Self.line(card: 0, device: 0)], "the release is asked for as before")
            let negotiated = try FileContents.text(state.appendingPathComponent("format"))
            #expect(negotiated.hasPrefix("IEC958_SUBFRAME_LE \(player.rate) 2 "), "the hardware runs at the player's rate: \(negotiated)")

            let decoded = IEC958Decoder.decode(Array(try FileContents.data(state.appendingPathComponent("capture.raw"))), channels: 2)
            print("IEC958 capture of a \(player.bits)-bit player at \(player.rate) Hz: \(decoded)")
            // Every subframe valid: preambles, parity, validity and user bits 0, one status block.
            #expect(decoded.problemCount == 0, "\(decoded.problems)")
            #expect(decoded.frames == player.frames, "every frame written, and nothing else: \(decoded)")
            #expect(decoded.blocks == player.frames / 192)
            // Consumer, PCM, not copyrighted (04), original, PCM coder (82), unspecified (00),
            // the player's rate (alsa-lib's FS_NOTID filled in), its word length (AES4: 16 bits
            // 0x02, 24 bits 0x0b), the rest zero.
            let wordLength: UInt8 = player.bits == 16 ? 0x02 : 0x0B
            #expect(decoded.channelStatus == [0x04, 0x82, 0x00, IEC958Decoder.frequencyCode(player.rate)!, wordLength] + [UInt8](repeating: 0, count: 19),
                    "\(decoded.channelStatus)")
            let expected = samples.map { $0.map { player.bits == 16 ? $0 << 8 : $0 } }
            let wrong = zip(decoded.frameSamples, expected).enumerated().filter { $0.element.0 != $0.element.1 }
            #expect(wrong.isEmpty, "\(wrong.count) frames differ, first \(wrong.prefix(3).map { "frame \($0.offset): \($0.element.0) != \($0.element.1)" })")
        }

        @Test("keepalived-plug: on IEC958-only hardware plays on this alsa-lib too (1.2.8: its plug cannot convert to subframes, but the plug-in's framing is plug's slave), the samples exact, the player's rate in the status (issue 58)")
        func iec958OnlyHardwareThroughPlug() async throws {
            let state = try TestPaths.makeTemporaryDirectory("pi-hdmi-plug-state")
            defer { try? FileManager.default.removeItem(at: state) }
            // The shipped keepalived-plug (plug over the plug-in) with card 0 given as an integer,
            // as keepalived-card0 is: this machine has no card 0 to look the string "0" up.
            let hardware = try PluginSetup.faultyHardware(state: state, format: "IEC958_SUBFRAME_LE") + """

                pcm.keepalived-plug-card0 { type plug slave.pcm { type keepalived card 0 device 0 } }
                """
            let setup = try PluginSetup("iec958-plug", hardware: hardware)
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            let samples = Self.pattern(frames: 1000, bits: 16)
            let played = try await setup.play("keepalived-plug-card0", format: "S16_LE", rate: 44100, data: Self.bytes(samples, width: 2), socket: listener.path)
            listener.stop()
            #expect(played.status == 0 && played.fields["result"] == "0" && played.fields["type"] == "PLUG", "\(played)")
            #expect(listener.received == [Self.line(card: 0, device: 0)])
            let negotiated = try FileContents.text(state.appendingPathComponent("format"))
            #expect(negotiated.hasPrefix("IEC958_SUBFRAME_LE 44100 2 "), "\(negotiated)")
            let decoded = IEC958Decoder.decode(Array(try FileContents.data(state.appendingPathComponent("capture.raw"))), channels: 2)
            print("IEC958 capture of a 16-bit player through keepalived-plug: \(decoded)")
            #expect(decoded.problemCount == 0 && decoded.frames == 1000, "\(decoded)")
            #expect(Array(decoded.channelStatus.prefix(4)) == [0x04, 0x82, 0x00, IEC958Decoder.frequencyCode(44100)!], "\(decoded.channelStatus)")
            let wrong = zip(decoded.frameSamples, samples.map { $0.map { $0 << 8 } }).filter { $0.0 != $0.1 }
            #expect(wrong.isEmpty, "\(wrong.count) frames differ")
        }

        @Test("hardware that takes a linear format gets the player's samples as they are: no framing")
        func linearHardwareAsItIs() async throws {
            let state = try TestPaths.makeTemporaryDirectory("linear-state")
            defer { try? FileManager.default.removeItem(at: state) }
            let setup = try PluginSetup("linear", hardware: PluginSetup.faultyHardware(state: state, format: nil))
            let samples = Self.pattern(frames: 500, bits: 16)
            let data = Self.bytes(samples, width: 2)
            let played = try await setup.play("keepalived-card0", format: "S16_LE", rate: 48000, data: data, socket: nil)
            #expect(played.fields["result"] == "0" && played.fields["type"] != "IEC958", "\(played)")
            let negotiated = try FileContents.text(state.appendingPathComponent("format"))
            #expect(negotiated.hasPrefix("S16_LE 48000 2 "), "\(negotiated)")
            #expect(Array(try FileContents.data(state.appendingPathComponent("capture.raw"))) == data)
        }

        @Test("a box's default through keepalived (a slave): the release is asked for, then 16- and 24-bit players play through the card's own default chain, their samples exact in the subframes",
              arguments: [(format: "S16_LE", bits: 16, rate: 48000, frames: 960), (format: "S24_LE", bits: 24, rate: 96000, frames: 1920)])
        func frontDoorDefault(player: (format: String, bits: Int, rate: Int, frames: Int)) async throws {
            let state = try TestPaths.makeTemporaryDirectory("front-door-state")
            defer { try? FileManager.default.removeItem(at: state) }
            // A card default as vc4-hdmi.conf's on alsa-lib 1.2.8: plug over alsa-lib's iec958
            // framing over the IEC958-only hardware (softvol left out: it needs a card's mixer).
            // The shipped keepalived-default names sysdefault:CARD=…, whose card string this
            // machine cannot look up (no card 0): the test's PCM passes card 0 as an integer.
            let hardware = try PluginSetup.faultyHardware(state: state, format: "IEC958_SUBFRAME_LE") + """

                pcm.!sysdefault {
                    @args [ CARD ]
                    @args.CARD { type string default "0" }
                    type plug
                    slave.pcm { type iec958 slave { pcm "hw:0,0" format IEC958_SUBFRAME_LE } status [ 0x04 0x82 0x00 0x02 ] }
                }
                pcm.front-door-card0 { type keepalived card 0 device 0 slave "sysdefault:CARD=0" }
                pcm.front-door-empty { type keepalived card 0 slave "" }
                """
            let setup = try PluginSetup("front-door-\(player.bits)", hardware: hardware)
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            let samples = Self.pattern(frames: player.frames, bits: player.bits)
            let played = try await setup.play("front-door-card0", format: player.format, rate: player.rate,
                                              data: Self.bytes(samples, width: player.bits == 16 ? 2 : 4), socket: listener.path)
            let empty = try await setup.open("front-door-empty", socket: listener.path)
            listener.stop()
            #expect(played.status == 0 && played.fields["result"] == "0", "\(played)")
            #expect(played.fields["type"] == "PLUG", "the player has the card's default chain itself: \(played)")
            #expect(listener.received == [Self.line(card: 0, device: 0)], "asked before the open, once")
            // The chain ends on the test's hardware, not a hw PCM: nothing keepalived could carry it on.
            #expect(listener.carryRequests.isEmpty, "\(listener.carryRequests)")
            let negotiated = try FileContents.text(state.appendingPathComponent("format"))
            #expect(negotiated.hasPrefix("IEC958_SUBFRAME_LE \(player.rate) 2 "), "the player's rate, framed by the chain: \(negotiated)")
            let decoded = IEC958Decoder.decode(Array(try FileContents.data(state.appendingPathComponent("capture.raw"))), channels: 2)
            #expect(decoded.problemCount == 0 && decoded.frames == player.frames, "\(decoded)")
            let wrong = zip(decoded.frameSamples, samples.map { $0.map { player.bits == 16 ? $0 << 8 : $0 } }).filter { $0.0 != $0.1 }
            #expect(wrong.isEmpty, "\(wrong.count) frames differ")
            #expect(empty.result == -EINVAL && empty.stderr.contains("slave must be a PCM's name"), "\(empty)")
        }

        @Test("a slave whose chain ends on the card's hw PCM through plug and softvol asks to be carried first; refused, it asks for the release; through dmix it asks for the release only",
              .enabled(if: !FileManager.default.fileExists(atPath: "/dev/snd/controlC0"), "card 0 exists here: the chain would open it"))
        func frontDoorCarryFirst() async throws {
            let chains = """
                pcm.chain-hw { type plug slave.pcm { type softvol control.name "Test Volume" slave.pcm { type hw card 0 device 0 } } }
                pcm.chain-dmix { type plug slave.pcm { type dmix ipc_key 4711 slave.pcm { type hw card 0 device 0 } } }
                pcm.front-door-hw { type keepalived card 0 device 0 slave "chain-hw" }
                pcm.front-door-dmix { type keepalived card 0 device 0 slave "chain-dmix" }
                """
            let setup = try PluginSetup("front-door-carry", hardware: chains)
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            // No card 0 here: both end where the chain's hw PCM is opened, after their requests.
            let carriable = try await setup.open("front-door-hw", socket: listener.path)
            let carryRequests = listener.carryRequests
            let dmix = try await setup.open("front-door-dmix", socket: listener.path)
            listener.stop()
            #expect(carriable.result < 0 && dmix.result < 0, "\(carriable) \(dmix)")
            #expect(carryRequests == [Self.line(card: 0, device: 0).replacingOccurrences(of: #""request":"release""#, with: #""request":"carry""#)],
                    "\(carryRequests)")
            #expect(listener.carryRequests.count == 1, "dmix needs the hw PCM itself: no carry request for it")
            #expect(listener.received == [Self.line(card: 0, device: 0), Self.line(card: 0, device: 0)], "each released once")
            #expect(carriable.leakedDescriptors == 0 && dmix.leakedDescriptors == 0)
        }

        @Test("keepalived's own open (its process marked by KEEPALIVED_DAEMON_PID) asks nothing: through a chain a player would be carried on, the card's hw PCM at once; through dmix, its slave; a child's inherited mark (another pid) is a player's",
              .enabled(if: !FileManager.default.fileExists(atPath: "/dev/snd/controlC0"), "card 0 exists here: the chain would open it"))
        func daemonsOwnOpen() async throws {
            let state = try TestPaths.makeTemporaryDirectory("daemon-own-state")
            defer { try? FileManager.default.removeItem(at: state) }
            // The test's hardware answers `hw:…` names (pcm.hw), which the plug-in opens for the
            // daemon; the chains' own `type hw` finds no card 0 here, so a player's open fails.
            let chains = try PluginSetup.faultyHardware(state: state, format: nil) + """

                pcm.chain-hw { type plug slave.pcm { type softvol control.name "Test Volume" slave.pcm { type hw card 0 device 0 } } }
                pcm.chain-dmix { type plug slave.pcm { type dmix ipc_key 4712 slave.pcm { type hw card 0 device 0 } } }
                pcm.front-door-hw { type keepalived card 0 device 0 slave "chain-hw" }
                pcm.front-door-dmix { type keepalived card 0 device 0 slave "chain-dmix" }
                """
            let setup = try PluginSetup("daemon-own", hardware: chains)
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            let daemon = ["ALSA_OPEN_AS_DAEMON": "1"]
            let samples = Self.pattern(frames: 480, bits: 16)
            let played = try await setup.play("front-door-hw", format: "S16_LE", rate: 48000, data: Self.bytes(samples, width: 2),
                                              socket: listener.path, extra: daemon)
            let dmix = try await setup.open("front-door-dmix", socket: listener.path, extra: daemon)
            let asked = (listener.received, listener.carryRequests)
            // A hook's player, which inherits the daemon's variable: asks as any player does.
            let child = try await setup.open("front-door-hw", socket: listener.path, extra: ["KEEPALIVED_DAEMON_PID": "1"])
            listener.stop()
            #expect(played.status == 0 && played.fields["result"] == "0" && played.fields["frames"] == "480", "\(played)")
            #expect(played.fields["type"] == "IOPLUG", "the card's hw PCM (the test's hardware), not the chain's plug: \(played)")
            #expect(dmix.result < 0, "dmix over a card that is not here: \(dmix)")
            #expect(asked.0.isEmpty && asked.1.isEmpty, "keepalived asks nothing of itself: \(asked)")
            #expect(child.result < 0 && listener.carryRequests.count == 1 && listener.received == [Self.line(card: 0, device: 0)],
                    "\(child) carry \(listener.carryRequests) release \(listener.received)")
        }

        @Test("the shipped keepalived-default opens the card's sysdefault, and 60-keepalived-default.conf makes it the default")
        func shippedDefault() async throws {
            let shipped = try FileContents.text(TestPaths.repositoryRoot.appendingPathComponent("packaging/alsa/60-keepalived-default.conf"))
            #expect(shipped.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty } == ["pcm.!default keepalived-default"])
            let setup = try PluginSetup("shipped-default")
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            // No card here: both fail the same way, on the card's lookup, before any release.
            let opened = try await setup.open("keepalived-default", socket: listener.path)
            let expected = try await setup.open("sysdefault", socket: listener.path)
            listener.stop()
            #expect(opened.result == expected.result && opened.result < 0, "\(opened) \(expected)")
            #expect(listener.received == [])
        }

        @Test("a slave that leads back to a keepalived PCM being opened (itself, `default` which is it, through a plug) fails at once with ELOOP, naming the loop, after one release at most",
              arguments: [("loop-self", "loop-self -> loop-self"), ("default", "default -> default"), ("loop-a", "loop-a -> loop-b -> loop-a")])
        func slaveLoop(_ name: String, _ chain: String) async throws {
            // alsa-lib counts the hops of one open's slaves, but the plug-in's open of its slave by
            // name starts a count of its own: without a guard each level asked for a release and
            // opened the next until the stack ran out.
            let loops = """
                pcm.loop-self { type keepalived card 0 device 0 slave "loop-self" }
                pcm.!default { type keepalived card 0 device 0 slave "default" }
                pcm.loop-a { type keepalived card 0 device 0 slave "loop-b" }
                pcm.loop-b { type plug slave.pcm "loop-a" }
                """
            let setup = try PluginSetup("loop-\(name)", hardware: loops)
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            let opened = try await setup.open(name, socket: listener.path)
            listener.stop()
            #expect(opened.result == -ELOOP, "\(opened)")
            #expect(opened.stderr.contains("keepalived: the slave leads back to a keepalived PCM being opened: \(chain)"), "\(opened.stderr)")
            // A slave named as the PCM itself is a loop before anything is asked; one found a level
            // down was asked for once, at the top.
            let asked = name == "loop-a" ? [Self.line(card: 0, device: 0)] : []
            #expect(listener.received == asked, "one release at most, never one per level")
            #expect(opened.leakedDescriptors == 0, "\(opened)")
        }

        @Test("the configuration: card, device, subdevice, comment, type and hint; anything else fails the open")
        func configurationKeys() async throws {
            let setup = try PluginSetup("keys")
            let listener = try ReleaseListener(path: setup.socket, answer: .reply(Self.released))
            defer { listener.stop() }
            let commented = try await setup.open("keepalived-commented", socket: listener.path)
            let expected = try await setup.open("hw:0,0", socket: listener.path)
            let unknown = try await setup.open("keepalived-unknown", socket: listener.path)
            let noCard = try await setup.open("keepalived-nocard", socket: listener.path)
            let badDevice = try await setup.open("keepalived-baddevice", socket: listener.path)
            listener.stop()
            #expect(commented.result == expected.result, "\(commented) \(expected)")
            #expect(unknown.result == -EINVAL && unknown.stderr.contains("Unknown field colour"), "\(unknown)")
            #expect(noCard.result == -EINVAL && noCard.stderr.contains("card is not defined"), "\(noCard)")
            #expect(badDevice.result == -EINVAL && badDevice.stderr.contains("Invalid type for device"), "\(badDevice)")
            #expect(listener.received == [Self.line(card: 0, device: 0)], "only the valid definition asks")
        }
    }
}

// MARK: - Support

/// A private ALSA configuration for one test: alsa-lib's own, the plug-in built from this
/// checkout as `pcm_type.keepalived`, the shipped 50-keepalived.conf and a few test PCMs; its
/// directory goes with it.
final class PluginSetup {
    let directory: URL
    let config: URL
    let runtimeDirectory: URL
    /// Where the test's stand-in for keepalived listens.
    var socket: String { directory.appendingPathComponent("control.sock").path }

    /// `hardware`: ALSA configuration that stands in for the card's hw PCM, which this machine
    /// does not have (``iec958Hardware(state:)``); it is added after alsa.conf, so a `pcm.!hw`
    /// there is what the plug-in's own `hw:CARD=…` open finds.
    init(_ label: String, hardware: String = "") throws {
        let built = try ALSAPluginBuild.get()
        directory = try TestPaths.makeTemporaryDirectory("alsa-plugin-\(label)")
        config = directory.appendingPathComponent("asound.conf")
        runtimeDirectory = directory.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtimeDirectory, withIntermediateDirectories: true)
        let shipped = try FileContents.text(TestPaths.repositoryRoot.appendingPathComponent("packaging/alsa/50-keepalived.conf"))
        let text = """
            </usr/share/alsa/alsa.conf>
            pcm_type.keepalived { lib "\(built.library.path)" }
            \(shipped)
            pcm.keepalived-card0 { type keepalived card 0 device 0 }
            pcm.keepalived-card3 { type keepalived card 3 device 7 subdevice 1 }
            pcm.keepalived-commented { type keepalived card 0 comment "accepted" hint { description "accepted too" } }
            pcm.keepalived-unknown { type keepalived card 0 colour blue }
            pcm.keepalived-nocard { type keepalived device 0 }
            pcm.keepalived-baddevice { type keepalived card 0 device "zero" }
            \(hardware)

            """
        try text.write(to: config, atomically: true, encoding: .utf8)
    }

    deinit {
        TestPaths.removeTemporaryDirectory(directory)
    }

    /// Every `hw:` PCM as the faulty test PCM recording into `state`, taking `format` only: the
    /// plug-in's open of `hw:CARD=0,DEV=0,SUBDEV=-1` (an integer card is not looked up) then ends
    /// at it, through the same configuration lookup as on a card. With `IEC958_SUBFRAME_LE` it
    /// stands in for a Raspberry Pi's vc4-hdmi hardware; nil: the faulty PCM's linear formats.
    static func faultyHardware(state: URL, format: String?) throws -> String {
        let library = try FaultyDevice.pluginLibrary()
        return """
            pcm_type.faulty { lib "\(library.path)" }
            pcm.!hw {
                @args [ CARD DEV SUBDEV ]
                @args.CARD { type string }
                @args.DEV { type integer }
                @args.SUBDEV { type integer }
                type faulty
                state "\(state.path)"
                \(format.map { "format \"\($0)\"" } ?? "")
            }
            """
    }

    /// What a player's playback came to (``play(_:format:rate:samples:socket:)``).
    struct Played: CustomStringConvertible {
        let status: Int32
        /// `key=value` words the player printed: result, frames, type (the PCM type it got).
        let fields: [String: String]
        let stderr: String
        var description: String { "status=\(status) \(fields) stderr=\(stderr.debugDescription)" }
    }

    /// Plays `data` (interleaved stereo in `format`: S16_LE or S24_LE) through `name` as a player
    /// does: blocking open, snd_pcm_set_params, every frame written, drained, closed.
    func play(_ name: String, format: String, rate: Int, data: [UInt8], socket: String?, extra: [String: String] = [:]) async throws -> Played {
        let file = directory.appendingPathComponent("play-\(format)-\(rate).raw")
        try Data(data).write(to: file)
        var environment = environment.merging(extra) { $1 }
        environment["KEEPALIVED_SOCKET"] = socket ?? directory.appendingPathComponent("nothing-here.sock").path
        let run = try await runCommand(ALSAPluginBuild.get().opener.path, ["--play", name, format, "\(rate)", file.path],
                                       environment: environment, timeout: .seconds(20))
        var fields: [String: String] = [:]
        for word in run.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let parts = word.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return Played(status: run.status, fields: fields, stderr: run.stderr)
    }

    /// The environment of a process that reads this configuration.
    var environment: [String: String] {
        ["ALSA_CONFIG_PATH": config.path, "HOME": directory.path, "XDG_RUNTIME_DIR": runtimeDirectory.path]
    }

    /// The names alsa-lib's device hints give (what `aplay -L` and keepalived's selections read).
    func hintNames() async throws -> [String] {
        let run = try await runCommand(ALSAPluginBuild.get().opener.path, ["--hints"], environment: environment, timeout: .seconds(10))
        guard run.status == 0 else { throw Failed(what: "alsa-open --hints", log: run.stdout + run.stderr) }
        return run.stdout.split(separator: "\n").map(String.init)
    }

    /// What one open came to.
    struct Opened: CustomStringConvertible {
        let result: Int32
        let elapsed: Duration
        let leakedDescriptors: Int
        let stderr: String
        var description: String { "result=\(result) elapsed=\(elapsed) leaked=\(leakedDescriptors) stderr=\(stderr.debugDescription)" }
    }

    /// Opens `name` for `stream` (playback or capture) in the opener, with KEEPALIVED_SOCKET set to
    /// `socket` (nil: a path where nothing is; "": unset, so the default sockets are asked).
    func open(_ name: String, stream: String = "playback", socket: String?, extra: [String: String] = [:]) async throws -> Opened {
        var environment = environment.merging(extra) { $1 }
        environment["KEEPALIVED_SOCKET"] = socket ?? directory.appendingPathComponent("nothing-here.sock").path
        let run = try await runCommand(ALSAPluginBuild.get().opener.path, [name, stream], environment: environment, timeout: .seconds(10))
        var fields: [String: Int64] = [:]
        for word in run.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let parts = word.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let value = Int64(parts[1]) { fields[String(parts[0])] = value }
        }
        guard run.status == 0, let result = fields["result"], let nanoseconds = fields["elapsed_ns"], let leaked = fields["leaked_fds"] else {
            throw Failed(what: "alsa-open \(name) \(stream)", log: run.stdout + run.stderr)
        }
        return Opened(result: Int32(result), elapsed: .nanoseconds(nanoseconds), leakedDescriptors: Int(leaked), stderr: run.stderr)
    }
}

/// The plug-in (scripts/build-alsa-plugin, as scripts/package builds it) and the opener, built
/// once per test process into a directory of its own.
enum ALSAPluginBuild {
    struct Built {
        let library: URL
        let opener: URL
    }

    private static let built = TestLock<Result<Built, Failed>?>(nil)
    private static let prefix = "keepalived-alsa-plugin-build-"

    static func get() throws -> Built {
        try built.withLock { cached in
            if let cached { return try cached.get() }
            let result: Result<Built, Failed>
            do {
                result = .success(try build())
            } catch {
                result = .failure(error as? Failed ?? Failed(what: "building the plug-in", log: "\(error)"))
            }
            cached = result
            return try result.get()
        }
    }

    private static func build() throws -> Built {
        let temporary = FileManager.default.temporaryDirectory
        // Each test process builds its own; those of processes that have exited go.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [] where name.hasPrefix(prefix) {
            if let pid = pid_t(name.dropFirst(prefix.count)), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH {
                try? FileManager.default.removeItem(at: temporary.appendingPathComponent(name))
            }
        }
        let output = temporary.appendingPathComponent("\(prefix)\(getpid())")
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        let source = output.appendingPathComponent("alsa-open.c")
        try openerSource.write(to: source, atomically: true, encoding: .utf8)
        let opener = output.appendingPathComponent("alsa-open")
        try run("/bin/sh", [TestPaths.repositoryRoot.appendingPathComponent("scripts/build-alsa-plugin").path, output.path], in: output)
        try run(ChildProcess.which(ProcessInfo.processInfo.environment["CC"] ?? "cc"),
                ["-O2", "-Wall", "-Wextra", "-Werror", "-o", opener.path, source.path, "-lasound"], in: output)
        return Built(library: output.appendingPathComponent("libasound_module_pcm_keepalived.so"), opener: opener)
    }

    private static func run(_ executable: String, _ arguments: [String], in directory: URL) throws {
        let child = try ChildProcess(executable, arguments, directory: directory, label: "build")
        let status = child.waitForExitBlocking(timeout: .seconds(60))
        defer {
            try? FileManager.default.removeItem(at: child.stdoutURL)
            try? FileManager.default.removeItem(at: child.stderrURL)
        }
        guard status == 0 else { throw Failed(what: ([executable] + arguments).joined(separator: " "), log: child.stdout + child.stderr) }
    }

    /// Opens one PCM as a player does (SND_PCM_NONBLOCK) and prints what came of it; only the
    /// open is timed (the configuration is read before), and the descriptors it left open counted.
    /// `--hints`: the PCM names of alsa-lib's device hints (`aplay -L`), one a line.
    /// `--play PCM FORMAT RATE FILE`: plays FILE's interleaved stereo frames as a player does
    /// (aplay pads its last period with silence; this writes exactly the file's frames).
    static let openerSource = """
        #include <alsa/asoundlib.h>
        #include <dirent.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <time.h>
        #include <unistd.h>

        static int play(const char *name, const char *format_name, unsigned rate, const char *path) {
            snd_pcm_format_t format = snd_pcm_format_value(format_name);
            FILE *file = fopen(path, "rb");
            if (format == SND_PCM_FORMAT_UNKNOWN || !file) { fprintf(stderr, "bad format or file\\n"); return 2; }
            static unsigned char data[1 << 20];
            size_t bytes = fread(data, 1, sizeof data, file);
            fclose(file);
            size_t frame = (size_t)snd_pcm_format_physical_width(format) / 8 * 2;
            snd_pcm_uframes_t frames = bytes / frame, done = 0;
            snd_pcm_t *pcm;
            int result = snd_pcm_open(&pcm, name, SND_PCM_STREAM_PLAYBACK, 0);
            if (result < 0) { printf("result=%d\\n", result); return 0; }
            result = snd_pcm_set_params(pcm, format, SND_PCM_ACCESS_RW_INTERLEAVED, 2, rate, 0, 200000);
            while (result >= 0 && done < frames) {
                snd_pcm_sframes_t written = snd_pcm_writei(pcm, data + done * frame, frames - done);
                if (written < 0) result = (int)written; else done += (snd_pcm_uframes_t)written;
            }
            if (result >= 0) result = snd_pcm_drain(pcm);
            printf("result=%d frames=%lu type=%s\\n", result, (unsigned long)done, snd_pcm_type_name(snd_pcm_type(pcm)));
            snd_pcm_close(pcm);
            return 0;
        }

        static int open_descriptors(void) {
            int count = 0;
            DIR *directory = opendir("/proc/self/fd");
            if (!directory) return -1000;
            while (readdir(directory)) count++;
            closedir(directory);
            return count;
        }

        int main(int argc, char **argv) {
            // As `keepalived run` marks its own process for the plug-in.
            if (getenv("ALSA_OPEN_AS_DAEMON")) {
                char pid[32];
                snprintf(pid, sizeof pid, "%ld", (long)getpid());
                setenv("KEEPALIVED_DAEMON_PID", pid, 1);
            }
            if (argc == 2 && strcmp(argv[1], "--hints") == 0) {
                void **hints;
                if (snd_device_name_hint(-1, "pcm", &hints) < 0) return 1;
                for (void **hint = hints; *hint; hint++) {
                    char *name = snd_device_name_get_hint(*hint, "NAME");
                    if (name) printf("%s\\n", name);
                    free(name);
                }
                snd_device_name_free_hint(hints);
                return 0;
            }
            if (argc == 6 && strcmp(argv[1], "--play") == 0) return play(argv[2], argv[3], (unsigned)atoi(argv[4]), argv[5]);
            if (argc != 3) {
                fprintf(stderr, "usage: alsa-open PCM playback|capture, alsa-open --hints, or alsa-open --play PCM FORMAT RATE FILE\\n");
                return 2;
            }
            snd_pcm_stream_t stream = strcmp(argv[2], "capture") == 0 ? SND_PCM_STREAM_CAPTURE : SND_PCM_STREAM_PLAYBACK;
            snd_config_update();
            int before = open_descriptors();
            snd_pcm_t *pcm = NULL;
            struct timespec start, end;
            clock_gettime(CLOCK_MONOTONIC, &start);
            int result = snd_pcm_open(&pcm, argv[1], stream, SND_PCM_NONBLOCK);
            clock_gettime(CLOCK_MONOTONIC, &end);
            if (result >= 0) snd_pcm_close(pcm);
            long long elapsed = (end.tv_sec - start.tv_sec) * 1000000000LL + (end.tv_nsec - start.tv_nsec);
            printf("result=%d elapsed_ns=%lld leaked_fds=%d\\n", result, elapsed, open_descriptors() - before);
            return 0;
        }

        """
}

/// A stand-in for keepalived's control socket: takes each connection's bytes (the request line
/// and anything after it until the client closes) and answers with `reply`, or holds the
/// connection and never answers. A carry request (issue 60) it refuses at once as a keepalived
/// that cannot carry does, and records apart (`carryRequests`): what these tests check is the
/// release, which follows it.
final class ReleaseListener: @unchecked Sendable {
    enum Answer: Sendable {
        case reply(String)
        case silence
        /// Lines sent one after another, each after its pause; then the connection is held
        /// until the plug-in closes it.
        case lines([(after: Duration, line: String)])
    }

    let path: String
    private let listener: Int32
    private let answer: Answer
    private let lock = NSLock()
    private var connections: [String] = []
    private var carries: [String] = []
    private var stopping = false
    private let finished = DispatchSemaphore(value: 0)

    init(path: String, answer: Answer) throws {
        self.path = path
        self.answer = answer
        listener = try Self.boundSocket(path)
        guard listen(listener, 8) == 0 else {
            let code = errno
            close(listener)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        Thread.detachNewThread { [self] in serve() }
    }

    /// What each connection sent, in order, carry requests left out; read after `stop`.
    var received: [String] {
        lock.withLock { connections }
    }

    /// The carry requests, in order; read after `stop`.
    var carryRequests: [String] {
        lock.withLock { carries }
    }

    /// Stops taking connections, closes the held ones and removes the socket; once is enough, more
    /// do nothing. (The thread holds the listener until then: every test stops its own.)
    func stop() {
        let first = lock.withLock {
            defer { stopping = true }
            return !stopping
        }
        guard first else { return }
        finished.wait()
        close(listener)
        unlink(path)
    }

    /// A Unix stream socket bound to `path`.
    static func boundSocket(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, result == 0 else {
            let code = errno
            if fd >= 0 { close(fd) }
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        return fd
    }

    private func serve() {
        var held: [Int32] = []
        defer {
            held.forEach { close($0) }
            finished.signal()
        }
        while !lock.withLock({ stopping }) {
            var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 20) == 1 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var bytes = Self.readLine(client)
            if String(decoding: bytes, as: UTF8.self).contains(#""request":"carry""#) {
                let refusal = Array((#"{"ok":false,"carry":false,"error":"not carrying here"}"# + "\n").utf8)
                _ = refusal.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(client)
                lock.withLock { carries.append(String(decoding: bytes, as: UTF8.self)) }
                continue
            }
            switch answer {
            case .reply(let reply):
                let line = Array((reply + "\n").utf8)
                _ = line.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                // Anything more than its one line, until the plug-in closes its end.
                var byte: UInt8 = 0
                while recv(client, &byte, 1, 0) == 1 { bytes.append(byte) }
                close(client)
            case .silence:
                held.append(client)
            case .lines(let lines):
                for (pause, text) in lines {
                    usleep(UInt32(pause.components.seconds * 1_000_000 + pause.components.attoseconds / 1_000_000_000_000))
                    let line = Array((text + "\n").utf8)
                    _ = line.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
                var byte: UInt8 = 0
                while recv(client, &byte, 1, 0) == 1 { bytes.append(byte) }
                close(client)
            }
            lock.withLock { connections.append(String(decoding: bytes, as: UTF8.self)) }
        }
    }

    /// The bytes up to and including the first newline, or all until the end or the timeout.
    private static func readLine(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while recv(fd, &byte, 1, 0) == 1 {
            bytes.append(byte)
            if byte == UInt8(ascii: "\n") { break }
        }
        return bytes
    }
}
