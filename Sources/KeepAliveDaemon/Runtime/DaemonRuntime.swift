import KeepAlive
import Logging
import Glibc

/// `keepalived run`'s main thread: one `poll` on everything the daemon waits for, and nothing
/// else running on it. No Swift concurrency runs in the daemon at all (libdispatch's worker
/// monitor alone would wake the process every second), so in the steady state nothing wakes
/// the process but the systemd watchdog's timer and, in a ring loop, the output's health check.
///
/// What it waits on:
/// - the signals (signalfd): SIGTERM and SIGINT stop, SIGHUP reloads;
/// - its doorbell: rung by a playback thread's state change (for systemd's STATUS), raised by the
///   control socket's `stop`;
/// - the watchdog timer, when systemd asked for one;
/// - the hint watcher (cards and ALSA's configuration) and, with a selection, the sound server's
///   sink watcher, and a one-shot timer that lets a burst of changes settle before the rescan;
/// - logind on the system bus, when there is one (``LogindWatcher``): outputs close before sleep;
/// - the session bus's device reservations, when there is one (``DeviceReservations``): a card
///   another program asks for is closed and given to it.
///
/// ```swift
/// let runtime = DaemonRuntime(manager: manager, control: control, reloader: reloader, logger: logger)
/// try runtime.run()   // returns after SIGTERM, SIGINT or a `stop` request
/// ```
final class DaemonRuntime: @unchecked Sendable {
    let manager: KeepAliveManager
    let control: ControlServer
    let reloader: Reloader
    let notifier: SystemdNotifier?
    let scanner: OutputScanner
    let logind: LogindFollower
    /// `--linger`'s watcher (swapped on reload): runs on libpulse's own thread, started after
    /// the outputs, stopped before them.
    let linger: LingerController?
    let logger: Logger
    private let signals: SignalDescriptor
    /// Rung by playback threads on every event, raised by a `stop` request. Thread-safe.
    let doorbell = Doorbell()

    /// How long a burst of card or configuration changes may take before the outputs are
    /// rescanned, and when to look once more after a change (udev may still be at work).
    static let rescanSettle: Duration = .milliseconds(250)
    static let rescanFollowUp: Duration = .seconds(1)

    /// The shorter of two `poll` timeouts in ms, -1 meaning none.
    static func earliest(_ a: Int32, _ b: Int32) -> Int32 {
        if a < 0 { return b }
        if b < 0 { return a }
        return min(a, b)
    }

    /// Blocks the daemon's signals: call before any thread starts, so that all inherit the mask.
    static func blockSignals() throws(Errno) -> SignalDescriptor {
        try SignalDescriptor(signals: [SIGTERM, SIGINT, SIGHUP])
    }

    init(manager: KeepAliveManager, control: ControlServer, reloader: Reloader, notifier: SystemdNotifier?,
         scanner: OutputScanner, logind: LogindFollower, linger: LingerController? = nil, signals: SignalDescriptor, logger: Logger) {
        self.manager = manager
        self.control = control
        self.reloader = reloader
        self.notifier = notifier
        self.scanner = scanner
        self.logind = logind
        self.linger = linger
        self.signals = signals
        self.logger = logger
    }

    /// The control socket's `stop`: ends ``run()`` as SIGTERM does.
    func requestStop() { doorbell.raise() }

    /// Starts everything, waits until stopped, stops everything.
    /// - Throws: `Errno` when the system refuses a timer or the poll itself, or
    ///   ``ControlSocketError`` when the control socket's thread cannot start; nothing plays then.
    func run() throws {
        let watchdog = try IntervalTimer()
        let rescan = try IntervalTimer()
        try control.start()
        let hints = HintWatcher()
        manager.observe { [doorbell] event in
            switch event {
            case .stateChanged, .started, .stopped: doorbell.ring()
            default: break
            }
        }
        if let interval = notifier?.watchdogInterval { watchdog.arm(after: interval, every: interval) }
        manager.start()
        linger?.start()
        // Outputs a selection found before the first change: the scanner looked once at start.
        notifier?.update()

        var fds = [
            pollfd(fd: signals.descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: doorbell.descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: watchdog.descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: rescan.descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: hints.descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: -1, events: 0, revents: 0),
            pollfd(fd: logind.idleTimer.descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: -1, events: Int16(POLLIN), revents: 0),
            pollfd(fd: -1, events: 0, revents: 0),
        ]
        let reservations = scanner.reservations
        // A server that asks for a card keepalived holds gets it closed before the answer.
        reservations?.onReleaseRequest = { [weak scanner] _ in scanner?.rescan() }
        // The outputs whose cards are reserved now: the reservations follow the outputs.
        var reservedFor: [String]?
        var lingeredFor = manager.configuration.devices
        if !scanner.choice.isEmpty, hints.descriptor < 0 {
            // No inotify: fall back to looking every second.
            rescan.arm(after: Self.rescanFollowUp, every: Self.rescanFollowUp)
        }
        loop: while true {
            for index in fds.indices { fds[index].revents = 0 }
            // sd-bus asks for POLLOUT only while it has something queued, and keeps its own
            // timeouts (method calls): both change between polls.
            fds[5].fd = logind.busDescriptor
            fds[5].events = logind.busEvents
            // A reload may start following a sound server.
            fds[7].fd = scanner.serverDescriptor
            // The session bus's connection is another after it went away and came back.
            fds[8].fd = reservations?.descriptor ?? -1
            fds[8].events = reservations?.events ?? 0
            if poll(&fds, nfds_t(fds.count), Self.earliest(logind.pollTimeout, reservations?.pollTimeout ?? -1)) < 0 {
                if errno == EINTR { continue }
                throw Errno(errno)
            }
            if fds[0].revents != 0 {
                while let signal = signals.next() {
                    if signal == SIGHUP {
                        _ = reloader.reload(trigger: "SIGHUP")
                    } else {
                        logger.info("stopping", metadata: ["signal": "\(signal == SIGINT ? "SIGINT" : "SIGTERM")"])
                        break loop
                    }
                }
            }
            if fds[1].revents != 0 {
                if doorbell.isRaised { break loop }
                doorbell.drain()
                notifier?.update()
            }
            if fds[2].revents != 0 {
                watchdog.acknowledge()
                notifier?.pingWatchdog()
            }
            if fds[4].revents != 0, hints.drain() {
                scanner.cardsOrConfigurationChanged()
                if !scanner.choice.isEmpty { rescan.arm(after: Self.rescanSettle) }
            }
            if fds[7].revents != 0 {
                scanner.acknowledgeServer()
                rescan.arm(after: Self.rescanSettle)
            }
            if fds[3].revents != 0 {
                rescan.acknowledge()
                // Without inotify nothing says what changed: the timer's rescan reads it all.
                if hints.descriptor < 0 { scanner.cardsOrConfigurationChanged() }
                if scanner.rescan() { rescan.arm(after: Self.rescanFollowUp) }
                notifier?.update()
            }
            logind.process(idleTimerFired: fds[6].revents != 0)
            // Also when nothing came: a call (reserving a card) may have queued what arrived.
            if reservations?.process() == true {
                // A program took or let go of a card: the outputs follow, and a server that
                // just started is asked at once.
                reservedFor = nil
                scanner.retryServerNow()
                rescan.arm(after: Self.rescanSettle)
            }
            let devices = manager.configuration.devices
            if let reservations, devices != reservedFor {
                reservations.hold(scanner.cardsOpened(by: devices))
                reservedFor = devices
            }
            // Whatever changed the outputs (a rescan, a reservation): --linger follows them.
            if let linger, devices != lingeredFor {
                linger.follow(devices)
                lingeredFor = devices
            }
        }
        notifier?.stopping()
        control.stop()
        linger?.stop()
        manager.stop()
        scanner.stop()
    }
}
