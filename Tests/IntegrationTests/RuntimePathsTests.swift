import Foundation
import TestSupport
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

        @Test("a service's RUNTIME_DIRECTORY comes first (the system unit's user has no XDG_RUNTIME_DIR)")
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

        func mode(_ path: String) -> mode_t {
            var info = stat()
            return stat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
        }

        func runUntilPlaying(_ arguments: [String], environment: [String: String], socket: String, directory: URL) async throws {
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", "null"] + arguments,
                                          environment: environment, directory: directory, label: "keepalived")
            try await daemon.waitForLog("playing")
            try await waitUntil("the control socket", timeout: .seconds(2)) { FileManager.default.fileExists(atPath: socket) }
            #expect(try await daemon.terminate(within: .seconds(3)) == 0, "\(daemon.stderr)")
        }

        @Test("--socket in an existing directory leaves that directory as it is (it once made /tmp 0700)")
        func chosenDirectoryUntouched() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("paths")
            let shared = directory.appendingPathComponent("shared")
            try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: false)
            chmod(shared.path, 0o1777)
            let socket = shared.appendingPathComponent("k.sock").path
            try await runUntilPlaying(["--socket", socket], environment: ["KEEPALIVED_SOCKET": ""], socket: socket, directory: directory)
            #expect(mode(shared.path) == 0o1777, "mode \(String(mode(shared.path), radix: 8))")
            let viaEnvironment = shared.appendingPathComponent("e.sock").path
            try await runUntilPlaying([], environment: ["KEEPALIVED_SOCKET": viaEnvironment], socket: viaEnvironment, directory: directory)
            #expect(mode(shared.path) == 0o1777, "mode \(String(mode(shared.path), radix: 8))")
        }

        @Test("keepalived's own default directory is created 0700, and closed if others could enter it")
        func defaultDirectoryEnforced() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("paths")
            let environment = ["KEEPALIVED_SOCKET": "", "RUNTIME_DIRECTORY": "", "XDG_RUNTIME_DIR": directory.path]
            let own = directory.appendingPathComponent("keepalived")
            let socket = own.appendingPathComponent("control.sock").path
            try await runUntilPlaying([], environment: environment, socket: socket, directory: directory)
            #expect(mode(own.path) == 0o700, "mode \(String(mode(own.path), radix: 8))")
            chmod(own.path, 0o755)
            try await runUntilPlaying([], environment: environment, socket: socket, directory: directory)
            #expect(mode(own.path) == 0o700, "mode \(String(mode(own.path), radix: 8))")
        }
    }
}
