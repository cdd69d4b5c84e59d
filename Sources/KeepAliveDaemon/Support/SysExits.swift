import ArgumentParser

/// The sysexits.h codes keepalived uses, so scripts and systemd can tell failures apart.
enum SysExit {
    /// Bad option or option value.
    static let usage = ExitCode(64)
    /// The clip is not a usable WAV.
    static let dataError = ExitCode(65)
    /// The clip file cannot be read.
    static let noInput = ExitCode(66)
    /// EX_NOUSER: a user or group named on the command line does not exist (`--player-group`).
    static let noUser = ExitCode(67)
    /// EX_UNAVAILABLE: what was asked for cannot be reached (`test`: no output sounded).
    static let unavailable = ExitCode(69)
    /// An internal failure (e.g. the runtime refused a thread).
    static let software = ExitCode(70)
    /// Cannot create a needed file or socket.
    static let cannotCreate = ExitCode(73)
    /// EX_OSERR: the system refused something the daemon cannot run without (signalfd, poll).
    static let osError = ExitCode(71)
    /// A temporary failure; try again.
    static let tempFail = ExitCode(75)
}
