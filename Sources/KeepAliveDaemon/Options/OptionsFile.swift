import Glibc

/// The options file `keepalived run --config FILE` reads at start and again on reload.
///
/// It uses systemd's EnvironmentFile syntax, so one file serves both, and only the
/// `KEEPALIVED_OPTIONS` assignment matters:
///
///     # /etc/keepalived-audio/keepalived-audio.conf
///     KEEPALIVED_OPTIONS="--device hdmi:CARD=PCH,DEV=0 --volume -40dB"
///
/// Words are split at white space; single or double quotes keep a value with spaces together.
/// A missing file means no options, like systemd's `EnvironmentFile=-`.
enum OptionsFile {
    static let variable = "KEEPALIVED_OPTIONS"
    static let maximumSize = 64 * 1024

    enum Failure: Error, CustomStringConvertible {
        case unreadable(String, Errno)
        case tooLarge(String)
        case unbalancedQuote(String)

        var description: String {
            switch self {
            case .unreadable(let path, let error): "cannot read options file \(path): \(error)"
            case .tooLarge(let path): "options file \(path) is larger than 64 KiB"
            case .unbalancedQuote(let path): "options file \(path): unbalanced quote in \(OptionsFile.variable)"
            }
        }
    }

    /// The option words in `path`, or none when it does not exist.
    static func arguments(at path: String) throws(Failure) -> [String] {
        guard let file = fopen(path, "re") else {
            if errno == ENOENT { return [] }
            throw .unreadable(path, Errno(errno))
        }
        defer { fclose(file) }
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count == 0 { break }
            text += buffer[0..<count]
            if text.count > maximumSize { throw .tooLarge(path) }
        }
        var value: String?
        for rawLine in String(decoding: text, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true) {
            let line = rawLine.drop { $0 == " " || $0 == "\t" }
            guard !line.hasPrefix("#"), !line.hasPrefix(";"), let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: " \t")
            if key == variable || key == "export \(variable)" { value = String(line[line.index(after: equals)...]) }
        }
        guard var value else { return [] }
        // EnvironmentFile strips one pair of quotes around the whole value; the words inside
        // are then split, as `$KEEPALIVED_OPTIONS` would be.
        value = value.trimmingCharacters(in: " \t\r")
        if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
            value = String(value.dropFirst().dropLast())
        }
        guard let words = ShellWords.split(value) else { throw .unbalancedQuote(path) }
        return words
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        var slice = self[...]
        while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}
