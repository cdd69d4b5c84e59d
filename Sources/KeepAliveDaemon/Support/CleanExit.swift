import ArgumentParser

/// An error whose message is printed as is before exiting with a chosen code (a ``SysExit``):
/// what an option, a hook's command line or a runtime path throws when the daemon cannot go on.
struct CleanExit: Error, CustomStringConvertible {
    let description: String
    let code: ExitCode

    static func failure(_ message: String, code: ExitCode) -> CleanExit {
        CleanExit(description: message, code: code)
    }
}
