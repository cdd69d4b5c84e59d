#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a card this process cannot open looks missing, and what to do about it.
///
/// alsa-lib finds cards by opening their control nodes; a node it may not open is skipped as if
/// the card were not there, so `default` fails with "no such device" on a box whose `/dev/snd`
/// is full of cards that are merely `root:root 0600` (no udev rules, a user outside the `audio`
/// group, a unit without `SupplementaryGroups=audio`). This looks at `/dev/snd` itself.
///
/// ```swift
/// if let denied = DeviceAccess.deniedExplanation() { print(denied) }
/// // permission denied (EACCES): /dev/snd/controlC0 is root:root 0600 …
/// ```
enum DeviceAccess {
    /// The sound nodes in `directory` this process may not open for reading and writing.
    static func inaccessibleNodes(in directory: String = "/dev/snd") -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var denied: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.hasPrefix("control") || name.hasPrefix("pcm") else { continue }
            let path = directory + "/" + name
            if access(path, R_OK | W_OK) != 0, errno == EACCES || errno == EPERM { denied.append(path) }
        }
        return denied.sorted()
    }

    /// A sentence naming a node this process cannot open, its owner and mode, this process's
    /// user and groups, and the fixes; nil when every node is open to it (or there are none).
    static func deniedExplanation(in directory: String = "/dev/snd") -> String? {
        guard let node = inaccessibleNodes(in: directory).first else { return nil }
        var info = stat()
        let owner = stat(node, &info) == 0
            ? "\(userName(info.st_uid)):\(groupName(info.st_gid)) \(String(info.st_mode & 0o777, radix: 8))"
            : "not accessible"
        let groups = supplementaryGroups().map(groupName).joined(separator: ",")
        return "permission denied (EACCES): \(node) is \(owner) and this process runs as uid \(getuid()) (\(userName(getuid()))), "
            + "groups \(groups.isEmpty ? groupName(getgid()) : groups); add the user to the audio group, "
            + "or SupplementaryGroups=audio in its unit, or install udev's sound rules (udev gives /dev/snd to the audio group)"
    }

    private static func supplementaryGroups() -> [gid_t] {
        let count = getgroups(0, nil)
        guard count > 0 else { return [getgid()] }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = getgroups(count, &groups)
        return filled > 0 ? Array(groups.prefix(Int(filled))) : [getgid()]
    }

    private static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "\(uid)" }
        return String(cString: name)
    }

    private static func groupName(_ gid: gid_t) -> String {
        guard let entry = getgrgid(gid), let name = entry.pointee.gr_name else { return "\(gid)" }
        return String(cString: name)
    }
}
