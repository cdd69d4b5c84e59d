import CKeepAliveSDBus
import KeepAlive
import Logging
import Glibc

/// Follows logind on the system bus through sd-bus, on the daemon's poll loop: the bus's
/// descriptor joins the one `poll`, and ``process()`` hands back what logind said.
///
/// Holds a delay inhibitor lock for sleep, so the outputs can close before the system sleeps;
/// ``releaseSleepLock()`` lets sleep go on, ``takeSleepLock()`` takes a new one after resume.
/// Follows the hints of the login session the daemon runs in (or, for a `systemd --user`
/// service, which belongs to no session, its user's display session). Without a system bus
/// (containers, CI) ``open(logger:)`` returns `nil` and nothing changes.
///
/// ```swift
/// if let logind = LogindWatcher.open(logger: logger) {
///     for event in logind.process() { print(event) }
/// }
/// ```
final class LogindWatcher {
    enum Event: Equatable {
        case prepareForSleep(Bool)
        /// The session's hints, read whenever they changed (and once at start).
        case session(SessionHints)
        /// The bus went away; nothing more will come from this watcher.
        case lost
    }

    struct SessionHints: Equatable {
        var locked: Bool
        var idle: Bool
        /// `IdleSinceHintMonotonic`: CLOCK_MONOTONIC when the session became idle, 0 if unknown.
        var idleSince: Duration
    }

    private var bus: OpaquePointer?
    private var sleepSlot: OpaquePointer?
    private var sessionSlot: OpaquePointer?
    private var ownerSlot: OpaquePointer?
    /// logind took its name on the bus after this watcher connected (it started, or restarted).
    private var logindAppeared = false
    private var sleepLock: Int32 = -1
    /// The followed session's object path, `nil` without one.
    private(set) var session: String?
    private var sessionChanged = false
    private var warnedNoLock = false
    private var pending: [Event] = []
    let logger: Logger

    private init(bus: OpaquePointer, logger: Logger) {
        self.bus = bus
        self.logger = logger
    }

    /// Connects and subscribes; `nil`, after one debug line, when there is no system bus or
    /// no logind on it.
    static func open(logger: Logger) -> LogindWatcher? {
        guard let bus = Bus.system.open(toFollow: "logind", logger: logger) else { return nil }
        let watcher = LogindWatcher(bus: bus, logger: logger)
        let matched = ka_bus_match_prepare_for_sleep(bus, &watcher.sleepSlot, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            var start: Int32 = 0
            guard ka_bus_read_bool(message, &start) >= 0 else { return 0 }
            Unmanaged<LogindWatcher>.fromOpaque(userdata).takeUnretainedValue().pending.append(.prepareForSleep(start != 0))
            return 0
        }, Unmanaged.passUnretained(watcher).toOpaque())
        guard matched >= 0 else {
            logger.debug("not following logind: cannot subscribe", metadata: ["error": "\(Errno(-matched))"])
            return nil
        }
        // A logind that starts (or restarts) after this connection gets the lock and the
        // session subscription it would have had.
        let watched = ka_bus_match_logind_owner(bus, &watcher.ownerSlot, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            var owner: UnsafePointer<CChar>?
            guard ka_bus_read_new_owner(message, &owner) >= 0, let owner, owner.pointee != 0 else { return 0 }
            Unmanaged<LogindWatcher>.fromOpaque(userdata).takeUnretainedValue().logindAppeared = true
            return 0
        }, Unmanaged.passUnretained(watcher).toOpaque())
        if watched < 0 {
            logger.debug("cannot watch for logind to (re)start", metadata: ["error": "\(Errno(-watched))"])
        }
        // Without a lock (polkit may refuse one to a service user) sleep is still followed:
        // the outputs close as sleep begins, only without holding it up until they have.
        watcher.takeSleepLock()
        watcher.attachSession()
        return watcher
    }

    deinit { close() }

    /// The bus's descriptor for `poll`, -1 once closed.
    var descriptor: Int32 { bus.map { sd_bus_get_fd($0) } ?? -1 }

    /// The `poll` events the bus waits for now.
    var events: Int16 { bus.map { Int16(truncatingIfNeeded: sd_bus_get_events($0)) } ?? 0 }

    /// How long `poll` may wait for the bus's own timeouts, in ms; -1 for no limit.
    var pollTimeout: Int32 {
        guard let bus else { return -1 }
        var deadline: UInt64 = 0
        guard sd_bus_get_timeout(bus, &deadline) >= 0, deadline != UInt64.max else { return -1 }
        return monotonicPollTimeout(until: .microseconds(Int64(clamping: deadline)))
    }

    /// Reads what arrived; the events in order. A bus that went away is closed after one
    /// warning and reported as ``Event/lost``: the daemon plays on as if there were no logind
    /// until ``LogindFollower`` reconnects.
    func process() -> [Event] {
        while let bus {
            let result = sd_bus_process(bus, nil)
            if result < 0 {
                logger.warning("lost the system bus; playing regardless until it is back", metadata: ["error": "\(Errno(-result))"])
                close()
                pending.append(.lost)
                break
            }
            if result == 0 { break }
        }
        if logindAppeared, bus != nil {
            logindAppeared = false
            logger.debug("logind appeared on the system bus")
            // A new logind knows no sleep in progress: its first PrepareForSleep is still to come.
            releaseSleepLock()
            takeSleepLock()
            sessionSlot = sessionSlot.flatMap { sd_bus_slot_unref($0) }
            session = nil
            attachSession()
            pending.append(.prepareForSleep(false))
        }
        if sessionChanged {
            sessionChanged = false
            if let hints = readSession() { pending.append(.session(hints)) }
        }
        defer { pending.removeAll(keepingCapacity: true) }
        return pending
    }

    /// Takes logind's delay lock for sleep; false, after one debug line, when logind refuses.
    @discardableResult
    func takeSleepLock() -> Bool {
        guard let bus, sleepLock < 0 else { return sleepLock >= 0 }
        let result = ka_bus_inhibit(bus, "sleep", "keepalived", "close the audio outputs before sleep", "delay", &sleepLock)
        if result < 0 {
            if result != -EACCES, result != -EPERM {
                logger.debug("no logind to take a sleep delay lock from", metadata: ["error": "\(Errno(-result))"])
            } else if !warnedNoLock {
                warnedNoLock = true
                // Where the kernel offers no sleep state at all, the lock would never be used.
                logger.log(level: Self.kernelCanSleep() ? .notice : .debug,
                           "logind refused a sleep delay lock; the outputs close as sleep begins, without holding it up",
                           metadata: ["error": "\(Errno(-result))", "why": "\(Self.lockRefusal)"])
            }
            sleepLock = -1
            return false
        }
        return true
    }

    /// Why logind refuses a delay lock: it asks polkit before it grants one to anyone but root,
    /// and without polkit on the system it refuses every such request.
    static var lockRefusal: String {
        access("/usr/share/dbus-1/system-services/org.freedesktop.PolicyKit1.service", F_OK) == 0
            ? "polkit refused it (a local rule for org.freedesktop.login1.inhibit-delay-sleep?)"
            : "this system has no polkit, without which logind grants delay locks to root only; install polkitd"
    }

    /// Whether the kernel offers any sleep state: `/sys/power/state` lists none in most
    /// containers and on kernels built without suspend or hibernation.
    static func kernelCanSleep(_ path: String = "/sys/power/state") -> Bool {
        readSmallFile(path)?.contains(where: { !$0.isWhitespace }) ?? false
    }

    /// Lets logind go on with sleep.
    func releaseSleepLock() {
        if sleepLock >= 0 { Glibc.close(sleepLock) }
        sleepLock = -1
    }

    /// Finds the session to follow and subscribes to its property changes; the first hints
    /// come with the next ``process()``.
    private func attachSession() {
        guard let bus else { return }
        var path: UnsafeMutablePointer<CChar>?
        var result = ka_bus_session_by_pid(bus, UInt32(getpid()), &path)
        if result < 0 {
            // A `systemd --user` service runs outside any session: follow the user's display.
            result = ka_bus_user_display(bus, getuid(), &path)
        }
        defer { free(path) }
        guard result >= 0, let path, String(cString: path) != "/" else {
            logger.debug("no login session to follow", metadata: ["error": "\(Errno(-result))"])
            return
        }
        let matched = ka_bus_match_properties_changed(bus, path, &sessionSlot, { _, userdata, _ in
            guard let userdata else { return 0 }
            Unmanaged<LogindWatcher>.fromOpaque(userdata).takeUnretainedValue().sessionChanged = true
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
        guard matched >= 0 else {
            logger.debug("cannot follow the login session", metadata: ["error": "\(Errno(-matched))"])
            return
        }
        session = String(cString: path)
        sessionChanged = true
        logger.debug("following the login session", metadata: ["session": "\(String(cString: path))"])
    }

    private func readSession() -> SessionHints? {
        guard let bus, let session else { return nil }
        var locked: Int32 = 0
        var idle: Int32 = 0
        var since: UInt64 = 0
        let results = [
            ka_bus_session_bool(bus, session, "LockedHint", &locked),
            ka_bus_session_bool(bus, session, "IdleHint", &idle),
            ka_bus_session_u64(bus, session, "IdleSinceHintMonotonic", &since),
        ]
        if let failed = results.first(where: { $0 < 0 }) {
            logger.debug("cannot read the login session's hints", metadata: ["session": "\(session)", "error": "\(Errno(-failed))"])
            return nil
        }
        return SessionHints(locked: locked != 0, idle: idle != 0, idleSince: .microseconds(Int64(clamping: since)))
    }

    private func close() {
        releaseSleepLock()
        sleepSlot = sleepSlot.flatMap { sd_bus_slot_unref($0) }
        sessionSlot = sessionSlot.flatMap { sd_bus_slot_unref($0) }
        ownerSlot = ownerSlot.flatMap { sd_bus_slot_unref($0) }
        bus = bus.flatMap { sd_bus_flush_close_unref($0) }
    }
}
