/// What the daemon's main loop waits for, one `poll` descriptor each. A turn of the loop handles
/// the ready ones in this order: a stop before anything else, a reload before the rescan that
/// must plan from its options, the buses last (they are processed every turn).
enum Wakeup: Int, CaseIterable, Sendable {
    /// SIGTERM and SIGINT stop; SIGHUP queues a reload (signalfd).
    case signals
    /// Rung by a playback thread's state change (systemd's STATUS), raised by a `stop` request.
    case doorbell
    /// Reloads waiting in the ``MainLoopQueue`` (a player's release never waits here).
    case reloads
    /// A lent card device's node opened or closed (``PlayerLoans``' inotify).
    case loanNodes
    /// The next look at the lent card devices (``PlayerLoans``' timer).
    case loanTimer
    /// The first output whose real audio stopped goes idle (``BoxActivity``'s timer).
    case activityTimer
    /// The test tone has played: its outputs get their keep-alive back (``TestToneSounder``).
    case toneTimer
    /// systemd's watchdog timer, when systemd asked for one.
    case watchdog
    /// The cards and ALSA's configuration (``HintWatcher``).
    case hints
    /// A sound server's socket created (``DeviceWatcher``): a server (re)started, and the sink
    /// watcher tries it at once instead of at its next backoff step.
    case serverSocket
    /// The sound server's sinks and cards (the sink watcher's doorbell), once one is followed.
    case soundServer
    /// A one-shot timer that lets a burst of changes settle before the rescan.
    case rescanTimer
    /// logind's idle timer (`--pause-when idle`).
    case idleTimer
    /// logind on the system bus; another connection after a reconnect.
    case logind
    /// The session bus's device reservations; another connection after a reconnect.
    case reservations
}
