import Logging

extension Logger {
    /// A logger that drops every line: for a subject whose log the test does not read.
    public static let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
}
