import KeepAlive
import CKeepAliveLinux
import Glibc

/// The kernel events that say a lent card device may be free again: its node opened or closed
/// (inotify on `/dev/snd/pcmC…D…p`), and whether its player still runs (a pidfd each). Its
/// owner (``PlayerLoans``) calls it under its lock; ``descriptor`` joins the main loop's `poll`,
/// ``take()`` drains it.
///
/// ```swift
/// let watcher = LoanWatcher()
/// watcher.follow(HardwareDevice(card: 0, device: 0), pid: 812)
/// if watcher.take() { recheckSoon() }     // a close came: the driver's release may still run
/// ```
final class LoanWatcher {
    /// The inotify descriptor, -1 without inotify (then only the timer looks).
    let descriptor: Int32
    private var watches: [HardwareDevice: Int32] = [:]
    /// A pidfd per player; -1 for a player already gone when it was to be followed.
    private var holders: [HardwareDevice: Int32] = [:]

    init() {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
    }

    deinit {
        for pidfd in holders.values where pidfd >= 0 { close(pidfd) }
        if descriptor >= 0 { close(descriptor) }
    }

    /// Follows `device`'s node and its player `pid`.
    func follow(_ device: HardwareDevice, pid: Int32) {
        if descriptor >= 0, watches[device] == nil {
            let wd = inotify_add_watch(descriptor, device.node, UInt32(IN_OPEN | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE))
            if wd >= 0 { watches[device] = wd }
        }
        if let old = holders.removeValue(forKey: device), old >= 0 { close(old) }
        let pidfd = csystem_pidfd_open(pid)
        if pidfd >= 0 {
            holders[device] = pidfd
        } else if errno == ESRCH {
            // Gone before it could be followed (a player that gave up at once): not alive.
            holders[device] = -1
        }
    }

    /// Stops following `device`.
    func forget(_ device: HardwareDevice) {
        if let wd = watches.removeValue(forKey: device) { inotify_rm_watch(descriptor, wd) }
        if let pidfd = holders.removeValue(forKey: device), pidfd >= 0 { close(pidfd) }
    }

    /// Whether `device`'s player still runs; true when it cannot be told (no pidfd: the
    /// kernel's view of the device decides alone).
    func holderAlive(_ device: HardwareDevice) -> Bool {
        guard let pidfd = holders[device] else { return true }
        guard pidfd >= 0 else { return false }
        var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }

    /// Drains the events; true when a node was closed (whose driver release runs just after
    /// the event: a look right now may still find it open).
    func take() -> Bool {
        guard descriptor >= 0 else { return false }
        var closed = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            var offset = 0
            // struct inotify_event { int wd; uint32_t mask; uint32_t cookie; uint32_t len; char name[len]; }
            while offset + 16 <= count {
                let mask = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) }
                let length = buffer.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)) }
                if mask & UInt32(IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_IGNORED) != 0 { closed = true }
                offset += 16 + length
            }
        }
        return closed
    }
}
