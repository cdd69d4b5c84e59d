import _KeepalivedControlProtocol
import KeepAlive
import Logging

/// `keepalived run`'s parts, made and wired in the order they depend on each other: the one
/// place that knows them all. `RunCommand` parses the options, assembles, and runs; each part
/// gets only what it uses.
///
/// A part the system refuses ends the command here, its error printed and its exit code thrown
/// (`SysExit`), before anything has played: the signalfd, a timer, an eventfd (the reloads'
/// queue, the main loop's doorbell) with EX_OSERR (``systemResource(_:_:)``); the control
/// socket with EX_CANTCREAT, or EX_TEMPFAIL when another daemon already answers there. `--cec`'s
/// doorbell is the exception: refused, it turns HDMI-CEC off at ``run()`` and the daemon plays on,
/// as when its thread cannot start.
///
/// ```swift
/// let playback = try options.currentOptions()   // `options`: the parsed `keepalived run`
/// let daemon = try DaemonAssembly(options: playback, base: try playback.makeConfiguration(), playerGroup: nil,
///                                 paths: RuntimePaths(socketOverride: nil), logFile: nil,
///                                 load: { try options.currentOptions() }, logger: logger)
/// try daemon.run()   // returns after SIGTERM, SIGINT or a `stop` request
/// ```
struct DaemonAssembly {
    private let runtime: DaemonRuntime
    /// `--cec`'s follower: its thread runs while ``run()`` does.
    private let cec: CECFollower
    /// The control socket's `stop`, pointed at the runtime while it runs.
    private let stopRequest: StopRequest

    /// - Parameters:
    ///   - base: the named outputs' configuration (`options.makeConfiguration()`).
    ///   - load: the options in force again, for a reload (the command line's and its file's).
    init(options: PlaybackOptions, base: KeepAliveConfiguration, playerGroup: ControlServer.PlayerGroup?, paths: RuntimePaths,
         logFile: String?, load: @escaping @Sendable () throws -> PlaybackOptions, logger: Logger) throws {
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
        let stopRequest = StopRequest()
        let policy = try Self.checkedOption { try options.session.policy }
        let logind = try Self.systemResource("create a timer") {
            try LogindFollower(manager: manager, policy: policy, logger: logger)
        }
        // --cec: follows the box's activity on a thread of its own.
        let cec = CECFollower(settings: try Self.checkedOption { try options.cec.settings }, logger: logger)
        let activitySettings = try Self.checkedOption { try options.activitySettings }
        let activity = try Self.systemResource("create a timer") {
            try BoxActivity(settings: activitySettings, logger: logger, boxChanged: { cec.boxChanged(active: $0, gate: $1) })
        }

        // Every reload is applied on the main loop; the control socket's thread queues its own
        // and waits for the outcome.
        let reloads = try Self.systemResource("queue reloads") { try MainLoopQueue() }
        let loans = try Self.systemResource("create a timer") { try PlayerLoans(manager: manager, scanner: scanner, activity: activity, logger: logger) }
        // The MQTT controller reports itself in the status it publishes: set once it is made, and
        // held weakly, as in the observers below: the controller reads this status, so a strong
        // reference either way would keep the whole daemon alive after its run (the runtime holds
        // the controller).
        let mqttReport = Locked(WeakMQTTController())
        let status: @Sendable () -> DaemonStatus = {
            var status = DaemonStatus(manager: manager, started: started, paths: paths, logFile: logFile, scanner: scanner, linger: linger.snapshot,
                                      loans: loans, activity: activity, cec: cec)
            status.mqtt = mqttReport.withLock { $0.controller }?.report
            return status
        }
        // --mqtt: its commands are applied on the main loop, through the reloads' queue.
        let mqtt = MQTTController(initial: try Self.mqttConfiguration(options.mqtt),
                                  read: { MQTTBoxState.Sources(status: status(), switchedOff: manager.pauses.contains(.switchedOff), power: activity.powerReport) },
                                  submit: { reloads.submit(MainLoopRequest($0, trigger: "MQTT")) }, logger: logger)
        manager.observe { [weak mqtt] _ in mqtt?.changed() }
        activity.events.observe { [weak mqtt] in mqtt?.record($0) }
        activity.observePower { [weak mqtt] in mqtt?.changed() }
        cec.observe { [weak mqtt] in mqtt?.changed() }
        mqttReport.withLock { $0.controller = mqtt }
        let reloader = Reloader(manager: manager, scanner: scanner, logger: logger, load: load,
                                applying: (logind: logind, linger: linger, activity: activity, cec: cec, mqtt: mqtt))
        let control: ControlServer
        do {
            control = try ControlServer(paths: paths, logger: logger, playerGroup: playerGroup, events: activity.events, handlers: .init(
                status: status,
                stop: { stopRequest.trigger() },
                reload: { reloads.queueReload(trigger: "control socket") },
                release: { request, pid, arrived, hungUp in loans.answer(request, pid: pid, arrived: arrived, hungUp: hungUp) },
                carry: { request, pid, connection in
                    switch PlayerCarrying.handOver(request, pid: pid, connection: connection, manager: manager, scanner: scanner, activity: activity, logger: logger) {
                    case .taken: return true
                    case .notCarried(let why):
                        loans.notCarried(HardwareDevice(card: request.card, device: request.device), pid: pid, because: why)
                        return false
                    }
                }))
        } catch {
            printError("keepalived: error: \(error)")
            if case .alreadyRunning = error { throw SysExit.tempFail }
            throw SysExit.cannotCreate
        }
        let notifier = SystemdNotifier(manager: manager, awaited: { scanner.choice.awaited }, withheld: { scanner.withheld() }, logger: logger)
        runtime = try Self.systemResource("set up the main loop") {
            try DaemonRuntime(
                manager: manager, control: control, reloader: reloader, reloads: reloads, loans: loans, notifier: notifier,
                scanner: scanner, logind: logind, linger: linger, activity: activity, mqtt: mqtt, signals: signals, logger: logger)
        }
        self.cec = cec
        self.stopRequest = stopRequest
    }

    /// Runs the daemon until it is stopped (SIGTERM, SIGINT, `keepalived stop`).
    func run() throws {
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

    /// `--mqtt`'s settings, the password read now (and again at each reload; never logged): nil
    /// without `--mqtt`. A password file that cannot be read ends the command with EX_NOINPUT,
    /// naming the file.
    static func mqttConfiguration(_ options: MQTTOptions) throws -> MQTTController.Configuration? {
        guard let settings = try checkedOption({ try options.settings() }) else { return nil }
        do { return (settings, try settings.readPassword()) } catch {
            printError("keepalived: error: \(error)")
            throw SysExit.noInput
        }
    }

    /// Reads an option's value that the parse has already checked. An error here is a fault (a
    /// check the parse lacks, or options that changed after it), so it ends the command with its
    /// message and EX_USAGE (or the exit code it names) rather than a default that would run
    /// the daemon other than it was told.
    static func checkedOption<Value>(_ read: () throws -> Value) throws -> Value {
        do { return try read() } catch let exit as CleanExit {
            printError("keepalived: error: \(exit.description)")
            throw exit.code
        } catch {
            printError("keepalived: error: \(error)")
            throw SysExit.usage
        }
    }

    /// Makes a part that needs something of the system (a timer, an eventfd, a signalfd): its
    /// refusal ends the command with the system's words and EX_OSERR.
    static func systemResource<Part>(_ what: String, _ make: () throws -> Part) throws -> Part {
        do { return try make() } catch {
            printError("keepalived: error: cannot \(what): \(error)")
            throw SysExit.osError
        }
    }
}

/// The status closure's reference to `--mqtt`'s controller, which reads that status.
private struct WeakMQTTController: Sendable {
    weak var controller: MQTTController?
}

