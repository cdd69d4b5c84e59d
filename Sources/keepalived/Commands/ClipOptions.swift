import ArgumentParser
import KeepAlive

/// Where the clip comes from: a WAV file, base64 text, or the embedded clip.
///
/// ```swift
/// let clip = try ClipOptions.parse(["--clip", "/etc/keepalived-audio/tick.wav"]).load()
/// ```
struct ClipOptions: ParsableArguments {
    @Option(help: ArgumentHelp("WAV file to loop instead of the embedded clip.", valueName: "path"))
    var clip: String?

    @Option(name: .customLong("clip-base64"), help: ArgumentHelp("WAV file to loop, as base64 text.", valueName: "base64"))
    var clipBase64: String?

    func validate() throws {
        guard clip == nil || clipBase64 == nil else {
            throw ValidationError("--clip and --clip-base64 are mutually exclusive")
        }
    }

    /// The clip asked for, or nil for the embedded one. Exits 66 for a file that cannot be read,
    /// 65 for bytes that are not a usable WAV.
    func load() throws -> Clip? {
        do {
            if let clip { return try Clip(contentsOfFile: clip) }
            if let clipBase64 { return try Clip(base64: clipBase64) }
            return nil
        } catch {
            switch error {
            case .unreadableFile, .fileTooLarge:
                throw CleanExit.failure("clip: \(error)", code: SysExit.noInput)
            default:
                throw CleanExit.failure("clip: \(error)", code: SysExit.dataError)
            }
        }
    }
}
