import ArgumentParser

/// How `run` and `test` read their options: the command's own words on this process's command
/// line, then the options file's, parsed as one command line, so that ArgumentParser alone
/// decides how they combine (a list adds up; of a single value, the file's wins).
///
/// ```swift
/// let merged = try CommandLineWithOptionsFile.parse(RunCommand.self, commandLine: words, file: "/etc/k.conf")
/// ```
enum CommandLineWithOptionsFile {
    /// The words after `subcommand` on the command line, none when it is not there.
    static func words(after subcommand: String, in arguments: [String]) -> [String] {
        let words = arguments.dropFirst()
        guard let index = words.firstIndex(of: subcommand) else { return [] }
        return Array(words[words.index(after: index)...])
    }

    /// `Command` parsed from `commandLine` followed by the options file's words.
    /// - Throws: `CleanExit` with EX_NOINPUT when the file cannot be read, EX_USAGE when the
    ///   words do not parse (the message names the file).
    static func parse<Command: ParsableCommand>(_ command: Command.Type, commandLine: [String], file path: String) throws -> Command {
        let words: [String]
        do { words = try OptionsFile.arguments(at: path) } catch {
            throw CleanExit.failure("\(error)", code: SysExit.noInput)
        }
        do {
            return try Command.parse(commandLine + words)
        } catch {
            throw CleanExit.failure("\(path): \(PlaybackOptions.message(for: error))", code: SysExit.usage)
        }
    }
}
