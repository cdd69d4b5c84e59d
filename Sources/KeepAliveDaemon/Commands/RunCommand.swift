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
        let daemon = try DaemonAssembly(options: options, base: base, playerGroup: playerGroup, paths: socket.paths, logFile: logFile,
                                        load: { try currentOptions() }, logger: Logger(label: "keepalived"))
        try daemon.run()
    }
}
