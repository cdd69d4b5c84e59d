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

    /// A fresh private directory for one test. A caller may remove it when done, with
    /// `removeTemporaryDirectory(_:)`; whatever is left is removed as the test process exits (a
    /// suite's `init` makes one per test and has no `deinit` to remove it: every run left about
    /// 100 in /tmp, 1.8 GB after a few dozen runs). A crashed test process leaves its
    /// directories, with the daemons' logs in them.
    static func makeTemporaryDirectory(_ label: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("keepalived-\(label)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        made.withLock { made in
            if made.isEmpty { atexit { TestPaths.removeMadeDirectories() } }
            made.append(url)
        }
        return url
    }

    /// Removes a test's directory and what libpulse made for it outside: given a HOME without
    /// XDG_RUNTIME_DIR, libpulse makes its runtime directory in /tmp and links it from
    /// HOME/.config/pulse/MACHINE-runtime. Removing the directory alone left that target (about
    /// 17 empty `/tmp/pulse-*` a full run, from suites that remove their directory early).
    static func removeTemporaryDirectory(_ url: URL) {
        let walker = FileManager.default.enumerator(atPath: url.path)
        while let path = walker?.nextObject() as? String {
            if path.hasSuffix("-runtime"), let target = try? FileManager.default.destinationOfSymbolicLink(atPath: url.appendingPathComponent(path).path),
               target.hasPrefix(FileManager.default.temporaryDirectory.path + "/pulse-") {
                try? FileManager.default.removeItem(atPath: target)
            }
        }
        try? FileManager.default.removeItem(at: url)
    }

    private static let made = TestLock<[URL]>([])

    private static func removeMadeDirectories() {
        for url in made.withLock({ $0 }) { removeTemporaryDirectory(url) }
    }
}
