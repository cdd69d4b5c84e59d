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
    /// What in a watched directory calls for a rescan.
    enum Interest: Equatable {
        /// Only these entries (a home directory or `/dev` changes all the time: a shell's
        /// history, a session's log, every tty).
        case names(Set<String>)
        /// Every entry (ALSA's `conf.d` directories).
        case everything
        /// A card's nodes (`/dev/snd`): any node made, removed or given other permissions, and a
        /// PCM closed after writing (a card another program held is free now). Not a control
        /// node closed: alsa-lib opens and closes every card's control node read-write for each
        /// hint scan, and the close of the scan's own would call for the next scan, for ever.
        case cards

        /// One watch per directory: what two want of it together.
        func merged(with other: Interest) -> Interest {
            switch (self, other) {
            case (.cards, _), (_, .cards): .cards
            case (.everything, _), (_, .everything): .everything
            case (.names(let mine), .names(let theirs)): .names(mine.union(theirs))
            }
        }

        /// Whether an event of `mask` on the entry called `name` is worth a rescan.
        func concerns(_ name: String, mask: UInt32) -> Bool {
            switch self {
            case .names(let names): names.contains(name)
            case .everything: true
            case .cards: mask & ~UInt32(IN_CLOSE_WRITE) != 0 || name.hasPrefix("pcm")
            }
        }
    }

    /// The inotify descriptor, or -1 without inotify (the scanner then rescans on a timer).
    let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 4096)
    private var interests: [Int32: Interest] = [:]
    private var watchesCards = access("/dev/snd", F_OK) == 0
    private static let changes = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ATTRIB | IN_ONLYDIR)

    /// Watches `directories` (by default ALSA's, ``directories()``), each for what it says.
    init(directories: [(String, Interest)] = HintWatcher.directories()) {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return }
        for (directory, interest) in directories {
            let watch = inotify_add_watch(descriptor, directory, Self.changes)
            if watch >= 0 { interests[watch] = interest }
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
                    let mask = bytes.load(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(bytes.load(fromByteOffset: offset + header - 4, as: UInt32.self))
                    let nameBytes = bytes[(offset + header)..<min(offset + header + length, count)].prefix { $0 != 0 }
                    if let interest = interests[watch], interest.concerns(String(decoding: nameBytes, as: UTF8.self), mask: mask) { any = true }
                    offset += header + length
                }
            }
        }
        if any, !watchesCards, access("/dev/snd", F_OK) == 0 {
            let watch = inotify_add_watch(descriptor, "/dev/snd", Self.changes)
            if watch >= 0 {
                interests[watch] = .cards
                watchesCards = true
            }
        }
        return any
    }

    /// Where cards and ALSA's configuration live for this process, and what matters in each.
    static func directories() -> [(String, Interest)] {
        // /dev itself only until /dev/snd exists, and only for snd appearing.
        var directories: [(String, Interest)] = [
            access("/dev/snd", F_OK) == 0 ? ("/dev/snd", .cards) : ("/dev", .names(["snd"])),
            ("/etc", .names(["asound.conf"])), ("/etc/alsa/conf.d", .everything), ("/usr/share/alsa/alsa.conf.d", .everything),
        ]
        if let home = RuntimePaths.environment("HOME") { directories.append((home, .names([".asoundrc", ".asoundrc.asoundconf"]))) }
        let configHome = RuntimePaths.environment("XDG_CONFIG_HOME") ?? RuntimePaths.environment("HOME").map { $0 + "/.config" }
        if let configHome { directories.append((configHome + "/alsa", .everything)) }
        if let paths = RuntimePaths.environment("ALSA_CONFIG_PATH") {
            for path in paths.split(separator: ":") {
                guard let slash = path.lastIndex(of: "/") else { continue }
                let directory = String(path[..<slash])
                directories.append((directory.isEmpty ? "/" : directory, .names([String(path[path.index(after: slash)...])])))
            }
        }
        var merged: [(String, Interest)] = []
        for (directory, interest) in directories {
            if let index = merged.firstIndex(where: { $0.0 == directory }) {
                merged[index].1 = merged[index].1.merged(with: interest)
            } else {
                merged.append((directory, interest))
            }
        }
        return merged
    }
}
