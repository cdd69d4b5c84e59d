import Foundation
import Testing

extension Integration {
    /// Where the daemon puts its control socket, and where the shell commands look for it.
    @Suite("runtime paths")
    struct RuntimePathsTests {
        /// What `status --json` names as the socket when nothing runs there.
        func socketPath(_ environment: [String: String]) async throws -> String {
            let result = try await runCommand(TestPaths.keepalivedBinary.path, ["status", "--json"], environment: environment)
            #expect(result.status == 3, "not running: \(result.stdout) \(result.stderr)")
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            return try #require(object?["socket"] as? String, "\(result.stdout)")
        }

        @Test("a service's RUNTIME_DIRECTORY comes first (the system unit's dynamic user has no XDG_RUNTIME_DIR)")
        func serviceRuntimeDirectory() async throws {
            let path = try await socketPath(["RUNTIME_DIRECTORY": "/run/keepalived-audio", "XDG_RUNTIME_DIR": "/run/user/4242", "KEEPALIVED_SOCKET": ""])
            #expect(path == "/run/keepalived-audio/control.sock")
            let first = try await socketPath(["RUNTIME_DIRECTORY": "/run/a:/run/b", "KEEPALIVED_SOCKET": ""])
            #expect(first == "/run/a/control.sock", "systemd lists several RuntimeDirectory= entries with colons")
        }

        @Test("KEEPALIVED_SOCKET still wins over RUNTIME_DIRECTORY; a user session uses XDG_RUNTIME_DIR")
        func precedence() async throws {
            #expect(try await socketPath(["RUNTIME_DIRECTORY": "/run/x", "KEEPALIVED_SOCKET": "/tmp/k.sock"]) == "/tmp/k.sock")
            #expect(try await socketPath(["RUNTIME_DIRECTORY": "", "XDG_RUNTIME_DIR": "/run/user/4242", "KEEPALIVED_SOCKET": ""])
                    == "/run/user/4242/keepalived/control.sock")
        }
    }
}
