import Glibc

/// An inotify watch on a card device's playback node (`/dev/snd/pcmC0D3p`), which the kernel
/// unlinks when the card goes away: how a ring loop that does not sleep on the PCM itself learns
/// of an unplug at once. Made and dropped with one open, on its playback thread.
final class PCMNodeWatch {
    let descriptor: Int32
    let path: String

    /// nil when the node cannot be watched (no such node: the PCM is not a card's own).
    init?(_ hardware: HardwareDevice) {
        path = "/dev/snd/pcmC\(hardware.card)D\(hardware.device)p"
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        // IN_ATTRIB as well: while keepalived holds the node open its inode outlives the unlink,
        // so IN_DELETE_SELF comes only after the close; the unlink itself changes the link count,
        // which inotify reports as IN_ATTRIB at once (the VM's USB unplug went unseen for the 15 s
        // health check without it).
        guard inotify_add_watch(fd, path, UInt32(IN_DELETE_SELF | IN_ATTRIB)) >= 0 else {
            close(fd)
            return nil
        }
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// Whether the node is still there (a udev chmod also says IN_ATTRIB).
    var exists: Bool { access(path, F_OK) == 0 }

    /// Reads the events there are (the state, not the events, says what happened).
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 512)
        while buffer.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
    }
}
