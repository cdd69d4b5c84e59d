#if canImport(Glibc)
import Glibc
#endif
import KeepAlive
import Logging
import ServiceLifecycle

/// `AnnouncerDaemon [PCM]...`: keeps the named ALSA outputs (default: `default`) awake while an
/// announcer service runs beside the keep-alive, until SIGTERM or SIGINT.
@main
enum AnnouncerDaemon {
    static func main() async throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        let logger = Logger(label: "announcer")

        let devices = Array(CommandLine.arguments.dropFirst())
        let configuration = KeepAliveConfiguration(devices: devices.isEmpty ? ["default"] : devices)
        let keepAlive: KeepAliveService
        do {
            keepAlive = try KeepAliveService(configuration: configuration, logger: logger)
        } catch {
            // The one error the keep-alive throws: a configuration that breaks a rule.
            logger.critical("invalid keep-alive configuration: \(error)")
            exit(64)
        }
        let announcer = Announcer(keepAlive: keepAlive.manager, interval: .seconds(2), logger: logger)

        let group = ServiceGroup(
            services: [keepAlive, announcer],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        try await group.run()
    }
}
