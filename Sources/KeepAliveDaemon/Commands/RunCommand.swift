#if canImport(Glibc)
import Glibc
#endif
import _KeepalivedControlProtocol
import ArgumentParser
import CALSA
import CKeepAliveLinux
import KeepAlive
import Logging

/// `keepalived run`: play in the foreground until SIGINT or SIGTERM.
package struct RunCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Play the keep-alive stream in the foreground until SIGINT or SIGTERM.",
        discussion: """
            With no device, or a device that cannot be opened yet, keepalived says it is waiting \
            and keeps retrying; it does not exit. Exit codes: 0 after a clean stop, 64 bad option, \
            65 bad WAV, 66 unreadable clip file, 73 control socket cannot be created, 75 already running.
            """
    )

    @OptionGroup var playback: PlaybackOptions
    @OptionGroup var socket: SocketOption

    @Option(name: .customLong("config"), help: ArgumentHelp(
        "Options file (KEEPALIVED_OPTIONS=\"…\" in EnvironmentFile syntax) read at start and on reload; its options add to the command line's.",
        valueName: "path"))
    var configFile: String?

    @Option(name: .customLong("log-file"), help: .hidden)
    var logFile: String?

    @Option(name: .customLong("player-group"), help: ArgumentHelp(
        "Let members of this group (audio, for the system service) ask for a card device through the keepalived: ALSA PCM: the control socket becomes theirs too (mode 0660), for that request only.",
        valueName: "group"))
    var playerGroup: String?

    /// The `--player-group` named, resolved.
    func resolvedPlayerGroup() throws -> ControlServer.PlayerGroup? {
        guard let playerGroup else { return nil }
        guard let entry = getgrnam(playerGroup) else {
            throw CleanExit.failure("--player-group: no group named '\(playerGroup)'", code: SysExit.noUser)
        }
        return ControlServer.PlayerGroup(name: playerGroup, id: entry.pointee.gr_gid)
    }

    /// The playback options in force: `run`'s own words on the command line, then the options
    /// file's, in one parse, so ArgumentParser alone decides how they combine (a list adds up; of
    /// a single value, the file's wins).
    func currentOptions(commandLine: [String] = RunCommand.commandLineWords()) throws -> PlaybackOptions {
        guard let configFile else { return playback }
        let merged = try CommandLineWithOptionsFile.parse(RunCommand.self, commandLine: commandLine, file: configFile)
        guard merged.configFile == configFile, merged.logFile == logFile, merged.socket.path == socket.path, merged.playerGroup == playerGroup else {
            throw CleanExit.failure("\(configFile): only playback options belong in an options file (--config, --socket, --player-group and --log-file are the command line's)",
                                    code: SysExit.usage)
        }
        return merged.playback
    }

    /// The words after `run` on this process's command line.
    static func commandLineWords(_ arguments: [String] = CommandLine.arguments) -> [String] {
        CommandLineWithOptionsFile.words(after: "run", in: arguments)
    }

    package func run() throws {
        DaemonProcess.configure()
        let options: PlaybackOptions
        let base: KeepAliveConfiguration
        let playerGroup: ControlServer.PlayerGroup?
        do {
            playerGroup = try resolvedPlayerGroup()
            options = try currentOptions()
            base = try options.makeConfiguration()
            // Refused here, before anything starts, when only named hardware outputs would linger.
            _ = try options.lingerPlan(for: base)
        } catch let exit as CleanExit {
            printError("keepalived: error: \(exit.description)")
            throw exit.code
        }
        DaemonLogHandler.bootstrap(verbose: options.verbose)
        let logger = Logger(label: "keepalived")
        // Before any thread starts, so that every thread inherits the blocked signals and only
        // the main loop's signalfd sees them.
        let signals = try Self.systemResource("receive signals") { try DaemonRuntime.blockSignals() }
        // The first plan waits for the sound server's answer: until then no card is taken.
        let scanner = OutputScanner(logger: logger, reservations: DeviceReservations.open(logger: logger))
        scanner.use(base, choice: options.choice)
        let configuration = scanner.planned()
        let lingerPlan: LingerPlan?
        do { lingerPlan = try options.lingerPlan(for: configuration) } catch let exit as CleanExit {
            printError("keepalived: error: \(exit.description)")
            throw exit.code
        }
        let manager = try KeepAliveManager(configuration: configuration, logger: logger)
        scanner.attach(manager)
        let linger = LingerController(plan: lingerPlan, manager: manager, logger: logger)
        let started = ContinuousClock.now
        let paths = socket.paths
        let stopRequest = StopRequest()
        let logind = try Self.systemResource("create a timer") {
            try LogindFollower(manager: manager, policy: (try? options.session.policy) ?? PauseStateMachine.Policy(), logger: logger)
        }
        // --cec: follows the box's activity on a thread of its own (checked by the parse).
        let cec = CECFollower(settings: (try? options.cec.settings) ?? CECFollower.Settings(), logger: logger)
        let activity = try Self.systemResource("create a timer") {
            try BoxActivity(settings: try options.activitySettings, logger: logger, boxChanged: { cec.boxChanged(active: $0) })
        }
        let reloader = Reloader(manager: manager, scanner: scanner, logger: logger, load: { try currentOptions() },
                                applying: (logind: logind, linger: linger, activity: activity, cec: cec))

        // Every reload is applied on the main loop; the control socket's thread queues its own
        // and waits for the outcome.
        let reloads = try Self.systemResource("queue reloads") { try MainLoopQueue() }
        let loans = try Self.systemResource("create a timer") { try PlayerLoans(manager: manager, scanner: scanner, activity: activity, logger: logger) }
        let control: ControlServer
        do {
            control = try ControlServer(paths: paths, logger: logger, playerGroup: playerGroup, events: activity.events, handlers: .init(
                status: {
                    DaemonStatus(manager: manager, started: started, paths: paths, logFile: logFile, scanner: scanner, linger: linger.snapshot,
                                 loans: loans, activity: activity, cec: cec)
                },
                stop: { stopRequest.trigger() },
                reload: { reloads.queueReload(trigger: "control socket") },
                release: { request, pid, arrived, hungUp in loans.answer(request, pid: pid, arrived: arrived, hungUp: hungUp) }))
        } catch {
            printError("keepalived: error: \(error)")
            if case .alreadyRunning = error { throw SysExit.tempFail }
            throw SysExit.cannotCreate
        }
        let runtime = DaemonRuntime(
            manager: manager, control: control, reloader: reloader, reloads: reloads, loans: loans,
            notifier: SystemdNotifier(manager: manager, awaited: { scanner.choice.awaited }, withheld: { scanner.withheld() }, logger: logger), scanner: scanner, logind: logind, linger: linger, activity: activity, signals: signals, logger: logger)
        stopRequest.arm(runtime)
        // The control socket's handlers hold the request, the request the runtime, the runtime
        // the control socket: let go once it ran, so nothing outlives the command unreachable.
        defer { stopRequest.disarm() }
        cec.start()
        defer { cec.stop() }
        do { try runtime.run() } catch {
            printError("keepalived: error: \(error)")
            throw error is ControlSocketError ? SysExit.cannotCreate : SysExit.osError
        }
    }
}

extension RunCommand {
    /// Makes a part that needs something of the system (a timer, an eventfd, a signalfd): its
    /// refusal ends the command with the system's words and EX_OSERR.
    static func systemResource<Part>(_ what: String, _ make: () throws -> Part) throws -> Part {
        do { return try make() } catch {
            printError("keepalived: error: cannot \(what): \(error)")
            throw SysExit.osError
        }
    }
}
