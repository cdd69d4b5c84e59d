import Glibc

/// Why a card this process cannot open looks missing, what really refuses it, and the fix.
///
/// alsa-lib finds cards by opening their control nodes; a node it may not open is skipped as if
/// the card were not there, so `default` fails with "no such device" on a box whose `/dev/snd`
/// is full of cards this process may not open. Three things refuse an open, and each has its
/// own fix, so the explanation names the one at work instead of a blanket "add the user to the
/// audio group" (which misleads the service user that already is in it):
///
/// - the file mode lets no one but root open the node (no udev rules: `root:root 0600`);
/// - the node is the `audio` group's and this process is not in that group;
/// - the mode and groups allow the open, yet the kernel refuses it (`EPERM`): the device filter
///   of the process's cgroup (a systemd unit's `DevicePolicy=`/`DeviceAllow=`, a container's
///   device rules) or a security module.
///
/// ```swift
/// if let denied = DeviceAccess.deniedExplanation() { print(denied) }
/// // permission denied (EACCES): /dev/snd/controlC0 is root:root 600, a mode that does not let uid 1000 …
/// ```
enum DeviceAccess {
    /// What refuses an open of a node whose owner, group and mode are known.
    enum Cause: Equatable {
        /// The mode grants no one but the owner (root) read and write access.
        case fileMode
        /// The node's group may open it, and this process is not in that group.
        case missingGroup
        /// The mode and groups allow the open: something outside the file system refuses it.
        case devicePolicy
    }

    /// A node's ownership and mode, and the identity of the process trying to open it.
    struct Attempt: Equatable {
        var owner: uid_t
        var group: gid_t
        var mode: mode_t
        var uid: uid_t
        var groups: [gid_t]

        /// What refuses this process a read-write open, by the file's own rules (what the kernel's
        /// permission check does before the device cgroup and security modules have their say).
        var cause: Cause {
            let readWrite: mode_t = 0o6
            if uid == 0 { return .devicePolicy }
            if owner == uid { return (mode >> 6) & readWrite == readWrite ? .devicePolicy : .fileMode }
            if groups.contains(group) { return (mode >> 3) & readWrite == readWrite ? .devicePolicy : .fileMode }
            if mode & readWrite == readWrite { return .devicePolicy }
            return (mode >> 3) & readWrite == readWrite ? .missingGroup : .fileMode
        }
    }

    /// The sound nodes in `directory` this process may not open for reading and writing, each
    /// with the error the kernel gave (`EACCES` from the file's permissions, `EPERM` from a
    /// device cgroup).
    static func inaccessibleNodes(in directory: String = "/dev/snd") -> [(path: String, error: Int32)] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var denied: [(path: String, error: Int32)] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.hasPrefix("control") || name.hasPrefix("pcm") else { continue }
            let path = directory + "/" + name
            // access(2) runs the same checks as open(2), the device cgroup's included.
            if access(path, R_OK | W_OK) != 0, errno == EACCES || errno == EPERM { denied.append((path, errno)) }
        }
        return denied.sorted { $0.path < $1.path }
    }

    /// A sentence naming a node this process cannot open, what refuses it and the fix; nil when
    /// every node is open to it (or there are none).
    static func deniedExplanation(in directory: String = "/dev/snd") -> String? {
        guard let (node, error) = inaccessibleNodes(in: directory).first else { return nil }
        var info = stat()
        guard stat(node, &info) == 0 else { return "\(errorName(error)): \(node) cannot be examined" }
        let attempt = Attempt(owner: info.st_uid, group: info.st_gid, mode: info.st_mode & 0o7777,
                              uid: geteuid(), groups: processGroups())
        return explanation(node: node, error: error, attempt: attempt, unit: systemdUnit())
    }

    /// The sentence for `attempt`; `unit` is the systemd unit the process runs in, if any.
    static func explanation(node: String, error: Int32, attempt: Attempt, unit: String?) -> String {
        let file = "\(node) is \(userName(attempt.owner)):\(groupName(attempt.group)) \(String(attempt.mode, radix: 8))"
        let user = "uid \(attempt.uid) (\(userName(attempt.uid)))"
        let groups = attempt.groups.map(groupName).joined(separator: ",")
        switch attempt.cause {
        case .fileMode:
            return "\(errorName(error)): \(file), a mode that does not let \(user) read and write it: install udev's "
                + "sound rules (udev gives /dev/snd to the audio group, mode 660), or change the node's mode"
        case .missingGroup:
            let group = groupName(attempt.group)
            return "\(errorName(error)): \(file) and \(user) is not in group \(group) (groups \(groups)): "
                + "add the user to it (usermod -aG \(group) \(userName(attempt.uid)), then log in again), "
                + "or SupplementaryGroups=\(group) in its unit"
        case .devicePolicy:
            let refuser: String
            if let unit {
                // systemd resolves DeviceAllow=char-alsa against /proc/devices when the unit
                // starts: the ALSA core registers the "alsa" major only once its module loads.
                refuser = "the device policy of the systemd unit \(unit) refuses it (DevicePolicy=, DeviceAllow=). "
                    + "systemd resolves DeviceAllow=char-alsa when the unit starts, so a unit started before the "
                    + "ALSA core module was loaded never gets a card: restart it (systemctl restart \(unit)), "
                    + "and order it after the module (Wants=modprobe@snd.service, After=modprobe@snd.service) as "
                    + "keepalived's own unit does"
            } else {
                refuser = "the device filter of this process's cgroup (a container's device rules) or a security "
                    + "module refuses it"
            }
            return "\(errorName(error)): \(file) and \(user), groups \(groups), may open it by its mode, but \(refuser)"
        }
    }

    /// The systemd unit this process runs in, from its cgroup (`0::/system.slice/NAME.service`);
    /// nil outside one.
    static func systemdUnit(cgroup path: String = "/proc/self/cgroup") -> String? {
        guard let file = fopen(path, "re") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line).split(separator: "\n").first.map(String.init) ?? ""
            guard text.hasPrefix("0::") else { continue }
            return unit(inCgroup: String(text.dropFirst(3)))
        }
        return nil
    }

    /// The innermost `.service` in a cgroup path; nil when there is none.
    static func unit(inCgroup path: String) -> String? {
        path.split(separator: "/").last { $0.hasSuffix(".service") }.map(String.init)
    }

    private static func errorName(_ error: Int32) -> String {
        error == EPERM ? "operation not permitted (EPERM)" : "permission denied (EACCES)"
    }

    private static func processGroups() -> [gid_t] {
        let count = getgroups(0, nil)
        guard count > 0 else { return [getegid()] }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = getgroups(count, &groups)
        var all = filled > 0 ? Array(groups.prefix(Int(filled))) : []
        if !all.contains(getegid()) { all.insert(getegid(), at: 0) }
        return all
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
