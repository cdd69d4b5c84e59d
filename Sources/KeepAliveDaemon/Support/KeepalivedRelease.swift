/// The one definition of keepalived's version: `--version` prints it, `--mqtt` publishes it (the
/// state's `version`, Home Assistant's `sw_version`), and `scripts/package` reads it from the
/// built binary to name and stamp the Debian package.
public enum KeepalivedRelease {
    public static let version = "0.2.0"
}
