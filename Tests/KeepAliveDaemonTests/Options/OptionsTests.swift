import Foundation
import KeepAlive
import Testing

@testable import KeepAliveDaemon

/// The daemon's own readers of what a user typed: durations and the options file's words.
@Suite("Options: durations and the options file's words")
struct OptionsTests {
    @Test("carrying (the default, --carry) reaches the outputs' choice: an IEC958-only port is then picked on its hw:; --no-carry turns it off, the last word wins")
    func carryChoice() throws {
        #expect(try RunCommand.parse(["--digital"]).playback.choice.carriesPlayers)
        #expect(try RunCommand.parse(["--digital", "--carry"]).playback.choice.carriesPlayers)
        #expect(try !RunCommand.parse(["--digital", "--no-carry"]).playback.choice.carriesPlayers)
        #expect(try RunCommand.parse(["--digital", "--no-carry", "--carry"]).playback.choice.carriesPlayers)
    }

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
        #expect(ShellWords.split("-d hw:0 --volume -40dB") == ["-d", "hw:0", "--volume", "-40dB"])
        #expect(ShellWords.split("--output 'hdmi:CARD=PCH,DEV=0 --signal sine' -v") == ["--output", "hdmi:CARD=PCH,DEV=0 --signal sine", "-v"])
        #expect(ShellWords.split("--exclude \"*bluez*\"\t$HOME") == ["--exclude", "*bluez*", "$HOME"])
        #expect(ShellWords.split("  ") == [])
        #expect(ShellWords.split("''") == [""])
        #expect(ShellWords.split("--output 'unbalanced") == nil)
    }
}

@Suite("the options file, merged with the command line by ArgumentParser")
struct OptionsFileMergeTests {
    static func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("options-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("run's own words on the command line, whatever comes before them")
    func commandLineWords() {
        #expect(RunCommand.commandLineWords(["/usr/bin/keepalived", "run", "-d", "hw:0", "--config", "/etc/k"]) == ["-d", "hw:0", "--config", "/etc/k"])
        #expect(RunCommand.commandLineWords(["keepalived", "run"]) == [])
        #expect(RunCommand.commandLineWords(["keepalived", "status"]) == [])
    }

    @Test("an output's own hooks in the options file: its command in quotes inside the output's quotes, as docs/usage.md writes it")
    func outputsOwnHooks() throws {
        let path = try Self.file("""
            KEEPALIVED_OPTIONS="-d hw:1 --on-active 'curl -fsS http://plug.lan/on' --output 'hw:CARD=DAC,DEV=0 --on-active "gpioset gpiochip0 17=1" --on-idle-after 10min'"

            """)
        defer { unlink(path) }
        let commandLine = ["--config", path]
        let options = try RunCommand.parse(commandLine).currentOptions(commandLine: commandLine)
        let settings = try options.activitySettings
        #expect(settings.onActive(for: "hw:1")?.arguments == ["curl", "-fsS", "http://plug.lan/on"])
        #expect(settings.onActive(for: "hw:CARD=DAC,DEV=0")?.arguments == ["gpioset", "gpiochip0", "17=1"])
        #expect(settings.idleAfter(for: "hw:CARD=DAC,DEV=0") == .seconds(600) && settings.idleAfter(for: "hw:1") == .seconds(300))
        #expect(settings.onIdle(for: "hw:CARD=DAC,DEV=0") == nil)
        #expect(options.namedDevices == ["hw:1", "hw:CARD=DAC,DEV=0"])
    }

    @Test("--carry and --lead-in: the box's and one output's own lead-in; beyond 10 s refused, naming the option")
    func carryLeadIn() throws {
        let commandLine = ["-d", "hw:1", "--carry", "--lead-in", "1.5s", "--output", "hw:CARD=DAC,DEV=0 --lead-in 3s"]
        let options = try RunCommand.parse(commandLine).currentOptions(commandLine: commandLine)
        let configuration = try options.makeConfiguration()
        #expect(try options.activitySettings.carriesPlayers)
        #expect(configuration.configuration(for: "hw:1").carryLeadIn == .milliseconds(1500))
        #expect(configuration.configuration(for: "hw:CARD=DAC,DEV=0").carryLeadIn == .seconds(3))
        let long = ["-d", "hw:1", "--lead-in", "11s"]
        do {
            _ = try RunCommand.parse(long).currentOptions(commandLine: long).makeConfiguration()
            Issue.record("an 11 s lead-in was taken")
        } catch {
            #expect("\(error)".contains("--lead-in must be at most 10s"))
        }
        let plain = ["-d", "hw:1"]
        #expect(try RunCommand.parse(plain).currentOptions(commandLine: plain).activitySettings.carriesPlayers)
        let handOver = ["-d", "hw:1", "--no-carry"]
        #expect(try !RunCommand.parse(handOver).currentOptions(commandLine: handOver).activitySettings.carriesPlayers)
    }

    @Test("a list adds up, a single value is the file's")
    func merge() throws {
        let path = try Self.file("KEEPALIVED_OPTIONS=\"-d hw:1 --volume 0.02\"\n")
        defer { unlink(path) }
        let commandLine = ["-d", "hw:0", "--volume", "0.01", "--config", path]
        let options = try RunCommand.parse(commandLine).currentOptions(commandLine: commandLine)
        #expect(options.devices == ["hw:0", "hw:1"])
        #expect(options.sound.volume == (try Level(parsing: "0.02")))
    }

    @Test("--socket, --config and --log-file are the command line's: a file that sets one is refused, naming itself")
    func onlyPlayback() throws {
        let path = try Self.file("KEEPALIVED_OPTIONS=\"--socket /tmp/elsewhere.sock\"\n")
        defer { unlink(path) }
        let commandLine = ["--config", path]
        #expect {
            _ = try RunCommand.parse(commandLine).currentOptions(commandLine: commandLine)
        } throws: { error in
            let text = RunCommand.message(for: error)
            return text.contains(path) && text.contains("only playback options")
        }
    }
}

/// The daemon's log lines: one line per record, and fields that read back as they were written.
@Suite("the daemon's log lines")
struct DaemonLogLineTests {
    @Test("control characters are written out, never a line of their own")
    func escaped() {
        #expect(DaemonLogHandler.escaped("plain name") == "plain name")
        #expect(DaemonLogHandler.escaped("a\nb") == "a\\nb")
        #expect(DaemonLogHandler.escaped("a\r\n<2>b\t\u{1b}[31m") == "a\\r\\n<2>b\\t\\x1b[31m")
        #expect(DaemonLogHandler.escaped("é ünïcode ✓") == "é ünïcode ✓")
    }

    @Test("a value that could be taken for another field is quoted; the daemon's own values are not")
    func fields() {
        #expect(DaemonLogHandler.field("hdmi:CARD=PCH,DEV=0") == "hdmi:CARD=PCH,DEV=0")
        #expect(DaemonLogHandler.field("open: No such file or directory (ENOENT)") == "open: No such file or directory (ENOENT)")
        #expect(DaemonLogHandler.field("HOOK active hw:CARD=0,DEV=0 mpd 0 0") == "HOOK active hw:CARD=0,DEV=0 mpd 0 0")
        #expect(DaemonLogHandler.field("mpd device=hw:1,0") == #""mpd device=hw:1,0""#)
        #expect(DaemonLogHandler.field(#"say "hi""#) == #""say \"hi\"""#)
        #expect(DaemonLogHandler.field("") == #""""#)
        // The newline written out, and that backslash escaped in turn inside the quotes.
        #expect(DaemonLogHandler.field("x\n<2>y level=0") == #""x\\n<2>y level=0""#)
    }

    @Test("a stream's name from another program: control characters become ?, and it is bounded")
    func streamNames() {
        #expect(ServerStream.displayName("mpv") == "mpv")
        #expect(ServerStream.displayName("evil\n<2>forged") == "evil?<2>forged")
        #expect(ServerStream.displayName(String(repeating: "x", count: 500)).count == ServerStream.maximumNameLength)
        #expect(ServerStream(index: 1, sink: 0, isCorked: false, isOwn: false, application: "a\u{1b}b").application == "a?b")
    }
}
