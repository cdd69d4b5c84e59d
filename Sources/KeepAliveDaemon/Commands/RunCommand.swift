#if canImport(Glibc)
import Glibc
#endif
import _KeepalivedControlProtocol
import ArgumentParser
import CALSA
import CKeepAliveLinux
import KeepAlive
import Logging
import Synchronization

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
        // One malloc arena for the whole daemon: glibc gives each thread that allocates an arena
        // of its own, each keeping its free pages, and nothing here allocates often enough to
        // contend. Measured with bench/run: 1.63 → 1.59 MB private on PulseAudio.
        mallopt(M_ARENA_MAX, 1)
        // Blocks of 128 KiB and more (a rendered loop: a write of a sink's 8 s buffer is 350 kB)
        // mapped on their own, and unmapped when freed. Left to glibc, the first such free
        // raises the threshold to its size, and every later loop (each open renders one) comes
        // from the heap, whose top alone goes back: scripts/chaos saw the heap go from 0.46 to
        // 2-2.9 MB after the first reopens and stay there. Set, the threshold stays where it is.
        mallopt(M_MMAP_THRESHOLD, 128 * 1024)
        // alsa-lib prints every internal failure (an underrun, a lost server) to stderr; the
        // daemon recovers from those on purpose and reports each once through its logger.
        calsa_silence_library_errors()
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
        let signals: SignalDescriptor
        do { signals = try DaemonRuntime.blockSignals() } catch {
            printError("keepalived: error: cannot receive signals: \(error)")
            throw SysExit.osError
        }
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
        let logind: LogindFollower
        do { logind = try LogindFollower(manager: manager, policy: (try? options.session.policy) ?? PauseStateMachine.Policy(), logger: logger) } catch {
            printError("keepalived: error: cannot create a timer: \(error)")
            throw SysExit.osError
        }
        // --cec: follows the box's activity on a thread of its own (checked by the parse).
        let cec = CECFollower(settings: (try? options.cec.settings) ?? CECFollower.Settings(), logger: logger)
        let activity: OutputActivity
        do { activity = try OutputActivity(settings: try options.activitySettings, logger: logger, boxChanged: { cec.boxChanged(active: $0) }) } catch {
            printError("keepalived: error: cannot create a timer: \(error)")
            throw SysExit.osError
        }
        let reloader = Reloader(manager: manager, scanner: scanner, logger: logger, load: { try currentOptions() }, prepare: { next, configuration in
            let policy = (try? next.session.policy) ?? PauseStateMachine.Policy()
            let plan = try next.lingerPlan(for: configuration)
            let power = try next.activitySettings
            let cecSettings = try next.cec.settings
            return {
                logind.policyChanged(policy)
                linger.apply(plan)
                activity.apply(power)
                cec.apply(cecSettings)
            }
        })

        // Every reload is applied on the main loop; the control socket's thread queues its own
        // and waits for the outcome.
        let reloads: MainLoopQueue
        do { reloads = try MainLoopQueue() } catch {
            printError("keepalived: error: cannot queue reloads: \(error)")
            throw SysExit.osError
        }
        let loans: PlayerLoans
        do { loans = try PlayerLoans(manager: manager, scanner: scanner, activity: activity, logger: logger) } catch {
            printError("keepalived: error: cannot create a timer: \(error)")
            throw SysExit.osError
        }
        let control: ControlServer
        do {
            control = try ControlServer(paths: paths, logger: logger, playerGroup: playerGroup, events: activity.events, handlers: .init(
                status: {
                    var status = DaemonStatus(manager: manager, started: started, paths: paths, logFile: logFile, scanner: scanner, linger: linger.snapshot)
                    let lent = loans.reports
                    status.loans = lent.isEmpty ? nil : lent
                    for index in status.outputs.indices { status.outputs[index].activity = activity.report(for: status.outputs[index].device) }
                    status.cec = cec.report
                    return status
                },
                stop: { stopRequest.trigger() },
                reload: { reloads.queueReload(trigger: "control socket") },
                release: { request, pid, arrived, hungUp in
                    // --power-on-wait: a player at an idle output waits for --on-active, while
                    // keepalived still plays there; the release follows.
                    let device = HardwareDevice(card: request.card, device: request.device)
                    let player = OutputActivity.Player(program: request.program ?? "pid \(pid)", card: request.card, device: request.device)
                    let outputs = scanner.outputs(on: device)
                    guard let gate = activity.holdForPower(outputs, player: player) else {
                        return .reply(loans.release(request, pid: pid, arrived: arrived, hungUp: hungUp))
                    }
                    return .afterPowerOn(gate) { hungUp in
                        defer { activity.playerArrived(outputs) }
                        return loans.release(request, pid: pid, arrived: .now, hungUp: hungUp)
                    }
                }))
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

/// Lets the control socket's `stop` request end the main loop the same way SIGTERM does.
final class StopRequest: Sendable {
    private let runtime = Mutex<DaemonRuntime?>(nil)

    func arm(_ runtime: DaemonRuntime) { self.runtime.withLock { $0 = runtime } }

    func disarm() { runtime.withLock { $0 = nil } }

    func trigger() { runtime.withLock { $0 }?.requestStop() }
}

extension DaemonStatus {
    init(manager: KeepAliveManager, started: ContinuousClock.Instant, paths: RuntimePaths, logFile: String?,
         scanner: OutputScanner? = nil, linger: (plan: LingerPlan?, watcher: LingerWatcher?) = (nil, nil)) {
        // One snapshot: the state is the outputs' own, the ceiling the configuration's they play.
        let snapshot = manager.snapshot
        let state = snapshot.state
        let choice = scanner?.choice ?? OutputChoice()
        let server = scanner?.server ?? .unreachable("")
        self.init(
            state: state.name, reason: state.wireReason, pid: getpid(),
            uptimeSeconds: started.duration(to: .now).seconds, socket: paths.socket, logFile: logFile,
            outputs: snapshot.outputs.map { output in
                let own = snapshot.configuration.configuration(for: output.device)
                var report = OutputReport(output, ceiling: own.ceiling, signal: own.signal.description)
                if let plan = linger.plan { report.linger = LingerReport(device: output.device, plan: plan, watcher: linger.watcher) }
                if let view = server.view, let sink = view.sink(forPCM: output.device) {
                    report.server = view.server
                    report.sink = sink.name
                    report.sinkKind = sink.kind.rawValue
                } else if let view = server.view, own.serverSink == ServerDefaultOutput.defaultSink {
                    // The default sink, whichever it is now.
                    let sink = view.sinks.first { $0.name == view.defaultSink }
                    report.server = view.server
                    report.sink = view.defaultSink.map { "\($0) (the default sink)" }
                    report.sinkKind = sink?.kind.rawValue
                }
                return report
            },
            exclude: choice.exclusions.isEmpty ? nil : choice.exclusions.map(\.pattern))
        if !choice.isEmpty {
            switch server {
            case .connected(let view): soundServer = view.server
            case .unreachable(let why): soundServer = "none (\(why.isEmpty ? "not followed" : why))"
            case .unknown: soundServer = "not answered yet"
            }
        }
        // Named outputs too: a card another program reserved.
        let withheld = scanner?.withheld() ?? [:]
        self.withheld = withheld.isEmpty ? nil : withheld
    }
}
