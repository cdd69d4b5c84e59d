import Glibc

/// PipeWire without its PulseAudio server: WirePlumber owns every card, and nothing answers the
/// PulseAudio protocol through which keepalived reaches sound servers. Found by PipeWire's own
/// socket (`$PIPEWIRE_RUNTIME_DIR` or `$XDG_RUNTIME_DIR`, then `$PIPEWIRE_REMOTE` or
/// `pipewire-0`), so that an unreachable server says why and what to do, instead of leaving
/// every card alone with no word (a `pipewire` + `wireplumber` system without `pipewire-pulse`).
///
/// ```swift
/// let why = PipeWireWithoutPulse.explain("Connection refused", socket: PipeWireWithoutPulse.socket())
/// ```
enum PipeWireWithoutPulse {
    /// PipeWire's socket for this process when one exists and is a socket, else nil.
    static func socket(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) -> String? {
        let remote = environment("PIPEWIRE_REMOTE").flatMap { $0.isEmpty ? nil : $0 } ?? "pipewire-0"
        let path: String
        if remote.hasPrefix("/") {
            path = remote
        } else if let directory = environment("PIPEWIRE_RUNTIME_DIR") ?? environment("XDG_RUNTIME_DIR"), !directory.isEmpty {
            path = directory + "/" + remote
        } else {
            return nil
        }
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return path
    }

    /// Why no server answers: libpulse's `error`, and when PipeWire runs without its pulse
    /// server, that and what to do.
    static func explain(_ error: String, socket: String?) -> String {
        guard let socket else { return error }
        return "PipeWire runs (\(socket)) but no PulseAudio server answers (\(error)): pipewire-pulse is not running, "
            + "and keepalived reaches PipeWire's sinks through it; install and start it "
            + "(apt install pipewire-pulse; systemctl --user enable --now pipewire-pulse.socket), "
            + "or name an output with -d"
    }
}
