import Glibc

/// Notices, through inotify, what can change ALSA's device hints: a card's nodes coming or going
/// in `/dev/snd` (or `/dev/snd` itself appearing), and ALSA's configuration files being written
/// (`~/.asoundrc`, `/etc/asound.conf`, the `conf.d` directories, `ALSA_CONFIG_PATH`'s files).
/// The output scanner rescans on these instead of polling the hints every second, so a daemon
/// with `--all` sleeps while nothing changes.
///
/// ```swift
/// let watcher = HintWatcher()
/// // poll(watcher.descriptor) readable → watcher.drain() → rescan
/// ```
final class HintWatcher {
    /// The inotify descriptor, or -1 without inotify (the scanner then rescans on a timer).
    let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 4096)
    /// The names each watch looks for, by watch descriptor; nil: every entry (a card's nodes,
    /// ALSA's `conf.d` directories). A home directory or `/dev` changes all the time (a shell's
    /// history, a session's log, every tty): only ALSA's own files there call for a rescan.
    private var interests: [Int32: Set<String>?] = [:]
    private var watchesCards = access("/dev/snd", F_OK) == 0

    /// Watches `directories` (by default ALSA's, ``directories()``), each for the names given.
    init(directories: [(String, Set<String>?)] = HintWatcher.directories()) {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return }
        let changes = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ATTRIB)
        for (directory, names) in directories {
            let watch = inotify_add_watch(descriptor, directory, changes | UInt32(IN_ONLYDIR))
            if watch >= 0 { interests[watch] = .some(names) }
        }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Reads what was reported; true when any of it concerns ALSA. Watches on directories that
    /// appeared since (`/dev/snd` after the first card) are added.
    func drain() -> Bool {
        var any = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            buffer.withUnsafeBytes { bytes in
                var offset = 0
                let header = MemoryLayout<inotify_event>.size
                while offset + header <= count {
                    let watch = bytes.load(fromByteOffset: offset, as: Int32.self)
                    let length = Int(bytes.load(fromByteOffset: offset + header - 4, as: UInt32.self))
                    let nameBytes = bytes[(offset + header)..<min(offset + header + length, count)].prefix { $0 != 0 }
                    if Self.concerns(interests[watch] ?? nil, name: String(decoding: nameBytes, as: UTF8.self)) { any = true }
                    offset += header + length
                }
            }
        }
        if any, !watchesCards, access("/dev/snd", F_OK) == 0 {
            let watch = inotify_add_watch(descriptor, "/dev/snd", UInt32(IN_CREATE | IN_DELETE | IN_ATTRIB | IN_ONLYDIR))
            if watch >= 0 {
                interests[watch] = .some(nil)
                watchesCards = true
            }
        }
        return any
    }

    /// Whether an entry called `name` in a watch looking for `names` is worth a rescan.
    static func concerns(_ names: Set<String>?, name: String) -> Bool {
        guard let names else { return true }
        return names.contains(name)
    }

    /// Where cards and ALSA's configuration live for this process, and the names that matter
    /// in each (nil: all).
    static func directories() -> [(String, Set<String>?)] {
        // /dev itself only until /dev/snd exists, and only for snd appearing.
        var directories: [(String, Set<String>?)] = [
            access("/dev/snd", F_OK) == 0 ? ("/dev/snd", nil) : ("/dev", ["snd"]),
            ("/etc", ["asound.conf"]), ("/etc/alsa/conf.d", nil), ("/usr/share/alsa/alsa.conf.d", nil),
        ]
        if let home = RuntimePaths.environment("HOME") { directories.append((home, [".asoundrc", ".asoundrc.asoundconf"])) }
        let configHome = RuntimePaths.environment("XDG_CONFIG_HOME") ?? RuntimePaths.environment("HOME").map { $0 + "/.config" }
        if let configHome { directories.append((configHome + "/alsa", nil)) }
        if let paths = RuntimePaths.environment("ALSA_CONFIG_PATH") {
            for path in paths.split(separator: ":") {
                guard let slash = path.lastIndex(of: "/") else { continue }
                let directory = String(path[..<slash])
                directories.append((directory.isEmpty ? "/" : directory, [String(path[path.index(after: slash)...])]))
            }
        }
        // One watch per directory: the names that matter in it, together.
        var merged: [(String, Set<String>?)] = []
        for (directory, names) in directories {
            if let index = merged.firstIndex(where: { $0.0 == directory }) {
                merged[index].1 = merged[index].1.flatMap { mine in names.map { mine.union($0) } }
            } else {
                merged.append((directory, names))
            }
        }
        return merged
    }
}
