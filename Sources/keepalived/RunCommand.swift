#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import KeepAlive
import Logging
import ServiceLifecycle

/// `keepalived run`: play in the foreground until SIGINT or SIGTERM.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Play the keep-alive stream in the foreground until SIGINT or SIGTERM.",
        discussion: """
            With no device, or a device that cannot be opened yet, keepalived says it is waiting \
            and keeps retrying; it does not exit. Exit codes: 0 after a clean stop, 64 bad option, \
            65 bad WAV, 66 unreadable clip file.
            """
    )

    @OptionGroup var playback: PlaybackOptions

    func run() async throws {
        let configuration: KeepAliveConfiguration
        do {
            configuration = try playback.makeConfiguration()
        } catch let exit as CleanExit {
            printError("keepalived: error: \(exit.description)")
            throw exit.code
        }
        DaemonLogHandler.bootstrap(verbose: playback.verbose)
        let logger = Logger(label: "keepalived")
        let keepAlive = KeepAliveService(manager: try KeepAliveManager(configuration: configuration, logger: logger))
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [.init(service: keepAlive)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await group.run()
    }
}

func printError(_ message: String) {
    var line = message
    line += "\n"
    // One write per line: lines from several threads never interleave.
    var bytes = Array(line.utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}
