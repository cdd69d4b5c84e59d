import Logging
import Glibc

/// Writes one line per log record to stderr.
///
/// Under systemd (`JOURNAL_STREAM` set) each line starts with its syslog priority (`<3>` … `<7>`)
/// and carries no timestamp, since the journal stamps lines itself; elsewhere lines carry a UTC
/// timestamp and the level's name.
struct DaemonLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level
    let journal: Bool

    init(label: String, level: Logger.Level, journal: Bool) {
        self.logLevel = level
        self.journal = journal
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var line = journal ? "<\(Self.syslogPriority(event.level))>" : "\(Self.timestamp()) \(event.level): "
        line += Self.escaped("\(event.message)")
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for key in merged.keys.sorted() {
            line += " \(key)=\(Self.field("\(merged[key]!)"))"
        }
        line += "\n"
        // One write per line: lines from several threads never interleave.
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }

    /// `text` with every control character written out (`\n`, `\t`, `\x1b`…): a record is
    /// one line whatever it carries. Names come from other programs (a sound server's clients
    /// name their streams as they like), and a newline followed by `<2>` would otherwise make
    /// a journal entry of its own, at the priority it names.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where isControl(scalar):
                let digits = Array("0123456789abcdef")
                result += "\\x" + String(digits[Int(scalar.value >> 4) & 0xF]) + String(digits[Int(scalar.value & 0xF)])
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// A field's value as the line carries it: escaped, and quoted (`"` and `\\` escaped
    /// inside) when a reader could take part of it for a field of its own: a word after a space
    /// that starts `key=` (a name another program chose, `mpd device=hw:1,0`), a quote, or
    /// nothing at all. Other values stay as they were (`device=hdmi:CARD=PCH,DEV=0`,
    /// `error=open: No such file or directory (ENOENT)`).
    static func field(_ value: String) -> String {
        let text = escaped(value)
        guard text.isEmpty || text.contains("\"") || forgesField(text) else { return text }
        var quoted = "\""
        for character in text {
            if character == "\\" || character == "\"" { quoted.append("\\") }
            quoted.append(character)
        }
        return quoted + "\""
    }

    /// Whether a word after a space in `text` reads as `key=`: letters, digits, `_` or `-`, then `=`.
    private static func forgesField(_ text: String) -> Bool {
        for word in text.split(separator: " ").dropFirst() {
            guard let equals = word.firstIndex(of: "="), equals != word.startIndex else { continue }
            if word[..<equals].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) { return true }
        }
        return false
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}"
    }

    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .critical: 2
        case .error: 3
        case .warning: 4
        case .notice: 5
        case .info: 6
        case .debug, .trace: 7
        }
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let millis = Int(now.tv_nsec / 1_000_000)
        let fraction = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) + ".\(fraction)Z"
    }

    /// Installs the handler for the whole process.
    static func bootstrap(verbose: Bool) {
        let journal = getenv("JOURNAL_STREAM") != nil
        LoggingSystem.bootstrap { label in
            DaemonLogHandler(label: label, level: verbose ? .debug : .info, journal: journal)
        }
    }
}
