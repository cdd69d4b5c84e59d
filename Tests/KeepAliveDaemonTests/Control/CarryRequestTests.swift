import _KeepalivedControlProtocol
import Testing

@Suite("The control socket's carry request and a carried player's format request")
struct CarryRequestTests {
    @Test("carry: the release's fields, under its own name")
    func carry() throws {
        let command = try ControlCommand(parsing: Array(#"{"request":"carry","card":2,"device":0,"program":"aplay"}"#.utf8))
        #expect(command == .carry(ReleaseRequest(card: 2, device: 0, program: "aplay")))
        #expect(command.name == "carry")
        #expect(throws: ControlRequestError.badRelease("card 300 is outside 0...255")) {
            try ControlCommand(parsing: Array(#"{"request":"carry","card":300,"device":0}"#.utf8))
        }
    }

    @Test("format: every number within what a card device could run")
    func format() throws {
        let line = #"{"request":"format","format":2,"rate":48000,"channels":2,"bufferFrames":24000,"periodFrames":6000}"#
        let request = try CarryFormatRequest(parsing: Array(line.utf8))
        #expect(request.format == 2 && request.rate == 48000 && request.channels == 2 && request.bufferFrames == 24000 && request.periodFrames == 6000)
        for bad in [
            #"{"request":"format","format":64,"rate":48000,"channels":2,"bufferFrames":24000,"periodFrames":6000}"#,
            #"{"request":"format","format":2,"rate":999,"channels":2,"bufferFrames":24000,"periodFrames":6000}"#,
            #"{"request":"format","format":2,"rate":48000,"channels":0,"bufferFrames":24000,"periodFrames":6000}"#,
            #"{"request":"format","format":2,"rate":48000,"channels":2,"bufferFrames":8,"periodFrames":4}"#,
            #"{"request":"format","format":2,"rate":48000,"channels":2,"bufferFrames":24000,"periodFrames":24001}"#,
        ] {
            #expect(throws: ControlRequestError.badRelease("a format request out of range")) { try CarryFormatRequest(parsing: Array(bad.utf8)) }
        }
        #expect(throws: ControlRequestError.unknown("status")) { try CarryFormatRequest(parsing: Array(#"{"request":"status","format":2,"rate":48000,"channels":2,"bufferFrames":24000,"periodFrames":6000}"#.utf8)) }
        #expect(throws: ControlRequestError.malformed) { try CarryFormatRequest(parsing: Array(#"{"request":"format","format":2}"#.utf8)) }
    }
}
