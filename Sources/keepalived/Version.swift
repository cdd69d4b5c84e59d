extension Keepalived {
    /// The one definition of keepalived's version: `--version` prints it, and `scripts/package`
    /// reads it from the built binary to name and stamp the Debian package.
    static let version = "0.2.0"
}
