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
        line += "\(event.message)"
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for key in merged.keys.sorted() {
            line += " \(key)=\(merged[key]!)"
        }
        line += "\n"
        // One write per line: lines from several threads never interleave.
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
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
