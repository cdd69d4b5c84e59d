import Foundation
import Testing
@testable import KeepAlive

/// The name an output's PCM is opened by: `hdmi:` asks for the rate "not indicated" (issue 58).
@Suite("PCM open names")
struct PCMOpenNameTests {
    @Test("hdmi: names that set no AES3 get AES3=0x01, whatever else they set", arguments: [
        ("hdmi:CARD=vc4hdmi0", "hdmi:CARD=vc4hdmi0,AES3=0x01"),
        ("hdmi:CARD=vc4hdmi0,DEV=0", "hdmi:CARD=vc4hdmi0,DEV=0,AES3=0x01"),
        ("hdmi:CARD=PCH,DEV=1,AES0=0x06", "hdmi:CARD=PCH,DEV=1,AES0=0x06,AES3=0x01"),
        ("hdmi:0,1", "hdmi:0,1,AES3=0x01"),
        ("hdmi:0,0,4,130,0", "hdmi:0,0,4,130,0,AES3=0x01"),
        ("hdmi:CARD=\"My, card\"", "hdmi:CARD=\"My, card\",AES3=0x01"),
        ("hdmi", "hdmi:AES3=0x01"),
        ("hdmi:", "hdmi:AES3=0x01"),
    ])
    func added(_ name: String, _ opened: String) {
        #expect(PCMOpenName.candidate(name) == opened)
    }

    @Test("names left as they are: AES3 of the user's own (by name or position), configuration syntax, other PCMs", arguments: [
        "hdmi:CARD=vc4hdmi0,AES3=0x02",
        "hdmi:CARD=vc4hdmi0, AES3 =2",
        "hdmi:0,0,4,130,0,2",
        "hdmi:{ CARD vc4hdmi0 }",
        "hdmi:CARD=\"unterminated",
        "hw:CARD=vc4hdmi0,DEV=0",
        "iec958:CARD=PCH",
        "hdmi2:CARD=x",
        "default",
        "sysdefault:CARD=vc4hdmi0",
    ])
    func leftAlone(_ name: String) {
        #expect(PCMOpenName.candidate(name) == name)
    }

    /// `configuration` written to a file of its own, for ``PCMOpenName/forOpening(_:configurationFile:)``.
    func opened(_ name: String, configuration: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pcm-open-name-\(UUID().uuidString).conf").path
        try configuration.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return PCMOpenName.forOpening(name, configurationFile: path)
    }

    @Test("alsa-lib's layout (alsa.conf's pcm.hdmi names cards.pcm.hdmi, hdmi.conf's, with AES3 among its arguments): the name asks for the rate not indicated")
    func alsaLayout() throws {
        let configuration = """
            pcm.hdmi cards.pcm.hdmi
            cards.pcm.hdmi {
                @args [ CARD DEV AES0 AES1 AES2 AES3 ]
                @args.CARD { type string default "x" }
                @args.DEV { type integer default 0 }
                @args.AES0 { type integer default 0x04 }
                @args.AES1 { type integer default 0x82 }
                @args.AES2 { type integer default 0x00 }
                @args.AES3 { type integer default 0x02 }
                type null
            }
            """
        #expect(try opened("hdmi:CARD=vc4hdmi0", configuration: configuration) == "hdmi:CARD=vc4hdmi0,AES3=0x01")
        #expect(try opened("hdmi:CARD=vc4hdmi0,AES3=0x02", configuration: configuration) == "hdmi:CARD=vc4hdmi0,AES3=0x02")
    }

    @Test("a pcm.hdmi of the user's own without an AES3 argument, or none at all: the name as given")
    func noAES3Argument() throws {
        let own = """
            pcm.hdmi {
                @args [ CARD ]
                @args.CARD { type string default "x" }
                type null
            }
            """
        #expect(try opened("hdmi:CARD=vc4hdmi0", configuration: own) == "hdmi:CARD=vc4hdmi0")
        #expect(try opened("hdmi", configuration: "pcm.hdmi { type null }") == "hdmi")
        #expect(try opened("hdmi:CARD=vc4hdmi0", configuration: "pcm.null { type null }") == "hdmi:CARD=vc4hdmi0")
    }
}
