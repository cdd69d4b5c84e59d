import CKeepalivedPCM
import Foundation
import TestSupport
import Testing

/// The `keepalived` ALSA plug-in's pure pieces, called as the plug-in calls them.
@Suite("The ALSA plug-in's request line, hw name and reply reading")
struct PluginHelperTests {
    // MARK: - Calling the C helpers

    /// The request line for `program` given as raw bytes (nil: a NULL program).
    static func requestLine(card: Int32 = 0, device: Int32 = 0, programBytes: [UInt8]?,
                            size: Int = Int(CKEEPALIVED_PCM_REQUEST_MAX)) -> (length: Int32, text: String) {
        var buffer = [CChar](repeating: 0x55, count: size)
        let length: Int32
        if let programBytes {
            let terminated = programBytes.map { CChar(bitPattern: $0) } + [0]
            length = terminated.withUnsafeBufferPointer { ckeepalived_pcm_request_line(&buffer, size, card, device, $0.baseAddress) }
        } else {
            length = ckeepalived_pcm_request_line(&buffer, size, card, device, nil)
        }
        return (length, size > 0 ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "")
    }

    static func requestLine(card: Int32 = 0, device: Int32 = 0, program: String) -> String {
        let (length, text) = requestLine(card: card, device: device, programBytes: Array(program.utf8))
        #expect(length == Int32(text.utf8.count))
        return text
    }

    /// The program field of a request line, read back by Foundation's JSON reader.
    static func decodedProgram(_ line: String) throws -> String {
        #expect(line.hasSuffix("\n") && line.filter { $0 == "\n" }.count == 1, "\(line.debugDescription)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        #expect(object["request"] as? String == "release")
        return try #require(object["program"] as? String)
    }

    static func hwName(_ card: Int32, _ device: Int32, _ subdevice: Int32, size: Int = Int(CKEEPALIVED_PCM_HW_NAME_MAX)) -> (Int32, String) {
        var buffer = [CChar](repeating: 0x55, count: size)
        let length = ckeepalived_pcm_hw_name(&buffer, size, card, device, subdevice)
        return (length, String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    static func parse(_ reply: String, errorSize: Int = 256) -> (result: Int32, error: String) {
        parse(Array(reply.utf8), errorSize: errorSize)
    }

    static func parse(_ reply: [UInt8], errorSize: Int = 256) -> (result: Int32, error: String) {
        var error = [CChar](repeating: 0x55, count: errorSize)
        let result = reply.map { CChar(bitPattern: $0) }.withUnsafeBufferPointer {
            ckeepalived_pcm_parse_reply($0.baseAddress, $0.count, &error, errorSize, nil)
        }
        let bytes = error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        #expect(errorSize == 0 || bytes.count < errorSize, "the error text must be NUL-terminated inside its buffer")
        #expect(String(validating: bytes, as: UTF8.self) != nil, "the error text must be valid UTF-8: \(bytes)")
        return (result, String(decoding: bytes, as: UTF8.self))
    }

    // MARK: - The request line

    @Test("the line: request, card, device and program, one JSON object and a newline")
    func plainLine() {
        #expect(Self.requestLine(program: "mpd") == #"{"request":"release","card":0,"device":0,"program":"mpd"}"# + "\n")
        #expect(Self.requestLine(card: 2, device: 7, program: "squeezelite")
                == #"{"request":"release","card":2,"device":7,"program":"squeezelite"}"# + "\n")
        #expect(Self.requestLine(card: 255, device: 31, program: "shairport-sync")
                == #"{"request":"release","card":255,"device":31,"program":"shairport-sync"}"# + "\n")
        #expect(Self.requestLine(programBytes: nil).text == #"{"request":"release","card":0,"device":0,"program":""}"# + "\n")
        #expect(Self.requestLine(program: "") == #"{"request":"release","card":0,"device":0,"program":""}"# + "\n")
    }

    @Test("quotes, backslashes and control characters are escaped; other characters pass as they are")
    func escaping() throws {
        #expect(Self.requestLine(program: #"a"b\c"#).contains(#""program":"a\"b\\c"}"#))
        #expect(Self.requestLine(program: "tab\there\nnl\u{1}\u{1F}").contains(#""program":"tab\u0009here\u000anl\u0001\u001f"}"#))
        #expect(Self.requestLine(program: "del\u{7F}/slash").contains("\"program\":\"del\u{7F}/slash\"}"))
        #expect(Self.requestLine(program: "música-😀").contains(#""program":"música-😀"}"#))
        for program in [#"a"b\c"#, "tab\there\nnl\u{1}", "música-😀", "}\"{,:[]"] {
            #expect(try Self.decodedProgram(Self.requestLine(program: program)) == program)
        }
    }

    @Test("bytes that are not UTF-8 become '?': stray, cut, overlong and surrogate sequences")
    func invalidUTF8() throws {
        let cases: [([UInt8], String)] = [
            ([0x66, 0xFF, 0x67], "f?g"),
            ([0x66, 0xC3], "f?"),                 // cut before its continuation
            ([0xC0, 0x80], "??"),                 // overlong NUL
            ([0xE0, 0x80, 0x80], "???"),          // overlong
            ([0xED, 0xA0, 0x80], "???"),          // a surrogate
            ([0xF4, 0x90, 0x80, 0x80], "????"),   // above U+10FFFF
            ([0x80, 0x41], "?A"),                 // a stray continuation byte
            ([0xC3, 0xA9, 0xE2, 0x82, 0xAC], "é€"),
        ]
        for (bytes, expected) in cases {
            let (length, line) = Self.requestLine(programBytes: bytes)
            #expect(length > 0)
            #expect(try Self.decodedProgram(line) == expected, "\(bytes)")
        }
    }

    @Test("the program is cut to its first 64 bytes, never inside a character")
    func programLength() throws {
        #expect(CKEEPALIVED_PCM_PROGRAM_MAX == 64)
        #expect(try Self.decodedProgram(Self.requestLine(program: String(repeating: "a", count: 100))) == String(repeating: "a", count: 64))
        #expect(try Self.decodedProgram(Self.requestLine(program: String(repeating: "a", count: 64))) == String(repeating: "a", count: 64))
        // "é" is two bytes: at 63 it would end at byte 65, so it goes; at 62 it ends at 64 and stays.
        #expect(try Self.decodedProgram(Self.requestLine(program: String(repeating: "a", count: 63) + "é")) == String(repeating: "a", count: 63))
        #expect(try Self.decodedProgram(Self.requestLine(program: String(repeating: "a", count: 62) + "é")) == String(repeating: "a", count: 62) + "é")
        #expect(try Self.decodedProgram(Self.requestLine(program: String(repeating: "😀", count: 20))) == String(repeating: "😀", count: 16))
        // Escapes lengthen the line, not the name: 64 control characters are 64 bytes of name.
        let controls = String(repeating: "\u{1}", count: 80)
        #expect(try Self.decodedProgram(Self.requestLine(program: controls)) == String(repeating: "\u{1}", count: 64))
    }

    @Test("the longest line fits CKEEPALIVED_PCM_REQUEST_MAX; a buffer one byte short gives -1 and an empty string")
    func bufferSizes() {
        let longest = Self.requestLine(card: Int32.min, device: Int32.min, programBytes: Array(repeating: 0x01, count: 64))
        #expect(longest.length > 0 && Int(longest.length) < Int(CKEEPALIVED_PCM_REQUEST_MAX))
        let exact = Self.requestLine(programBytes: Array("mpd".utf8))
        let fits = Self.requestLine(programBytes: Array("mpd".utf8), size: Int(exact.length) + 1)
        #expect(fits.length == exact.length && fits.text == exact.text)
        let short = Self.requestLine(programBytes: Array("mpd".utf8), size: Int(exact.length))
        #expect(short.length == -1 && short.text == "")
        #expect(Self.requestLine(programBytes: Array("mpd".utf8), size: 0).length == -1)
    }

    @Test("any program, any bytes: the line is valid JSON with the right card and device", arguments: 0..<4)
    func anyProgram(seed: UInt64) throws {
        var generator = SplitMix(seed: seed)
        for _ in 0..<500 {
            let bytes = (0..<Int(generator.next() % 90)).map { _ in UInt8(truncatingIfNeeded: generator.next() | 1) }
            let card = Int32(truncatingIfNeeded: generator.next() % 256), device = Int32(truncatingIfNeeded: generator.next() % 256)
            let (length, line) = Self.requestLine(card: card, device: device, programBytes: bytes)
            #expect(length == Int32(line.utf8.count))
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(bytes)")
            #expect(object["card"] as? Int == Int(card) && object["device"] as? Int == Int(device))
            let program = try #require(object["program"] as? String)
            #expect(program.utf8.count <= 64, "\(bytes)")
        }
    }

    // MARK: - The hw name

    @Test("the hw name carries card, device and subdevice as hw's own arguments")
    func hwNames() {
        #expect(Self.hwName(0, 0, -1) == (25, "hw:CARD=0,DEV=0,SUBDEV=-1"))
        #expect(Self.hwName(31, 3, 2).1 == "hw:CARD=31,DEV=3,SUBDEV=2")
        let widest = Self.hwName(Int32.min, Int32.min, Int32.min)
        #expect(widest.0 > 0 && Int(widest.0) < Int(CKEEPALIVED_PCM_HW_NAME_MAX))
        #expect(Self.hwName(0, 0, -1, size: 25) == (-1, ""))
        #expect(Self.hwName(0, 0, -1, size: 26) == (25, "hw:CARD=0,DEV=0,SUBDEV=-1"))
    }

    // MARK: - Replies

    @Test("a reply: ok with what was released, or not ok with the error's text")
    func replies() {
        #expect(Self.parse(#"{"ok":true,"released":["hw:CARD=Intel,DEV=0"]}"# + "\n") == (1, ""))
        #expect(Self.parse(#"{"ok":true}"#) == (1, ""))
        #expect(Self.parse(#"{"ok":false,"error":"card 3 is not kept awake"}"# + "\n") == (0, "card 3 is not kept awake"))
        #expect(Self.parse(#"{"error":"first","ok":false}"#) == (0, "first"))
        #expect(Self.parse(#"{"ok":false}"#) == (0, ""))
        #expect(Self.parse(" \t{ \"ok\" : false ,\r\n \"error\" : \"spaced\" } \r\n") == (0, "spaced"))
        // Other keys of any shape are skipped, nested ones included.
        #expect(Self.parse(#"{"pid":4242,"status":{"ok":false,"error":"inner","list":[1,-2.5e3,true,null,{}]},"ok":true,"error":null}"#) == (1, ""))
        #expect(Self.parse(#"{"okay":false,"ok":true,"errors":"x"}"#) == (1, ""))
    }

    @Test("the error's escapes are decoded; control characters become spaces, lone surrogates '?'")
    func errorEscapes() {
        #expect(Self.parse(#"{"ok":false,"error":"a\"b\\c\/d"}"#) == (0, #"a"b\c/d"#))
        #expect(Self.parse(#"{"ok":false,"error":"line\nnext\ttab\u0001"}"#) == (0, "line next tab "))
        #expect(Self.parse(#"{"ok":false,"error":"\u00e9\u20ac\ud83d\ude00 é"}"#) == (0, "é€😀 é"))
        #expect(Self.parse(#"{"ok":false,"error":"\ud83d-\ude00-\ud83dx"}"#) == (0, "?-?-?x"))
        #expect(Self.parse([UInt8](#"{"ok":false,"error":"a"#.utf8) + [0xFF] + Array(#"b"}"#.utf8)) == (0, "a?b"))
    }

    @Test("an error too long for its buffer is cut between characters")
    func errorTruncation() {
        #expect(Self.parse(#"{"ok":false,"error":"abcdef"}"#, errorSize: 4) == (0, "abc"))
        #expect(Self.parse(#"{"ok":false,"error":"aéé"}"#, errorSize: 5) == (0, "aé"))
        #expect(Self.parse(#"{"ok":false,"error":"a\u00e9\u00e9"}"#, errorSize: 5) == (0, "aé"))
        #expect(Self.parse(#"{"ok":false,"error":"x"}"#, errorSize: 1) == (0, ""))
        let noBuffer = #"{"ok":false,"error":"x"}"#.utf8CString.withUnsafeBufferPointer {
            ckeepalived_pcm_parse_reply($0.baseAddress, $0.count - 1, nil, 0, nil)
        }
        #expect(noBuffer == 0)
    }

    @Test("what is not a reply: -1 and no error text")
    func notReplies() {
        let bad = ["", "\n", "ok", "true", #"["ok",true]"#, #"{"ok":1}"#, #"{"ok":"true"}"#, #"{"ok":true"#,
                   #"{"ok":true}garbage"#, #"{"ok":true}{"ok":false}"#, #"{"error":"no ok"}"#, #"{"ok":tru}"#,
                   #"{"ok":false,"error":"unterminated}"#, #"{"ok":false,"error":"bad \q escape"}"#,
                   #"{"ok":false,"error":"\u12"}"#, "{\"ok\":false,\"error\":\"raw\nnewline\"}", #"{"ok":true,}"#,
                   #"{ok:true}"#, #"{"ok":true,"x":[1,}"#, #"{"ok":true,"x":}"#]
        for reply in bad {
            #expect(Self.parse(reply) == (-1, ""), "\(reply.debugDescription)")
        }
        // Deep nesting is refused, not recursed into.
        #expect(Self.parse(#"{"ok":true,"x":"# + String(repeating: "[", count: 100_000) + "}") == (-1, ""))
        #expect(Self.parse(#"{"ok":true,"x":"# + String(repeating: "[", count: 30) + String(repeating: "]", count: 30) + "}") == (1, ""))
    }

    static func wait(_ reply: String) -> (result: Int32, waitMS: Int32) {
        var wait: Int32 = -7
        let result = reply.utf8CString.withUnsafeBufferPointer {
            ckeepalived_pcm_parse_reply($0.baseAddress, $0.count - 1, nil, 0, &wait)
        }
        return (result, wait)
    }

    @Test("an interim line: keepalived holds the open N ms more while the power comes on (2, and N)")
    func interimWait() {
        #expect(Self.wait(#"{"ok":true,"wait":5100}"# + "\n") == (2, 5100))
        #expect(Self.wait(#"{"wait":0,"ok":true}"#) == (2, 0))
        #expect(Self.wait(#"{ "ok" : true , "wait" : 250 }"#) == (2, 250))
        // Never longer than the plug-in allows, however large the number.
        #expect(Self.wait(#"{"ok":true,"wait":31001}"#) == (2, CKEEPALIVED_PCM_POWER_WAIT_MAX_MS))
        #expect(Self.wait(#"{"ok":true,"wait":99999999999999999999999}"#) == (2, CKEEPALIVED_PCM_POWER_WAIT_MAX_MS))
        // A refusal is a refusal, with or without a wait; a final reply leaves the wait alone.
        #expect(Self.wait(#"{"ok":false,"wait":100,"error":"no"}"#) == (0, -7))
        #expect(Self.wait(#"{"ok":true,"released":["hw:CARD=0,DEV=0"]}"#) == (1, -7))
        // A wait that is not a whole number is not a reply.
        for bad in [#"{"ok":true,"wait":-1}"#, #"{"ok":true,"wait":1.5}"#, #"{"ok":true,"wait":1e3}"#, #"{"ok":true,"wait":"5"}"#,
                    #"{"ok":true,"wait":}"#, #"{"ok":true,"wait":12x}"#, #"{"ok":true,"wait":true}"#] {
            #expect(Self.wait(bad) == (-1, -7), "\(bad)")
        }
    }

    @Test("any bytes: the reader answers -1, 0, 1 or 2 and leaves a terminated UTF-8 error", arguments: 0..<4)
    func anyBytes(seed: UInt64) {
        var generator = SplitMix(seed: seed &+ 100)
        let alphabet = Array(#"{}[]":,\ okfalsetruerrn0u9e-+.wait\#u{7F}"#.utf8) + [0xC3, 0xA9, 0xFF, 0x0A, 0x00]
        let starts = [#"{"ok":false,"error":""#, #"{"ok":true,"wait":"#]
        for _ in 0..<2000 {
            let length = Int(generator.next() % 48)
            let start = starts[Int(generator.next() % 2)]
            var bytes = Array(start.utf8).prefix(Int(generator.next() % UInt64(start.utf8.count + 1)))
            bytes += (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }
            let (result, _) = Self.parse(Array(bytes), errorSize: Int(generator.next() % 12))
            #expect([-1, 0, 1, 2].contains(result))
        }
    }
}

@Suite("The ALSA plug-in's wait for keepalived")
struct ReleaseTimeoutTests {
    @Test("KEEPALIVED_RELEASE_TIMEOUT: whole milliseconds from 0 to 10000; empty or unset is the default; anything else is refused")
    func releaseTimeout() {
        #expect(ckeepalived_pcm_release_timeout_ms(nil) == 200)
        #expect(ckeepalived_pcm_release_timeout_ms("") == 200)
        #expect(ckeepalived_pcm_release_timeout_ms("0") == 0)
        #expect(ckeepalived_pcm_release_timeout_ms("450") == 450)
        #expect(ckeepalived_pcm_release_timeout_ms("10000") == 10000)
        #expect(ckeepalived_pcm_release_timeout_ms("10001") == -1)
        #expect(ckeepalived_pcm_release_timeout_ms("99999999999999999999") == -1)
        #expect(ckeepalived_pcm_release_timeout_ms("-1") == -1)
        #expect(ckeepalived_pcm_release_timeout_ms("5 ") == -1)
        #expect(ckeepalived_pcm_release_timeout_ms("0.5s") == -1)
    }
}

@Suite("The ALSA plug-in's IEC958 framing")
struct FramingTests {
    // snd_pcm_format_t values (alsa-lib's ABI; the test target does not see its headers).
    static let s8 = 0, s16LE = 2, s24LE = 6, s32LE = 10, floatLE = 14, iec958LE = 18, iec958BE = 19, s24_3LE = 32, dsdU8 = 48

    static func mask(_ formats: Int...) -> UInt64 { formats.reduce(0) { $0 | 1 << UInt64($1) } }

    @Test("framed only when the hardware takes no linear format and takes IEC958 subframes; LE before BE")
    func framingRule() {
        #expect(ckeepalived_pcm_framing_for(Self.mask(Self.iec958LE)) == CKEEPALIVED_PCM_FRAMING_IEC958_LE, "a Pi's vc4-hdmi")
        #expect(ckeepalived_pcm_framing_for(Self.mask(Self.iec958BE)) == CKEEPALIVED_PCM_FRAMING_IEC958_BE)
        #expect(ckeepalived_pcm_framing_for(Self.mask(Self.iec958LE, Self.iec958BE)) == CKEEPALIVED_PCM_FRAMING_IEC958_LE)
        for linear in [Self.s8, Self.s16LE, Self.s24LE, Self.s32LE, Self.s24_3LE] {
            #expect(ckeepalived_pcm_framing_for(Self.mask(linear, Self.iec958LE)) == CKEEPALIVED_PCM_FRAMING_NONE,
                    "format \(linear) beside IEC958: the player's samples go as they are")
        }
        // Nothing keepalived could frame for: handed over, the player meets the device's answer.
        #expect(ckeepalived_pcm_framing_for(0) == CKEEPALIVED_PCM_FRAMING_NONE)
        #expect(ckeepalived_pcm_framing_for(Self.mask(Self.floatLE)) == CKEEPALIVED_PCM_FRAMING_NONE)
        #expect(ckeepalived_pcm_framing_for(Self.mask(Self.dsdU8)) == CKEEPALIVED_PCM_FRAMING_NONE)
        // A float format does not count as linear: float beside IEC958 is framed.
        #expect(ckeepalived_pcm_framing_for(Self.mask(Self.floatLE, Self.iec958LE)) == CKEEPALIVED_PCM_FRAMING_IEC958_LE)
        // Bits past alsa-lib's last format are ignored.
        #expect(ckeepalived_pcm_framing_for(1 << 63 | Self.mask(Self.iec958LE)) == CKEEPALIVED_PCM_FRAMING_IEC958_LE)
    }

    @Test("the channel status vc4-hdmi.conf sets, rate and word length left to alsa-lib; preambles Z X Y")
    func statusAndPreambles() {
        var status = [UInt8](repeating: 0xFF, count: Int(CKEEPALIVED_PCM_IEC958_STATUS_BYTES))
        ckeepalived_pcm_iec958_status(&status)
        #expect(status == [0x04, 0x82, 0x00, 0x01] + [UInt8](repeating: 0, count: 20))
        var preambles: [UInt8] = [0, 0, 0]
        ckeepalived_pcm_iec958_preambles(&preambles)
        #expect(preambles == [0x08, 0x02, 0x04])
    }
}
