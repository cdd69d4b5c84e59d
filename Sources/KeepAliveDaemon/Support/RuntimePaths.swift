import Glibc

/// Where the daemon keeps its control socket and log.
///
/// `--socket` or `KEEPALIVED_SOCKET` win; otherwise the runtime directory systemd made for the
/// service (`$RUNTIME_DIRECTORY`, from `RuntimeDirectory=`: the system unit's
/// `/run/keepalived-audio`, whose system user has no `XDG_RUNTIME_DIR`), then
/// `$XDG_RUNTIME_DIR/keepalived/control.sock`, then `/run/keepalived-audio/control.sock` for root
/// (so `sudo keepalived status` finds the system service; the system-wide name avoids the VRRP
/// keepalived's files), and `/tmp/keepalived-UID/control.sock` as a last resort for a user
/// without a runtime directory.
struct RuntimePaths {
    let socket: String
    /// Whether the socket's directory is keepalived's own default, whose owner and mode it
    /// enforces. A directory named with `--socket`/`KEEPALIVED_SOCKET`, or made by systemd, is
    /// someone else's choice: used as it is and never changed (`--socket /tmp/k.sock` run as
    /// root once made /tmp 0700 for everybody).
    let ownsDirectory: Bool

    init(socketOverride: String?) {
        ownsDirectory = (socketOverride ?? "").isEmpty && Self.environment("KEEPALIVED_SOCKET") == nil
            && Self.environment("RUNTIME_DIRECTORY") == nil
        if let socketOverride, !socketOverride.isEmpty {
            socket = socketOverride
        } else if let fromEnvironment = Self.environment("KEEPALIVED_SOCKET") {
            socket = fromEnvironment
        } else if let service = Self.environment("RUNTIME_DIRECTORY") {
            // systemd lists one directory per RuntimeDirectory= entry, separated by colons.
            socket = String(service.split(separator: ":").first ?? Substring(service)) + "/control.sock"
        } else if let runtime = Self.environment("XDG_RUNTIME_DIR") {
            socket = runtime + "/keepalived/control.sock"
        } else if getuid() == 0 {
            socket = "/run/keepalived-audio/control.sock"
        } else {
            socket = "/tmp/keepalived-\(getuid())/control.sock"
        }
    }

    /// The directory holding the socket (and the log of a daemon started with `start`).
    var directory: String {
        guard let slash = socket.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        let prefix = String(socket[..<slash])
        return prefix.isEmpty ? "/" : prefix
    }

    /// The log file of a daemon that `keepalived start` detached.
    var logFile: String { directory + "/keepalived.log" }

    /// Creates the socket's directory with mode 0700 if missing. An existing default directory
    /// (``ownsDirectory``) that another user owns is refused and one that others can enter is
    /// closed; any other existing directory is left exactly as it is (the socket itself is 0600
    /// and every peer's uid is checked).
    func prepareDirectory() throws(Errno) {
        if mkdir(directory, 0o700) == 0 { return }
        guard errno == EEXIST else { throw Errno(errno) }
        var info = stat()
        guard stat(directory, &info) == 0 else { throw Errno(errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw Errno(ENOTDIR) }
        guard ownsDirectory else { return }
        guard info.st_uid == geteuid() else { throw Errno(EPERM) }
        if info.st_mode & 0o077 != 0, chmod(directory, 0o700) != 0 { throw Errno(errno) }
    }

    static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }
}
