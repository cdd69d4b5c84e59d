import _KeepalivedControlProtocol
import Testing

@Suite("The control socket's release request: one card device, in ALSA's range, a short printable program name")
struct ReleaseRequestTests {
    func parse(_ line: String) throws(ControlRequestError) -> ControlCommand { try ControlCommand(parsing: Array(line.utf8)) }

    @Test("a well-formed release, and the other requests unchanged")
    func wellFormed() throws {
        #expect(try parse(#"{"request":"release","card":0,"device":3,"program":"mpd"}"#) == .release(ReleaseRequest(card: 0, device: 3, program: "mpd")))
        #expect(try parse(#"{"request":"release","card":255,"device":0}"#) == .release(ReleaseRequest(card: 255, device: 0)))
        #expect(try parse(#"{"request":"status"}"#) == .status)
        #expect(try parse(#"{"request":"reload"}"#) == .reload)
        #expect(try parse(#"{"request":"stop"}"#) == .stop)
        #expect(ReleaseRequest(card: 1, device: 7).pcm == "hw:CARD=1,DEV=7")
    }

    @Test("partial or out of range: a refusal naming the field")
    func refused() {
        #expect(throws: ControlRequestError.badRelease(#"no "card" number"#)) { try parse(#"{"request":"release","device":0}"#) }
        #expect(throws: ControlRequestError.badRelease(#"no "device" number"#)) { try parse(#"{"request":"release","card":0}"#) }
        #expect(throws: ControlRequestError.badRelease("card -1 is outside 0...255")) { try parse(#"{"request":"release","card":-1,"device":0}"#) }
        #expect(throws: ControlRequestError.badRelease("device 256 is outside 0...255")) { try parse(#"{"request":"release","card":0,"device":256}"#) }
        #expect(throws: ControlRequestError.malformed) { try parse(#"{"request":"release","card":"0","device":0}"#) }
        #expect(throws: ControlRequestError.malformed) { try parse(#"{"request":"release","card":0.5,"device":0}"#) }
        #expect(throws: ControlRequestError.malformed) { try parse(#"{"request":"release","card":99999999999999999999,"device":0}"#) }
        #expect("\(ControlRequestError.badRelease("no \"card\" number"))" == #"bad release request: no "card" number"#)
    }

    @Test("the program name: control characters dropped, cut to 64")
    func programName() throws {
        let long = String(repeating: "m", count: 100)
        guard case .release(let request) = try parse(#"{"request":"release","card":0,"device":0,"program":"\u001b[31m\#(long)"}"#) else {
            Issue.record("not a release")
            return
        }
        #expect(request.program == "[31m" + String(repeating: "m", count: 60))
        guard case .release(let empty) = try parse(#"{"request":"release","card":0,"device":0,"program":"\u0000"}"#) else { return }
        #expect(empty.program == nil)
    }
}
