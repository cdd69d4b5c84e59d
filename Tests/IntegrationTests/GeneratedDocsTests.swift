import Foundation
import Testing

extension Integration {
    /// What the packaging derives from the commands: the version, and the completion scripts
    /// committed under completions/ (scripts/generate-docs writes them, scripts/package ships them).
    /// The man page is compared by `scripts/generate-docs --check` in scripts/test: regenerating it
    /// runs a SwiftPM plugin, which cannot run inside `swift test` on the same build directory.
    @Suite("version and shell completions")
    struct GeneratedDocsTests {
        static let root = TestPaths.repositoryRoot

        @Test("--version prints the one version KeepalivedRelease.swift defines, and the changelog has its entry")
        func version() async throws {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["--version"])
            #expect(result.status == 0, "\(result.stderr)")
            let printed = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

            let source = try String(contentsOf: Self.root.appendingPathComponent("Sources/KeepAliveDaemon/Support/KeepalivedRelease.swift"), encoding: .utf8)
            let defined = try #require(source.firstMatch(of: /static let version = "([^"]+)"/)?.1)
            #expect(printed == String(defined))

            // scripts/package refuses a binary whose version has no changelog entry; this finds it first.
            let changelog = try String(contentsOf: Self.root.appendingPathComponent("packaging/debian/changelog"), encoding: .utf8)
            let logged = try #require(changelog.firstMatch(of: /^keepalived-audio \(([^)]+)\)/)?.1)
            #expect(String(logged) == printed, "packaging/debian/changelog's latest entry is \(logged)")
        }

        @Test("the committed completion script is what the built binary generates", arguments: [
            ("bash", "completions/keepalived.bash"), ("zsh", "completions/_keepalived"), ("fish", "completions/keepalived.fish"),
        ])
        func completion(shell: String, file: String) async throws {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["--generate-completion-script", shell])
            #expect(result.status == 0, "\(result.stderr)")
            let committed = try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
            #expect(result.stdout == committed, "\(file) is stale: run scripts/generate-docs and commit")
            #expect(result.stdout.contains("max-level"), "a \(shell) script that completes run's options")
        }
    }
}
