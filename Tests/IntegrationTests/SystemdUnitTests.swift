import Foundation
import Testing

extension Integration {
    @Suite("systemd units", .enabled(if: FileManager.default.isExecutableFile(atPath: ChildProcess.which("systemd-analyze"))))
    struct SystemdUnitTests {
        let directory: URL

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("units")
            chmod(directory.path, 0o700)
        }

        /// A copy of `unit` whose ExecStart runs the binary this suite built.
        func copy(_ unit: String) throws -> URL {
            let source = TestPaths.repositoryRoot.appendingPathComponent("systemd/\(unit)")
            let text = try String(contentsOf: source, encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin/keepalived", with: TestPaths.keepalivedBinary.path)
            let target = directory.appendingPathComponent(URL(fileURLWithPath: unit).lastPathComponent)
            try text.write(to: target, atomically: true, encoding: .utf8)
            return target
        }

        @Test("systemd-analyze verify passes on the system unit")
        func verifySystemUnit() async throws {
            let unit = try copy("keepalived-audio.service")
            let result = try await runCommand("systemd-analyze", ["verify", "--man=no", unit.path], timeout: .seconds(60))
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            #expect(!result.stderr.contains("keepalived-audio.service:"), "\(result.stderr)")
        }

        @Test("systemd-analyze verify passes on the user unit")
        func verifyUserUnit() async throws {
            let unit = try copy("user/keepalived.service")
            let runtime = directory.appendingPathComponent("xdg")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let result = try await runCommand("systemd-analyze", ["--user", "verify", "--man=no", unit.path],
                                              environment: ["XDG_RUNTIME_DIR": runtime.path], timeout: .seconds(60))
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            #expect(!result.stderr.contains("keepalived.service:"), "\(result.stderr)")
        }

        @Test("systemd-analyze security rates the system unit 1.0 or lower")
        func securityExposure() async throws {
            let unit = try copy("keepalived-audio.service")
            let result = try await runCommand("systemd-analyze", ["security", "--offline=true", "--no-pager", unit.path], timeout: .seconds(60))
            let line = try #require(result.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") }, "\(result.stdout)\(result.stderr)")
            let number = line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) }
            let exposure = try #require(number, "\(line)")
            #expect(exposure <= 1.0, "\(line)")
        }

        @Test("the system unit is a notify service that reloads, restarts on failure and stays in the audio group")
        func unitContents() throws {
            let text = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("systemd/keepalived-audio.service"), encoding: .utf8)
            for directive in ["Type=notify", "Restart=on-failure", "WatchdogSec=", "SupplementaryGroups=audio", "DevicePolicy=closed",
                              "DeviceAllow=char-alsa", "ExecReload=", "RuntimeDirectory=keepalived-audio", "--config /etc/keepalived-audio/keepalived-audio.conf"] {
                #expect(text.contains(directive), "missing \(directive)")
            }
            let user = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("systemd/user/keepalived.service"), encoding: .utf8)
            #expect(user.contains("After=pipewire.service") || user.contains("pipewire.service"))
            #expect(user.contains("pulseaudio.service"))
        }
    }
}
