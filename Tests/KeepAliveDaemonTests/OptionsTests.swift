import Testing

@testable import KeepAliveDaemon

/// The daemon's own readers of what a user typed: durations and the options file's words.
@Suite("Options: durations and the options file's words")
struct OptionsTests {
    @Test("a duration with a unit or in bare seconds", arguments: [
        ("90s", Duration.seconds(90)), ("10min", .seconds(600)), ("10m", .seconds(600)), ("1.5h", .seconds(5400)),
        ("500ms", .milliseconds(500)), ("2", .seconds(2)), (" 30s ", .seconds(30)), ("604800", .seconds(604_800)),
    ])
    func duration(_ text: String, _ expected: Duration) throws {
        #expect(try DurationArgument.parse(text) == expected)
    }

    @Test("a duration that is not one, negative, or longer than a week is refused, quoting the text", arguments: [
        "soon", "-5s", "10 parsecs", "604801", "inf", "nan", "",
    ])
    func badDuration(_ text: String) {
        #expect(throws: (any Error).self) { try DurationArgument.parse(text) }
        do { _ = try DurationArgument.parse(text) } catch { #expect("\(error)".contains("'\(text)'")) }
    }

    @Test("words are split as a shell would, quotes group, nothing is expanded")
    func words() {
        #expect(OptionsFile.split("-d hw:0 --volume -40dB") == ["-d", "hw:0", "--volume", "-40dB"])
        #expect(OptionsFile.split("--output 'hdmi:CARD=PCH,DEV=0 --signal sine' -v") == ["--output", "hdmi:CARD=PCH,DEV=0 --signal sine", "-v"])
        #expect(OptionsFile.split("--exclude \"*bluez*\"\t$HOME") == ["--exclude", "*bluez*", "$HOME"])
        #expect(OptionsFile.split("  ") == [])
        #expect(OptionsFile.split("''") == [""])
        #expect(OptionsFile.split("--output 'unbalanced") == nil)
    }
}
