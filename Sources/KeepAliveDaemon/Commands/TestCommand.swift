#if canImport(Glibc)
import Glibc
#endif
import _KeepalivedControlProtocol
import ArgumentParser
import CALSA
import KeepAlive
import Logging

/// `keepalived test`: an audible tone on each output `run` with the same options would keep
/// awake, one after another, each named as it sounds, so a person can tell which physical device
/// each output is before enabling the service.
///
/// The outputs are the scanner's one-shot plan (``OutputScanner/planned()``), the same `run`
/// starts from: the sound server's sinks through keepalived's own stream, the cards' `dmix`
/// devices, the named ones. Each is played by a ``KeepAliveManager`` of its own, configured by
/// ``TestTone/configuration(for:in:)``; it is stopped before the next one starts.
package struct TestCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Play an audible tone on each output run's options pick, one after another, to tell which device each is.",
        discussion: """
            For each output that 'keepalived run' with the same options would keep awake (the sound \
            server's sinks, the cards' dmix devices, the devices named with -d), in turn: prints its \
            name and kind, plays a 440 Hz sine peaking at -30 dBFS (0.0316 of full scale) for 1 s \
            with 15 ms fades, and stops it. An output that does not play within 5 s is reported with \
            its state and last error, and the next one follows. The tone is audible on purpose: \
            with a terminal the command asks first; without one it refuses unless --yes. The tone's \
            signal and level are its own (--signal, --volume, --clip, --buffer and bursts do not \
            apply); a --max-level, global or an output's, below its peak is refused, never \
            exceeded. A running daemon is left alone: an output it holds in a ring loop is busy. \
            Exit codes: 0 every output sounded, 64 bad option, a ceiling below the tone or no \
            terminal without --yes, 69 no output sounded (or none was picked), 75 some sounded and \
            others did not, 1 declined at the prompt.
            """)

    @OptionGroup var playback: PlaybackOptions
    @OptionGroup var socket: SocketOption

    @Option(name: .customLong("config"), help: ArgumentHelp(
        "Options file as run takes it (KEEPALIVED_OPTIONS=\"…\"): test the outputs the service with that file keeps awake.",
        valueName: "path"))
    var configFile: String?

    @Flag(name: [.customShort("y"), .long], help: "Play without asking (required without a terminal on stdin).")
    var yes = false

    /// The playback options in force: the command line's, then the options file's, in one parse
    /// (as `run` merges them).
    func currentOptions(commandLine: [String] = TestCommand.commandLineWords()) throws -> PlaybackOptions {
        guard let configFile else { return playback }
        let merged = try CommandLineWithOptionsFile.parse(TestCommand.self, commandLine: commandLine, file: configFile)
        guard merged.configFile == configFile, merged.socket.path == socket.path, merged.yes == yes else {
            throw CleanExit.failure("\(configFile): only playback options belong in an options file", code: SysExit.usage)
        }
        return merged.playback
    }

    /// The words after `test` on this process's command line.
    static func commandLineWords(_ arguments: [String] = CommandLine.arguments) -> [String] {
        CommandLineWithOptionsFile.words(after: "test", in: arguments)
    }

    package func run() throws {
        calsa_silence_library_errors()
        let (options, base) = try checkedOptions()
        guard yes || isatty(0) == 1 else {
            throw CleanExit.failure("keepalived test plays an audible tone and asks first; without a terminal to ask on, give --yes", code: SysExit.usage).exit()
        }

        let logger = options.verbose
            ? Logger(label: "keepalived", factory: { DaemonLogHandler(label: $0, level: .debug, journal: false) })
            : Logger(label: "keepalived", factory: { _ in SwiftLogNoOpLogHandler() })
        // The plan run starts from; the server is asked once and let go.
        let scanner = OutputScanner(logger: logger, reservations: DeviceReservations.open(logger: logger))
        scanner.use(base, choice: options.choice)
        let planned = scanner.planned()
        let server = scanner.server
        scanner.stop()
        if let refusal = TestTone.ceilingRefusal(devices: planned.devices, in: planned) {
            throw CleanExit.failure(refusal, code: SysExit.usage).exit()
        }
        guard !planned.devices.isEmpty else {
            let why = switch server {
            case .connected(let view): "the sound server (\(view.server)) has no sink they pick"
            case .unreachable(let reason): "no sound server answers (\(reason)) and no card device is picked"
            case .unknown: "the sound server did not answer within 2 s"
            }
            throw CleanExit.failure("no output to test: \(options.choice.flags.joined(separator: " ")) picks none now: \(why); see 'keepalived devices'",
                                    code: SysExit.unavailable).exit()
        }

        if case .success(let reply) = ControlClient.send("status", to: socket.paths, timeout: .milliseconds(500)), let status = reply.status {
            printError("keepalived: warning: \(TestTone.daemonWarning(status, socket: socket.paths.socket))")
        }

        let labels = Self.labels(for: planned.devices, server: server)
        let count = planned.devices.count
        printOutput("keepalived test plays an audible tone (\(TestTone.summary)) for about 1 s on "
                    + (count == 1 ? "1 output:" : "each of \(count) outputs, one after another:"))
        for device in planned.devices { printOutput("  \(device) (\(labels[device] ?? ""))") }
        if !yes {
            writeOutput("Play it? [y/N] ")
            guard TestTone.isYes(readLine()) else {
                printOutput("nothing played")
                throw ExitCode.failure
            }
        }
        try Self.soundEach(of: planned, labels: labels, logger: logger)
    }

    /// The options and the configuration they make, refused (exit 64) when a ceiling is below
    /// the tone: checked before the configuration's own check, which would blame the clip's
    /// `--volume`.
    private func checkedOptions() throws -> (PlaybackOptions, KeepAliveConfiguration) {
        do {
            let options = try currentOptions()
            if let ceiling = options.sound.maxLevel, let refusal = TestTone.ceilingRefusal(globalCeiling: ceiling) {
                throw CleanExit.failure(refusal, code: SysExit.usage)
            }
            let base = try options.makeConfiguration()
            if let refusal = TestTone.ceilingRefusal(devices: base.devices, in: base) {
                throw CleanExit.failure(refusal, code: SysExit.usage)
            }
            return (options, base)
        } catch let exit as CleanExit {
            throw exit.exit()
        }
    }

    /// Sounds the tone on each planned output in turn; throws the exit code when any failed.
    private static func soundEach(of planned: KeepAliveConfiguration, labels: [String: String], logger: Logger) throws {
        var failures: [String] = []
        for device in planned.devices {
            writeOutput("sounding: \(device) (\(labels[device] ?? "")) … ")
            switch sound(TestTone.configuration(for: device, in: planned), logger: logger) {
            case .success(let note):
                printOutput("done" + (note.map { " (\($0))" } ?? ""))
            case .failure(let failure):
                printOutput("failed: \(failure.reason)")
                failures.append(device)
            }
        }
        let count = planned.devices.count
        let code = TestTone.exitCode(sounded: count - failures.count, failed: failures.count)
        guard code == .success else {
            let which = failures.count == count ? "no output sounded" : "\(failures.count) of \(count) outputs did not sound: \(failures.joined(separator: ", "))"
            printError("keepalived: error: \(which)")
            throw code
        }
    }

    struct Failure: Error {
        let reason: String
    }

    /// Plays the tone on `configuration`'s one output: waits for it to play (at most
    /// ``TestTone/startTimeout``; a missing device or one this user may not open fails at once),
    /// keeps it for ``TestTone/heldFor``, stops it. Succeeds with a note when it was interrupted
    /// on the way.
    static func sound(_ configuration: KeepAliveConfiguration, logger: Logger) -> Result<String?, Failure> {
        let manager: KeepAliveManager
        do { manager = try KeepAliveManager(configuration: configuration, logger: logger) } catch {
            return .failure(Failure(reason: "\(error)"))
        }
        manager.start()
        defer { manager.stop() }
        let clock = ContinuousClock()
        let deadline = clock.now + TestTone.startTimeout
        while true {
            guard let output = manager.outputs.first else { return .failure(Failure(reason: "no output")) }
            if output.state == .playing { break }
            if output.state.kind == .waitingForDevice, let reason = output.state.reason,
               reason == .noDevice || reason == .noDisplay || reason == .permissionDenied {
                return .failure(Failure(reason: describe(output)))
            }
            if clock.now >= deadline {
                return .failure(Failure(reason: "not playing after \(Int(TestTone.startTimeout.seconds)) s: \(describe(output))"))
            }
            sleep(for: .milliseconds(10))
        }
        sleep(for: TestTone.heldFor)
        guard let output = manager.outputs.first, output.state == .playing else {
            return .failure(Failure(reason: "interrupted: \(manager.outputs.first.map(describe) ?? "stopped")"))
        }
        guard output.totalRecoveries == 0 else {
            return .success("interrupted \(output.totalRecoveries) time\(output.totalRecoveries == 1 ? "" : "s") on the way: \(output.lastError ?? "")")
        }
        return .success(nil)
    }

    /// "waiting for device (no-device): cannot open …".
    static func describe(_ output: OutputStatus) -> String {
        "\(output.state)" + (output.lastError.map { ": \($0)" } ?? "")
    }

    /// Each output's label (``TestTone/label(sink:card:hint:)``): sinks from the server's last
    /// answer, card devices from the cards, anything else from ALSA's hints.
    static func labels(for devices: [String], server: SoundServerReachability) -> [String: String] {
        var view = server.view
        if view == nil, devices.contains(where: { ServerSink.sinkName(fromPCM: $0) != nil }) {
            // A sink named with -d alone: run plays it through the plug-in and asks the server
            // nothing; its description is worth one question.
            view = DevicesCommand.askServer().view
        }
        var labels: [String: String] = [:]
        var cards: [CardDevice]?
        var hints: [ALSADevice]?
        for device in devices {
            if let sink = view?.sink(forPCM: device) {
                labels[device] = TestTone.label(sink: sink, card: nil, hint: nil)
                continue
            }
            if cards == nil { cards = CardDevice.playbackDevices() }
            if let card = cards?.first(where: { DevicesCommand.names($0).contains(device) }) {
                labels[device] = TestTone.label(sink: nil, card: card, hint: nil)
                continue
            }
            if hints == nil { hints = ALSADevice.playbackDevices() }
            labels[device] = TestTone.label(sink: nil, card: nil, hint: hints?.first { $0.name == device })
        }
        return labels
    }
}

/// Writes to stdout without a newline (a line finished later, or a question).
private func writeOutput(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}
