import ArgumentParser
import Testing

@testable import KeepAliveDaemon

/// `--cec`, `--cec-wake-tv` and `--cec-standby` as `run` parses them: the settings they give,
/// and a message naming the option for what is wrong (exit code 64, as every usage error).
@Suite("Options: --cec")
struct CECOptionsTests {
    @Test("--cec DEVICE alone: the audio system only, no standby")
    func device() throws {
        let settings = try RunCommand.parse(["--cec", "/dev/cec0"]).playback.cec.settings
        #expect(settings == CECFollower.Settings(device: "/dev/cec0", machine: .init(wakeTV: false, standby: false, takeOver: false)))
    }

    @Test("--cec-wake-tv and --cec-standby")
    func flags() throws {
        let settings = try RunCommand.parse(["--cec", "/dev/cec1", "--cec-wake-tv", "--cec-standby"]).playback.cec.settings
        #expect(settings == CECFollower.Settings(device: "/dev/cec1", machine: .init(wakeTV: true, standby: true)))
    }

    @Test("without --cec: no adapter, nothing to follow")
    func none() throws {
        #expect(try RunCommand.parse([]).playback.cec.settings == CECFollower.Settings())
    }

    @Test("refused, naming the option", arguments: [
        (["--cec-wake-tv"], "--cec-wake-tv goes with --cec DEVICE"),
        (["--cec-standby"], "--cec-standby goes with --cec DEVICE"),
        (["--cec", "cec0"], "--cec takes the CEC adapter's device node, like /dev/cec0, not 'cec0'"),
        (["--cec", "/"], "--cec takes the CEC adapter's device node"),
        (["--cec", "/dev/"], "--cec takes the CEC adapter's device node"),
    ])
    func refused(_ arguments: [String], _ message: String) {
        do {
            _ = try RunCommand.parse(arguments)
            Issue.record("\(arguments) parsed")
        } catch {
            #expect(RunCommand.message(for: error).contains(message))
            #expect(RunCommand.exitCode(for: error) == ExitCode(64))
        }
    }
}
