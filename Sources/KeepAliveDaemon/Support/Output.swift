import Glibc

extension Duration {
    /// `10 min`, `90 s`, `1 h 30 min`: an option's duration as the log says it (`--linger`,
    /// `--on-idle-after`), rounded to whole seconds.
    var spoken: String {
        let seconds = Int(self.seconds.rounded())
        switch seconds {
        case ..<120 where seconds % 60 != 0 || seconds < 60: return "\(seconds) s"
        case ..<3600: return seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds / 60) min \(seconds % 60) s"
        default: return seconds % 3600 == 0 ? "\(seconds / 3600) h" : "\(seconds / 3600) h \(seconds / 60 % 60) min"
        }
    }
}

package func printError(_ message: String) {
    // One write per line: lines from several threads never interleave.
    var bytes = Array((message + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}

package func printOutput(_ message: String) {
    var bytes = Array((message + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}
