import Foundation

/// Where the integration tests find what the package built and what the repository ships.
enum TestPaths {
    /// The repository root (this file lives in Tests/IntegrationTests/Support).
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The build products folder that holds the test bundle, and so the `keepalived` executable
    /// built with it (`swift build` before `swift test`, as the README's test command does).
    static let productsDirectory: URL = {
        if let override = ProcessInfo.processInfo.environment["KEEPALIVED_PRODUCTS"] {
            return URL(fileURLWithPath: override)
        }
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("keepalived").path) {
                return url
            }
        }
        return repositoryRoot.appendingPathComponent(".build/debug")
    }()

    /// The `keepalived` binary under test.
    static var keepalivedBinary: URL { productsDirectory.appendingPathComponent("keepalived") }

    /// A fresh private directory for one test; removed by the caller when done.
    static func makeTemporaryDirectory(_ label: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("keepalived-\(label)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
