import KeepAlive
import Logging
import Glibc

/// `keepalived run`'s main thread: one `poll` on everything the daemon waits for, and nothing
/// else running on it. No Swift concurrency runs in the daemon at all (libdispatch's worker
/// monitor alone would wake the process every second), so in the steady state nothing wakes
/// the process but the systemd watchdog's timer and, in a ring loop, the output's health check.
///
/// What it waits on is a ``Wakeup`` each, in one ``PollSet``: the signals, its doorbell, the
/// reloads and releases asked for (``MainLoopQueue``), the card devices lent to players
/// (``PlayerLoans``), the watchdog timer, the cards, the sound servers' sockets and the sound server (and
/// a timer that lets their changes settle before the rescan), logind, the session bus's device
/// reservations. A player's release never waits here (``PlayerLoans``). Every change of configuration is applied here, one at a time and in order:
/// each reload (SIGHUP and the control socket's, whose thread only queues it and waits for the
/// reply) and each rescan, so none can overwrite another with a plan made from older options.
///
/// ```swift
/// let runtime = try DaemonRuntime(manager: manager, control: control, reloader: reloader, reloads: reloads, loans: loans,
///                                 notifier: notifier, scanner: scanner, logind: logind, linger: linger, activity: activity,
///                                 signals: signals, logger: logger)
/// try runtime.run()   // returns after SIGTERM, SIGINT or a `stop` request
/// ```
///
/// Concurrency: everything but ``requestStop()`` (a doorbell, thread-safe) runs on the main loop,
/// which claims ``mainLoop`` and checks it in each handler: so `@unchecked Sendable`.
final class DaemonRuntime: @unchecked Sendable {
    let manager: KeepAliveManager
    let control: ControlServer
    let reloader: Reloader
    /// The changes to apply on this loop: SIGHUP's reloads and the control socket's.
    let reloads: MainLoopQueue
    /// The card devices lent to players: their return is watched on this loop (their release is
    /// answered on the control socket's thread).
    let loans: PlayerLoans
    let notifier: SystemdNotifier?
    let scanner: OutputScanner
    let logind: LogindFollower
    /// `--linger`'s watcher (swapped on reload): runs on libpulse's own thread, started after
    /// the outputs, stopped before them.
    let linger: LingerController?
    /// Whether real audio plays on each output (its idle timer is on this loop), and the
    /// watcher that tells it what plays on the sound server's sinks.
    let activity: BoxActivity
    let activityWatcher: ActivityWatcher
    /// `--mqtt`'s publisher (swapped on reload): started after the outputs, stopped last, so
    /// that `offline` is the last word.
    let mqtt: MQTTController?
    let logger: Logger
    private let signals: SignalDescriptor
    /// Rung by playback threads on every event, raised by a `stop` request. Thread-safe.
    let doorbell: Doorbell
    /// The thread ``run()`` runs on: every reload, rescan and loan's return is applied there.
    let mainLoop = ThreadOwner("the daemon's main loop")

    /// How long a burst of card or configuration changes may take before the outputs are
    /// rescanned, and when to look once more after a change (udev may still be at work).
    static let rescanSettle: Duration = .milliseconds(250)
    static let rescanFollowUp: Duration = .seconds(1)

    /// Blocks the daemon's signals: call before any thread starts, so that all inherit the mask.
    static func blockSignals() throws(Errno) -> SignalDescriptor {
        try SignalDescriptor(signals: [SIGTERM, SIGINT, SIGHUP])
    }

    init(manager: KeepAliveManager, control: ControlServer, reloader: Reloader, reloads: MainLoopQueue, loans: PlayerLoans, notifier: SystemdNotifier?,
         scanner: OutputScanner, logind: LogindFollower, linger: LingerController? = nil, activity: BoxActivity, mqtt: MQTTController? = nil,
         signals: SignalDescriptor, logger: Logger) throws(DoorbellError) {
        doorbell = try Doorbell()
        self.manager = manager
        self.control = control
        self.reloader = reloader
        self.reloads = reloads
        self.loans = loans
        self.notifier = notifier
        self.scanner = scanner
        self.logind = logind
        self.linger = linger
        self.activity = activity
        activityWatcher = ActivityWatcher(activity: activity, logger: logger)
        self.mqtt = mqtt
        self.signals = signals
        self.logger = logger
    }

    /// The control socket's `stop`: ends ``run()`` as SIGTERM does.
    func requestStop() { doorbell.raise() }

    /// What the loop owns while it runs, and what it carries from one turn to the next.
    private struct Loop {
        let watchdog: IntervalTimer
        let rescan: IntervalTimer
        let hints: HintWatcher
        /// The sound servers' sockets: a restarted server is listed as soon as it accepts
        /// clients. The sink watcher's own retries back off to 10 s, and a selection's sinks
        /// come back only with its listing (their outputs were dropped with the server).
        let servers: DeviceWatcher
        /// Home automation's test tone on the outputs, and its timer: made at the first press, so
        /// a daemon never asked holds no descriptor for it.
        var tone: TestToneSounder?
        var poll = PollSet()
        /// The outputs whose cards are reserved now: the reservations follow the outputs.
        var reservedFor: [String]?
        /// The outputs `--linger` follows now.
        var lingeredFor: [String]
        /// The outputs whose activity is read from the sound server now.
        var activityFor: [String]?
    }

    /// Starts everything, waits until stopped, stops everything.
    /// - Throws: `Errno` when the system refuses a timer or the poll itself, or
    ///   ``ControlSocketError`` when the control socket's thread cannot start; nothing plays then.
    func run() throws {
        mainLoop.claim()
        var loop = try start()
        while true {
            refresh(&loop.poll)
            guard try loop.poll.wait(timeout: pollTimeout) else { continue }
            guard handleReady(&loop) else { break }
            followOutputs(&loop)
        }
        stop()
    }

    /// Starts the control socket, the outputs and `--linger`, and sets up what the loop polls.
    private func start() throws -> Loop {
        let watchdog = try IntervalTimer()
        let rescan = try IntervalTimer()
        try control.start()
        let hints = HintWatcher()
        manager.observe { [doorbell] event in
            switch event.kind {
            case .stateChanged, .started, .stopped: doorbell.ring()
            default: break
            }
        }
        if let interval = notifier?.watchdogInterval { watchdog.arm(after: interval, every: interval) }
        manager.start()
        linger?.start(on: mainLoop)
        mqtt?.start(on: mainLoop)
        // Outputs a selection found before the first change: the scanner looked once at start.
        notifier?.update()
        // A server that asks for a card keepalived holds gets it closed before the answer.
        scanner.reservations?.onReleaseRequest = { [weak scanner, mainLoop] _ in scanner?.rescan(on: mainLoop) }
        if !scanner.choice.isEmpty, hints.descriptor < 0 {
            // No inotify: fall back to looking every second.
            rescan.arm(after: Self.rescanFollowUp, every: Self.rescanFollowUp)
        }
        let servers = DeviceWatcher(spots: DeviceWatcher.defaultSpots().filter { $0.kind == .server })
        var loop = Loop(watchdog: watchdog, rescan: rescan, hints: hints, servers: servers, lingeredFor: manager.configuration.devices)
        loop.poll.watch(.signals, signals.descriptor)
        loop.poll.watch(.doorbell, doorbell.descriptor)
        loop.poll.watch(.reloads, reloads.descriptor)
        loop.poll.watch(.watchdog, watchdog.descriptor)
        loop.poll.watch(.hints, hints.descriptor)
        loop.poll.watch(.serverSocket, servers.descriptor)
        loop.poll.watch(.rescanTimer, rescan.descriptor)
        loop.poll.watch(.idleTimer, logind.idleTimer.descriptor)
        loop.poll.watch(.loanNodes, loans.descriptor)
        loop.poll.watch(.loanTimer, loans.timer.descriptor)
        loop.poll.watch(.activityTimer, activity.timer.descriptor)
        followOutputs(&loop)
        return loop
    }

    /// The descriptors that change between turns.
    private func refresh(_ poll: inout PollSet) {
        // sd-bus asks for POLLOUT only while it has something queued, and keeps its own
        // timeouts (method calls): both change between polls.
        poll.watch(.logind, logind.busDescriptor, events: logind.busEvents)
        // A reload may start following a sound server.
        poll.watch(.soundServer, scanner.serverDescriptor)
        // The session bus's connection is another after it went away and came back.
        poll.watch(.reservations, scanner.reservations?.descriptor ?? -1, events: scanner.reservations?.events ?? 0)
    }

    /// The buses' own timeouts (sd-bus's method calls); -1 when neither has one.
    private var pollTimeout: Int32 {
        earliestPollTimeout(logind.pollTimeout, scanner.reservations?.pollTimeout ?? -1)
    }

    /// Handles the ready sources in ``Wakeup``'s order, then the buses; false once the daemon is
    /// to stop.
    private func handleReady(_ loop: inout Loop) -> Bool {
        for source in loop.poll.ready {
            guard handle(source, &loop) else { return false }
        }
        logind.process(idleTimerFired: loop.poll.isReady(.idleTimer), on: mainLoop)
        // Also when nothing came: a call (reserving a card) may have queued what arrived.
        if scanner.reservations?.process(on: mainLoop) == true {
            // A program took or let go of a card: the outputs follow, and a server that just
            // started is asked at once.
            loop.reservedFor = nil
            scanner.retryServerNow()
            loop.rescan.arm(after: Self.rescanSettle)
        }
        return true
    }

    /// Handles one ready source; false once the daemon is to stop.
    private func handle(_ source: Wakeup, _ loop: inout Loop) -> Bool {
        mainLoop.preconditionOwned("DaemonRuntime.handle(\(source))")
        switch source {
        case .signals:
            while let signal = signals.next() {
                guard signal == SIGHUP else {
                    logger.info("stopping", metadata: ["signal": "\(signal == SIGINT ? "SIGINT" : "SIGTERM")"])
                    return false
                }
                // Behind the reloads already asked for: applied in the order they came.
                reloads.submit(MainLoopRequest(trigger: "SIGHUP"))
            }
        case .doorbell:
            if doorbell.isRaised { return false }
            doorbell.drain()
            notifier?.update()
        case .reloads:
            for request in reloads.take() {
                switch request.change {
                case .reload: request.fulfil(reloader.reload(trigger: request.trigger, on: mainLoop))
                case .remote(let command):
                    if command == .testTone, loop.tone == nil { makeTone(&loop) }
                    request.fulfil(command.apply(manager: manager, activity: activity, tone: loop.tone, logger: logger, on: mainLoop))
                }
            }
        case .loanNodes, .loanTimer:
            loans.process(on: mainLoop)
        case .activityTimer:
            activity.timerFired(on: mainLoop)
        case .toneTimer:
            loop.tone?.timerFired()
        case .watchdog:
            loop.watchdog.acknowledge()
            notifier?.pingWatchdog()
        case .hints:
            guard loop.hints.drain() else { break }
            scanner.cardsOrConfigurationChanged()
            if !scanner.choice.isEmpty { loop.rescan.arm(after: Self.rescanSettle) }
        case .serverSocket:
            // Nothing while the watcher is connected or connecting (or there is none).
            if loop.servers.take().contains(.server) { scanner.retryServerNow() }
        case .soundServer:
            scanner.acknowledgeServer()
            loop.rescan.arm(after: Self.rescanSettle)
        case .rescanTimer:
            loop.rescan.acknowledge()
            // Without inotify nothing says what changed: the timer's rescan reads it all.
            if loop.hints.descriptor < 0 { scanner.cardsOrConfigurationChanged() }
            if scanner.rescan(on: mainLoop) { loop.rescan.arm(after: Self.rescanFollowUp) }
            notifier?.update()
        case .idleTimer, .logind, .reservations:
            // Processed every turn, ready or not (handleReady).
            break
        }
        return true
    }

    /// The test tone's sounder, and its timer in the poll; none when the system refuses a timer
    /// (the press is refused, the journal says why).
    private func makeTone(_ loop: inout Loop) {
        do {
            let tone = TestToneSounder(manager: manager, timer: try IntervalTimer(), logger: logger, on: mainLoop)
            loop.poll.watch(.toneTimer, tone.timer.descriptor)
            loop.tone = tone
        } catch {
            logger.error("no test tone: no timer to end it with", metadata: ["error": "\(error)"])
        }
    }

    /// Whatever changed the outputs (a reload, a rescan, a reservation): the card reservations
    /// and `--linger` follow them.
    private func followOutputs(_ loop: inout Loop) {
        let devices = manager.configuration.devices
        if let reservations = scanner.reservations, devices != loop.reservedFor {
            reservations.hold(scanner.cardsOpened(by: devices), on: mainLoop)
            loop.reservedFor = devices
        }
        if let linger, devices != loop.lingeredFor {
            linger.follow(devices, on: mainLoop)
            loop.lingeredFor = devices
        }
        if devices != loop.activityFor {
            let configuration = manager.configuration
            var sinks: [String: String?] = [:]
            for device in devices {
                if let sink = ServerSink.sinkName(fromPCM: device) {
                    sinks[device] = .some(sink)
                } else if configuration.configuration(for: device).serverSink == ServerDefaultOutput.defaultSink {
                    sinks[device] = .some(nil)
                }
            }
            activityWatcher.follow(sinks)
            loop.activityFor = devices
        }
    }

    /// Stops everything; the outputs before the control socket: a player whose open keepalived
    /// holds (`--power-on-wait`) is answered once the card is free, never left to find the
    /// socket closed and the card still keepalived's (EBUSY).
    private func stop() {
        // Before the control socket's thread is joined: a reload it waits for is answered now.
        reloads.close(failing: MainLoopQueue.stopping)
        notifier?.stopping()
        activityWatcher.stop()
        linger?.stop(on: mainLoop)
        manager.stop()
        control.stop()
        // Their outputs are closed with the rest: what is left of them is bookkeeping.
        loans.finishReleases()
        // Inside the units' TimeoutStopSec (15 s), with room for the rest of the stop.
        if !activity.finishHooks(within: Self.hooksAtStop) {
            logger.warning("hooks still run at the stop: left to end on their own", metadata: ["waited": "\(Self.hooksAtStop)"])
        }
        scanner.stop()
        mqtt?.stop()
    }

    /// How long a stop waits for the hooks still running or queued.
    static let hooksAtStop: Duration = .seconds(10)
}
