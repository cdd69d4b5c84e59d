import ArgumentParser

/// `--socket`, shared by every command that talks to the daemon.
struct SocketOption: ParsableArguments {
    @Option(name: .customLong("socket"), help: ArgumentHelp(
        "Control socket (default: $KEEPALIVED_SOCKET, else $XDG_RUNTIME_DIR/keepalived/control.sock, else /run/keepalived-audio/control.sock for root).",
        valueName: "path"))
    var path: String?

    var paths: RuntimePaths { RuntimePaths(socketOverride: path) }
}
