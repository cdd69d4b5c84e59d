#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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

    init() {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return }
        let changes = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ATTRIB)
        for directory in Self.directories() {
            _ = inotify_add_watch(descriptor, directory, changes | UInt32(IN_ONLYDIR))
        }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Reads what was reported; true when anything was. Watches on directories that appeared
    /// since (`/dev/snd` after the first card) are added.
    func drain() -> Bool {
        var any = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            any = true
        }
        if any, access("/dev/snd", F_OK) == 0 {
            _ = inotify_add_watch(descriptor, "/dev/snd", UInt32(IN_CREATE | IN_DELETE | IN_ATTRIB | IN_ONLYDIR))
        }
        return any
    }

    /// Where cards and ALSA's configuration live, for this process.
    static func directories() -> [String] {
        // /dev itself only until /dev/snd exists: it changes with every tty and disk.
        var directories = [access("/dev/snd", F_OK) == 0 ? "/dev/snd" : "/dev", "/etc", "/etc/alsa/conf.d", "/usr/share/alsa/alsa.conf.d"]
        if let home = RuntimePaths.environment("HOME") { directories.append(home) }
        let configHome = RuntimePaths.environment("XDG_CONFIG_HOME") ?? RuntimePaths.environment("HOME").map { $0 + "/.config" }
        if let configHome { directories.append(configHome + "/alsa") }
        if let paths = RuntimePaths.environment("ALSA_CONFIG_PATH") {
            for path in paths.split(separator: ":") {
                guard let slash = path.lastIndex(of: "/") else { continue }
                let directory = String(path[..<slash])
                directories.append(directory.isEmpty ? "/" : directory)
            }
        }
        var seen = Set<String>()
        return directories.filter { seen.insert($0).inserted }
    }
}
