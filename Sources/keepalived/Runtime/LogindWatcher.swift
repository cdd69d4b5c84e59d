import CSDBus
import KeepAlive
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Follows logind on the system bus through sd-bus, on the daemon's poll loop: the bus's
/// descriptor joins the one `poll`, and ``process()`` hands back what logind said.
///
/// Holds a delay inhibitor lock for sleep, so the outputs can close before the system sleeps;
/// ``releaseSleepLock()`` lets sleep go on, ``takeSleepLock()`` takes a new one after resume.
/// Without a system bus (containers, CI) ``open(logger:)`` returns `nil` and nothing changes.
///
/// ```swift
/// if let logind = LogindWatcher.open(logger: logger) {
///     for event in logind.process() { … }
/// }
/// ```
final class LogindWatcher {
    enum Event: Equatable {
        case prepareForSleep(Bool)
    }

    private var bus: OpaquePointer?
    private var sleepSlot: OpaquePointer?
    private var sleepLock: Int32 = -1
    private var pending: [Event] = []
    let logger: Logger

    private init(bus: OpaquePointer, logger: Logger) {
        self.bus = bus
        self.logger = logger
    }

    /// Connects and subscribes; `nil`, after one debug line, when there is no system bus or
    /// no logind on it.
    static func open(logger: Logger) -> LogindWatcher? {
        var bus: OpaquePointer?
        let opened = ka_bus_open_system(&bus)
        guard opened >= 0, let bus else {
            logger.debug("not following logind: no system bus", metadata: ["error": "\(Errno(-opened))"])
            return nil
        }
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
        guard watcher.takeSleepLock() else { return nil }
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
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        guard deadline > nowMicroseconds else { return 0 }
        return Int32(min((deadline - nowMicroseconds + 999) / 1000, UInt64(Int32.max)))
    }

    /// Reads what arrived; the events in order. A bus that went away is closed after one warning
    /// and the daemon plays on as if there were no logind.
    func process() -> [Event] {
        while let bus {
            let result = sd_bus_process(bus, nil)
            if result < 0 {
                logger.warning("lost the system bus; no longer following logind", metadata: ["error": "\(Errno(-result))"])
                close()
                break
            }
            if result == 0 { break }
        }
        defer { pending.removeAll(keepingCapacity: true) }
        return pending
    }

    /// Takes logind's delay lock for sleep; false, after one debug line, when logind refuses.
    @discardableResult
    func takeSleepLock() -> Bool {
        guard let bus, sleepLock < 0 else { return sleepLock >= 0 }
        let result = ka_bus_inhibit(bus, "sleep", "keepalived", "close outputs before sleep", "delay", &sleepLock)
        if result < 0 {
            logger.debug("not following logind: no sleep inhibitor", metadata: ["error": "\(Errno(-result))"])
            sleepLock = -1
            return false
        }
        return true
    }

    /// Lets logind go on with sleep.
    func releaseSleepLock() {
        if sleepLock >= 0 { Glibc.close(sleepLock) }
        sleepLock = -1
    }

    private func close() {
        releaseSleepLock()
        sleepSlot = sleepSlot.flatMap { sd_bus_slot_unref($0) }
        bus = bus.flatMap { sd_bus_flush_close_unref($0) }
    }
}
