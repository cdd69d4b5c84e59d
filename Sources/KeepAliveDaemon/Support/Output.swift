import Glibc

extension Duration {
    /// The duration in seconds, for reports and logs.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
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
