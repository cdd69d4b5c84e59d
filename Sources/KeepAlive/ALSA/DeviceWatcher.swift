import Glibc

/// Notices, through inotify, the moments a lost output may be back, so that a retry wait can end
/// at once instead of at the next backoff step:
///
/// - a sound card's nodes appearing in `/dev/snd` (created, or made accessible by udev);
///   when `/dev/snd` does not exist (no card at all, a container), `/dev` is watched for its
///   creation instead, and `/dev/snd` itself once it exists;
/// - a sound server's socket being created: PulseAudio's (`PULSE_SERVER` when it is a local path,
///   else `native` in `PULSE_RUNTIME_PATH` or `$XDG_RUNTIME_DIR/pulse`) and PipeWire's
///   (`PIPEWIRE_REMOTE`, default `pipewire-0`, in `PIPEWIRE_RUNTIME_DIR` or `$XDG_RUNTIME_DIR`).
///   A restarted server replaces its socket, so this is the moment it accepts clients again.
///
/// A directory that does not exist yet is replaced by a watch on its parent until it appears.
/// Without inotify (or with every path missing) ``descriptor`` is -1 and callers fall back to
/// their timer. Only the thread that owns it uses it (a playback thread; the daemon's main loop
/// has one of its own for the servers' sockets); it allocates only at init.
package final class DeviceWatcher {
    /// The inotify descriptor to poll for readability, or -1 when nothing can be watched.
    package private(set) var descriptor: Int32 = -1

    /// A directory whose entries matter: any entry (`names` nil) or only the given names.
    package struct Spot {
        package var directory: String
        package var names: [String]?
        package var kind: DeviceChanges

        package init(directory: String, names: [String]?, kind: DeviceChanges) {
            self.directory = directory
            self.names = names
            self.kind = kind
        }
    }

    private let spots: [Spot]
    /// Watch descriptor → watched directory.
    private var watched: [Int32: String] = [:]
    private let buffer: UnsafeMutableRawBufferPointer
    private static let bufferSize = 4096

    private static let insideMask = UInt32(IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR)
    private static let parentMask = UInt32(IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)

    /// Watches the default places: `/dev/snd` and the sound servers' sockets.
    package convenience init() {
        self.init(spots: Self.defaultSpots())
    }

    package init(spots: [Spot]) {
        self.spots = spots
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 8)
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if descriptor >= 0 { refresh() }
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
        buffer.deallocate()
    }

    /// The spots for `/dev/snd` and the PulseAudio and PipeWire sockets this process would use.
    package static func defaultSpots() -> [Spot] {
        var spots = [Spot(directory: "/dev/snd", names: nil, kind: .card)]
        let runtime = environment("XDG_RUNTIME_DIR")
        if let server = environment("PULSE_SERVER") {
            // A list of servers, each maybe "unix:PATH"; only local socket paths can be watched.
            for entry in server.split(separator: " ") {
                var path = Substring(entry)
                if path.hasPrefix("{") , let end = path.firstIndex(of: "}") { path = path[path.index(after: end)...] }
                if path.hasPrefix("unix:") { path = path.dropFirst(5) }
                if path.hasPrefix("/"), let split = split(String(path)) {
                    spots.append(Spot(directory: split.directory, names: [split.name], kind: .server))
                }
            }
        } else if let pulse = environment("PULSE_RUNTIME_PATH") ?? runtime.map({ $0 + "/pulse" }) {
            spots.append(Spot(directory: pulse, names: ["native"], kind: .server))
        }
        if let pipewire = environment("PIPEWIRE_RUNTIME_DIR") ?? runtime {
            let remote = environment("PIPEWIRE_REMOTE") ?? "pipewire-0"
            if remote.hasPrefix("/"), let split = split(remote) {
                spots.append(Spot(directory: split.directory, names: [split.name], kind: .server))
            } else {
                spots.append(Spot(directory: pipewire, names: [remote], kind: .server))
            }
        }
        return spots
    }

    /// Reads everything inotify reported since the last call and returns what appeared that
    /// could bring an output back: a card's node, a server's socket (a watched directory that
    /// appeared counts once it holds them). Never blocks; empty without inotify.
    package func take() -> DeviceChanges {
        guard descriptor >= 0 else { return [] }
        var seen: DeviceChanges = []
        var needsRefresh = false
        var appeared: [String] = []
        while true {
            let count = read(descriptor, buffer.baseAddress, Self.bufferSize)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            var offset = 0
            // struct inotify_event { int wd; uint32_t mask; uint32_t cookie; uint32_t len; char name[len]; }
            while offset + 16 <= count {
                let base = buffer.baseAddress! + offset
                let wd = base.loadUnaligned(as: Int32.self)
                let mask = base.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
                let length = Int(base.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
                let name = length > 0 ? String(cString: (base + 16).assumingMemoryBound(to: CChar.self)) : ""
                offset += 16 + length
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    seen.insert(.card)
                    needsRefresh = true
                    continue
                }
                if mask & UInt32(IN_IGNORED) != 0 {
                    // The directory went away (a card removed with the last node, a server's
                    // runtime directory deleted): watch its parent again.
                    watched[wd] = nil
                    needsRefresh = true
                    continue
                }
                guard let directory = watched[wd] else { continue }
                for spot in spots where spot.directory == directory && spot.names?.contains(name) ?? true { seen.insert(spot.kind) }
                let path = directory == "/" ? "/" + name : directory + "/" + name
                if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0, spots.contains(where: { $0.directory == path }) {
                    appeared.append(path)
                    needsRefresh = true
                }
            }
        }
        if needsRefresh { refresh() }
        // A directory that appeared matters only once it holds what the spot looks for (created
        // before its watch existed). An empty one does not: merely loading ALSA's configuration
        // runs Debian's PulseAudio hook, which creates $XDG_RUNTIME_DIR/pulse on every open.
        for directory in appeared {
            for spot in spots where spot.directory == directory && holds(spot) { seen.insert(spot.kind) }
        }
        return seen
    }

    private func holds(_ spot: Spot) -> Bool {
        if let names = spot.names {
            return names.contains { access(spot.directory + "/" + $0, F_OK) == 0 }
        }
        guard let stream = opendir(spot.directory) else { return false }
        defer { closedir(stream) }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { return true }
        }
        return false
    }

    /// Adds a watch for every spot: on its directory when it exists, else on the parent.
    private func refresh() {
        var masks: [String: UInt32] = [:]
        for spot in spots {
            if exists(spot.directory) {
                masks[spot.directory, default: 0] |= Self.insideMask
            } else if let parent = Self.split(spot.directory)?.directory {
                masks[parent, default: 0] |= Self.parentMask
            }
        }
        for (directory, mask) in masks.sorted(by: { $0.key < $1.key }) {
            // Adding an existing watch again replaces its mask and returns the same descriptor.
            let wd = inotify_add_watch(descriptor, directory, mask)
            if wd >= 0 { watched[wd] = directory }
        }
    }

    private func exists(_ directory: String) -> Bool {
        var info = stat()
        return stat(directory, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    private static func split(_ path: String) -> (directory: String, name: String)? {
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let directory = String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        guard !name.isEmpty else { return nil }
        return (directory.isEmpty ? "/" : directory, name)
    }

    private static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }
}
