import Glibc

/// Tells ``CECAdapter`` when its missing or refused node may be usable: inotify on the node's
/// directory (`/dev`), for the node created (the adapter's driver loaded, a USB adapter plugged)
/// and its owner or mode changed (udev gives it to group `video` just after). Without it the
/// adapter would have to try the node on a short timer, waking the daemon every few seconds for
/// as long as the adapter is missing; with it, only a long fallback timer remains (a refusal no
/// file change ends: another program holding the adapter as its exclusive follower).
///
/// The adapter tries its node again on every wake while it is missing: any change in `/dev` is
/// rare, and an open that fails again is cheap and logged once per reason.
///
/// ```swift
/// let watcher = CECNodeWatcher(device: "/dev/cec0")
/// // poll watcher.descriptor; when readable:
/// watcher.drain()
/// tryToOpen()
/// ```
///
/// Not Sendable: the adapter's thread alone owns it.
final class CECNodeWatcher {
    /// The inotify descriptor to poll, or -1 when inotify refused (the fallback timer alone then).
    let descriptor: Int32

    init(device: String) {
        let slash = device.lastIndex(of: "/")!
        let directory = slash == device.startIndex ? "/" : String(device[..<slash])
        var fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if fd >= 0, inotify_add_watch(fd, directory, UInt32(IN_CREATE | IN_ATTRIB | IN_MOVED_TO)) < 0 {
            close(fd)
            fd = -1
        }
        descriptor = fd
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Reads what inotify reported, so that the next poll sleeps until the next change.
    func drain() {
        guard descriptor >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
        }
    }
}
