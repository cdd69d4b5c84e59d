#if canImport(Glibc)
import Glibc
#endif
import KeepAlive
import Logging
import ServiceLifecycle
import SystemPackage

/// `AnnouncerDaemon [PCM | --sink SINK]...`: keeps the named ALSA outputs and sound-server sinks
/// (default: `default`) awake while an announcer service runs beside the keep-alive, until
/// SIGTERM or SIGINT.
@main
enum AnnouncerDaemon {
    static func main() async throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        // The program's own name as its log label, through swift-system's FilePath.
        let logger = Logger(label: FilePath(CommandLine.arguments[0]).lastComponent?.string ?? "announcer")

        var devices: [String] = []
        var sinks: [String] = []
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            if argument == "--sink" {
                guard let sink = arguments.popFirst() else {
                    logger.critical("--sink needs a sink's name (pactl list short sinks)")
                    exit(64)
                }
                sinks.append(sink)
            } else {
                devices.append(argument)
            }
        }
        var configuration = KeepAliveConfiguration(devices: devices.isEmpty && sinks.isEmpty ? ["default"] : devices)
        for sink in sinks {
            // A PulseAudio or PipeWire sink, through a stream of the library's own; the ALSA
            // device names the same sink through ALSA's pulse plug-in, opened instead only when
            // libpulse cannot be loaded. A sink's stream is lightest with a 6 s buffer.
            let device = "pulse:DEVICE=\(sink)"
            configuration.devices.append(device)
            configuration.outputSettings[device] = OutputSettings(bufferDuration: .seconds(6), serverSink: sink)
        }
        let keepAlive: KeepAliveService
        do {
            keepAlive = try KeepAliveService(configuration: configuration, logger: logger)
        } catch {
            // The one error the keep-alive throws: a configuration that breaks a rule.
            logger.critical("invalid keep-alive configuration: \(error)")
            exit(64)
        }
        // The announcements are real audio: the tracker says when the outputs are in use, and
        // when they have been quiet for 5 s (where an amplifier would be switched off).
        let activity = OutputActivityTracker(idleAfter: .seconds(5))
        let announcer = Announcer(keepAlive: keepAlive.manager, activity: activity, interval: .seconds(2), logger: logger)

        let group = ServiceGroup(
            services: [keepAlive, activity, announcer],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        try await group.run()
    }
}
