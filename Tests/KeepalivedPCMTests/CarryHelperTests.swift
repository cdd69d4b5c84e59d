import CKeepalivedPCM
import Foundation
import TestSupport
import Testing

/// The plug-in's pure pieces for carrying a player on keepalived's stream (issue 60): the carry
/// request line, the reading of a grant and the format request, called as the plug-in calls them.
@Suite("The ALSA plug-in's carry request, grant reading and format request")
struct CarryHelperTests {
    // MARK: - Calling the C helpers

    static func requestLine(_ request: String?, card: Int32 = 0, device: Int32 = 0, program: String? = "aplay",
                            size: Int = Int(CKEEPALIVED_PCM_REQUEST_MAX)) -> (length: Int32, text: String) {
        var buffer = [CChar](repeating: 0x55, count: size)
        let length: Int32 = switch (request, program) {
        case let (request?, program?): ckeepalived_pcm_request_line_for(&buffer, size, request, card, device, program)
        case let (request?, nil): ckeepalived_pcm_request_line_for(&buffer, size, request, card, device, nil)
        case let (nil, program?): ckeepalived_pcm_request_line_for(&buffer, size, nil, card, device, program)
        case (nil, nil): ckeepalived_pcm_request_line_for(&buffer, size, nil, card, device, nil)
        }
        return (length, size > 0 ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "")
    }

    /// What ckeepalived_pcm_parse_grant made of `line`, the grant's fields as Swift values.
    struct Read: Equatable, CustomStringConvertible {
        var result: Int32
        var formats: UInt64 = 0
        var rates: [UInt32] = []
        var channels: ClosedRange<UInt32>? = nil
        var maxBufferBytes: UInt32 = 0
        var description: String { "\(result) formats=\(String(formats, radix: 2)) rates=\(rates) channels=\(String(describing: channels)) max=\(maxBufferBytes)" }
    }

    static func grant(_ line: String) -> Read { grant(Array(line.utf8)) }

    static func grant(_ bytes: [UInt8]) -> Read {
        var grant = ckeepalived_pcm_grant()
        // Filled with garbage first: a reading that is not a grant must leave it zeroed.
        withUnsafeMutableBytes(of: &grant) { bytes in for i in bytes.indices { bytes[i] = 0xA5 } }
        let result = bytes.map { CChar(bitPattern: $0) }.withUnsafeBufferPointer {
            ckeepalived_pcm_parse_grant($0.baseAddress, $0.count, &grant)
        }
        let rateCount = min(Int(grant.rate_count), Int(CKEEPALIVED_PCM_GRANT_RATES_MAX))
        let rates = withUnsafeBytes(of: grant.rates) { Array($0.bindMemory(to: UInt32.self).prefix(rateCount)) }
        guard result == 1 else {
            #expect(grant.formats == 0 && grant.rate_count == 0 && grant.channels_min == 0 && grant.channels_max == 0
                    && grant.max_buffer_bytes == 0, "no grant: zeroed (\(result))")
            return Read(result: result)
        }
        return Read(result: result, formats: UInt64(grant.formats), rates: rates,
                    channels: grant.channels_min <= grant.channels_max ? grant.channels_min...grant.channels_max : nil,
                    maxBufferBytes: grant.max_buffer_bytes)
    }

    static func formatLine(format: Int32 = 2, rate: UInt32 = 48000, channels: UInt32 = 2, bufferFrames: UInt = 24000,
                           periodFrames: UInt = 6000, size: Int = Int(CKEEPALIVED_PCM_FORMAT_LINE_MAX)) -> (length: Int32, text: String) {
        var buffer = [CChar](repeating: 0x55, count: size)
        let length = ckeepalived_pcm_format_line(&buffer, size, format, rate, channels, bufferFrames, periodFrames)
        return (length, size > 0 ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "")
    }

    static let example = #"{"ok":true,"carry":true,"formats":[2,10],"rates":[44100,48000,96000],"channels":[2,8],"maxBufferBytes":1048576}"#

    // MARK: - The carry request

    @Test("the carry line is the release line with another request name; the old writer still writes release")
    func carryLine() {
        #expect(Self.requestLine("carry").text == #"{"request":"carry","card":0,"device":0,"program":"aplay"}"# + "\n")
        #expect(Self.requestLine("carry", card: 3, device: 7, program: #"a"b"#).text
                == #"{"request":"carry","card":3,"device":7,"program":"a\"b"}"# + "\n")
        #expect(Self.requestLine("release", program: nil).text == #"{"request":"release","card":0,"device":0,"program":""}"# + "\n")
        // The old function is the same writer with "release".
        for program in ["mpd", "", "tab\there", String(repeating: "é", count: 40)] {
            var old = [CChar](repeating: 0, count: Int(CKEEPALIVED_PCM_REQUEST_MAX))
            let length = ckeepalived_pcm_request_line(&old, old.count, 5, 1, program)
            let new = Self.requestLine("release", card: 5, device: 1, program: program)
            #expect(length == new.length && String(decoding: old.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) == new.text, "\(program)")
        }
    }

    @Test("a request name is plain ASCII, 1 to 32 bytes; anything else is refused with -1 and an empty string")
    func requestNames() {
        #expect(CKEEPALIVED_PCM_REQUEST_NAME_MAX == 32)
        for name in ["carry", "release", "a", "x_y-Z09", String(repeating: "r", count: 32)] {
            #expect(Self.requestLine(name).length > 0, "\(name)")
        }
        for name in ["", String(repeating: "r", count: 33), #"car"ry"#, "car\\ry", "carry\n", "carré", "car ry", "carry}"] {
            #expect(Self.requestLine(name) == (-1, ""), "\(name.debugDescription)")
        }
        #expect(Self.requestLine(nil) == (-1, ""))
    }

    @Test("the longest carry line fits CKEEPALIVED_PCM_REQUEST_MAX; one byte short gives -1")
    func carryLineSizes() throws {
        let name = String(repeating: "r", count: 32)
        let longest = Self.requestLine(name, card: Int32.min, device: Int32.min, program: String(repeating: "\u{1}", count: 64))
        #expect(longest.length > 0 && Int(longest.length) < Int(CKEEPALIVED_PCM_REQUEST_MAX))
        let exact = Self.requestLine("carry")
        #expect(Self.requestLine("carry", size: Int(exact.length) + 1) == exact)
        #expect(Self.requestLine("carry", size: Int(exact.length)) == (-1, ""))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(longest.text.utf8)) as? [String: Any])
        #expect(object["request"] as? String == name)
    }

    // MARK: - The grant

    @Test("a grant: formats as a mask, the rates in order, channels min and max, the buffer's bound")
    func grants() {
        #expect(Self.grant(Self.example + "\n")
                == Read(result: 1, formats: 1 << 2 | 1 << 10, rates: [44100, 48000, 96000], channels: 2...8, maxBufferBytes: 1_048_576))
        // The fake keepalived's grant (Tests/VM/guest/fake_carrier.py).
        #expect(Self.grant(#"{"ok":true,"carry":true,"formats":[2],"rates":[48000],"channels":[2,2],"maxBufferBytes":1048576}"#)
                == Read(result: 1, formats: 4, rates: [48000], channels: 2...2, maxBufferBytes: 1_048_576))
        // Any order, white space, unknown fields of any shape, repeated formats.
        #expect(Self.grant(#" { "maxBufferBytes" : 128 , "channels":[1, 1], "future":{"x":[1,{"y":null}]}, "rates":[8000], "formats":[63, 0, 0], "carry":true, "ok":true } "#)
                == Read(result: 1, formats: 1 << 63 | 1, rates: [8000], channels: 1...1, maxBufferBytes: 128))
    }

    @Test("a refusal, an old keepalived's unknown request, an ok that carries nothing: 0; busy: 2")
    func refusals() {
        #expect(Self.grant(#"{"ok":false,"carry":false,"error":"the stream is not running"}"#).result == 0)
        #expect(Self.grant(#"{"ok":false,"error":"unknown request \"carry\""}"# + "\n").result == 0)
        #expect(Self.grant(#"{"ok":true,"released":["hw:CARD=0,DEV=0"]}"#).result == 0)
        #expect(Self.grant(#"{"ok":true,"wait":3000}"#).result == 0)
        #expect(Self.grant(#"{"ok":true,"carry":false,"formats":[2],"rates":[48000],"channels":[2,2],"maxBufferBytes":4096}"#).result == 0)
        #expect(Self.grant(#"{"ok":false,"busy":true,"error":"carrying mpd"}"#).result == 2)
        #expect(Self.grant(#"{"busy":true,"ok":false}"#).result == 2)
        #expect(Self.grant(#"{"ok":false,"busy":false,"error":"no"}"#).result == 0)
        // Busy only counts on a refusal.
        #expect(Self.grant(#"{"ok":true,"busy":true}"#).result == 0)
    }

    @Test("KEEPALIVED_DAEMON_PID names the daemon's own process: only its pid in plain decimal digits")
    func daemonMark() {
        #expect(ckeepalived_pcm_is_daemon("4242", 4242) == 1)
        #expect(ckeepalived_pcm_is_daemon("4242", 4243) == 0, "a child inherits the mark with a pid of its own")
        for text in ["", " 4242", "4242 ", "+4242", "-4242", "0x1092", "4242a", "04242x", "99999999999999999999999"] {
            #expect(ckeepalived_pcm_is_daemon(text, 4242) == 0, "\(text.debugDescription)")
        }
        #expect(ckeepalived_pcm_is_daemon("04242", 4242) == 1, "leading zeros are still the number")
        #expect(ckeepalived_pcm_is_daemon(nil, 4242) == 0)
        #expect(ckeepalived_pcm_is_daemon("0", 0) == 0, "no process is pid 0")
    }

    @Test("a grant without one of its fields, or with a number out of range, is no grant: -1")
    func malformedGrants() {
        let fields = [#""formats":[2]"#, #""rates":[48000]"#, #""channels":[2,2]"#, #""maxBufferBytes":65536"#]
        for left in fields.indices {
            let line = "{\"ok\":true,\"carry\":true," + fields.enumerated().filter { $0.offset != left }.map(\.element).joined(separator: ",") + "}"
            #expect(Self.grant(line).result == -1, "\(line)")
        }
        func with(_ field: String) -> String {
            #"{"ok":true,"carry":true,"formats":[2],"rates":[48000],"channels":[2,2],"maxBufferBytes":65536,"# + field + "}"
        }
        let bad = [
            #""formats":[64]"#, #""formats":[-1]"#, #""formats":[]"#, #""formats":[2.0]"#, #""formats":["S16_LE"]"#, #""formats":2"#,
            #""formats":[99999999999999999999999]"#,
            #""rates":[]"#, #""rates":[0]"#, #""rates":[1536001]"#, #""rates":[48000.5]"#, #""rates":[-48000]"#, #""rates":[4.8e4]"#,
            #""rates":"# + "[" + (1...33).map { "\(8000 + $0)" }.joined(separator: ",") + "]",
            #""channels":[0,2]"#, #""channels":[2]"#, #""channels":[2,2,2]"#, #""channels":[3,2]"#, #""channels":[1,257]"#,
            #""channels":{"min":1}"#,
            #""maxBufferBytes":127"#, #""maxBufferBytes":67108865"#, #""maxBufferBytes":-1"#, #""maxBufferBytes":1e6"#,
            #""maxBufferBytes":"1048576""#, #""maxBufferBytes":99999999999999999999999"#,
            #""carry":"yes""#, #""busy":1"#,
        ]
        for field in bad {
            #expect(Self.grant(with(field)).result == -1, "\(field)")
        }
        // The bounds themselves are in range.
        #expect(Self.grant(with(#""rates":[1,1536000]"#)).rates == [1, 1_536_000])
        #expect(Self.grant(with(#""rates":"# + "[" + (1...32).map { "\(8000 + $0)" }.joined(separator: ",") + "]")).rates.count == 32)
        #expect(Self.grant(with(#""channels":[1,256]"#)).channels == 1...256)
        #expect(Self.grant(with(#""maxBufferBytes":67108864"#)).maxBufferBytes == 64 << 20)
        #expect(CKEEPALIVED_PCM_GRANT_BUFFER_MAX == 64 << 20 && CKEEPALIVED_PCM_GRANT_BUFFER_MIN == 128)
    }

    @Test("what is not an answer at all: -1")
    func notAnswers() {
        for line in ["", "\n", "carry", #"{"carry":true}"#, #"{"ok":1}"#, #"{"ok":true"#, Self.example + "x", Self.example + Self.example,
                     #"{"ok":true,"carry":true,}"#, #"["ok",true]"#] {
            #expect(Self.grant(line).result == -1, "\(line.debugDescription)")
        }
        #expect(Self.grant(#"{"ok":true,"x":"# + String(repeating: "[", count: 100_000) + "}").result == -1)
        // NULL grant: only the answer.
        let result = Self.example.utf8CString.withUnsafeBufferPointer { ckeepalived_pcm_parse_grant($0.baseAddress, $0.count - 1, nil) }
        #expect(result == 1)
    }

    @Test("any bytes: the reader answers -1, 0, 1 or 2, and a grant it reads is in range", arguments: 0..<4)
    func anyGrantBytes(seed: UInt64) {
        var generator = SplitMix(seed: seed &+ 500)
        let alphabet = Array(#"{}[]":, okfalsetruecarrybusy0123456789-.eformatsrateschannelsmaxBufferBytes"#.utf8) + [0xC3, 0xFF, 0x0A]
        for _ in 0..<2000 {
            var bytes = Array(Self.example.utf8).prefix(Int(generator.next() % UInt64(Self.example.utf8.count + 1)))
            bytes += (0..<Int(generator.next() % 40)).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }
            let read = Self.grant(Array(bytes))
            #expect([-1, 0, 1, 2].contains(read.result))
            if read.result == 1 {
                #expect(read.formats != 0 && !read.rates.isEmpty && read.rates.count <= 32)
                #expect(read.rates.allSatisfy { (1...1_536_000).contains($0) })
                #expect(read.channels.map { $0.lowerBound >= 1 && $0.upperBound <= 256 } == true)
                #expect((128...(64 << 20)).contains(read.maxBufferBytes))
            }
        }
    }

    // MARK: - The format request

    @Test("the format line: format, rate, channels and the buffer's and period's frames, one JSON object and a newline")
    func formatLines() throws {
        #expect(Self.formatLine().text
                == #"{"request":"format","format":2,"rate":48000,"channels":2,"bufferFrames":24000,"periodFrames":6000}"# + "\n")
        let line = Self.formatLine(format: 10, rate: 96000, channels: 8, bufferFrames: 131_072, periodFrames: 1024)
        #expect(line.length == Int32(line.text.utf8.count))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.text.utf8)) as? [String: Any])
        #expect(object["request"] as? String == "format" && object["format"] as? Int == 10 && object["rate"] as? Int == 96000)
        #expect(object["channels"] as? Int == 8 && object["bufferFrames"] as? Int == 131_072 && object["periodFrames"] as? Int == 1024)
    }

    @Test("the widest format line fits CKEEPALIVED_PCM_FORMAT_LINE_MAX; one byte short gives -1 and an empty string")
    func formatLineSizes() {
        let widest = Self.formatLine(format: Int32.min, rate: UInt32.max, channels: UInt32.max, bufferFrames: UInt.max, periodFrames: UInt.max)
        #expect(widest.length > 0 && Int(widest.length) < Int(CKEEPALIVED_PCM_FORMAT_LINE_MAX))
        let exact = Self.formatLine()
        #expect(Self.formatLine(size: Int(exact.length) + 1) == exact)
        #expect(Self.formatLine(size: Int(exact.length)) == (-1, ""))
        #expect(Self.formatLine(size: 0).length == -1)
    }
}

/// The carried PCM's start, against the kernel's own rule (snd_pcm_pre_start's
/// snd_pcm_playback_data): snapclient starts its stream before its first write, which the
/// hardware refuses with -EPIPE, leaving the stream prepared for the write that starts it.
@Suite("The ALSA plug-in's start with nothing queued")
struct CarryStartTests {
    @Test("nothing queued and a stop threshold below the boundary (alsa-lib's default): refused")
    func emptyStartRefused() {
        #expect(ckeepalived_pcm_start_allowed(0, 4410, 0x4000_0000) == 0)
        #expect(ckeepalived_pcm_start_allowed(0, 17640, 17641) == 0)
    }

    @Test("anything queued starts, whatever the thresholds")
    func queuedStarts() {
        #expect(ckeepalived_pcm_start_allowed(1, 4410, 0x4000_0000) == 1)
        #expect(ckeepalived_pcm_start_allowed(17640, 17640, 0x4000_0000) == 1)
    }

    @Test("a stream that never stops on an underrun (stop threshold at the boundary or above) starts empty")
    func neverStoppingStartsEmpty() {
        #expect(ckeepalived_pcm_start_allowed(0, 0x4000_0000, 0x4000_0000) == 1)
        #expect(ckeepalived_pcm_start_allowed(0, UInt.max, 0x4000_0000) == 1)
    }
}

/// The carried PCM's position between two reads that come close together: alsa-lib's htimestamp
/// for a plug-in (pcm_generic.c, 1.2.8 and 1.2.14 alike) reads it until two reads agree, which a
/// position estimated anew at every read never did once a read took longer than a frame (carry-sync
/// at 192 kHz on the emulated CPU).
@Suite("The ALSA plug-in's position held between close reads")
struct CarryPositionHoldTests {
    let hold = Int64(CKEEPALIVED_PCM_POSITION_HOLD_NS)

    @Test("a read within 100 us of the estimate gets the same answer; one later, or before it, a new one")
    func heldBriefly() {
        #expect(hold == 100_000)
        #expect(ckeepalived_pcm_position_holds(5_000_000_000, 5_000_000_000) == 1)
        #expect(ckeepalived_pcm_position_holds(5_000_000_000, 5_000_000_000 + hold - 1) == 1)
        #expect(ckeepalived_pcm_position_holds(5_000_000_000, 5_000_000_000 + hold) == 0)
        #expect(ckeepalived_pcm_position_holds(5_000_000_000, 4_999_999_999) == 0)
    }

    @Test("no estimate yet in this generation (0): never held")
    func nothingToHold() {
        #expect(ckeepalived_pcm_position_holds(0, 0) == 0)
        #expect(ckeepalived_pcm_position_holds(0, 50_000) == 0)
    }
}
