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
            let unit = try UnitFile(TestPaths.repositoryRoot.appendingPathComponent("systemd/keepalived-audio.service"))
            #expect(unit["Service", "Type"] == ["notify"])
            #expect(unit["Service", "Restart"] == ["on-failure"])
            #expect(unit["Service", "WatchdogSec"].count == 1)
            // audio as the service's own group: its control socket is then the players' without a chown.
            #expect(unit["Service", "Group"] == ["audio"])
            #expect(unit["Service", "DevicePolicy"] == ["closed"])
            #expect(unit["Service", "DeviceAllow"].contains { $0.hasPrefix("char-alsa") }, "\(unit["Service", "DeviceAllow"])")
            #expect(unit["Service", "ExecReload"].count == 1)
            // /bin/kill is procps's, absent from a minimal Debian: the reload must use the shell's kill.
            for reload in unit["Service", "ExecReload"] {
                #expect(reload.hasPrefix("/bin/sh -c ") && reload.contains("kill -HUP") && !reload.contains("/bin/kill"), "\(reload)")
            }
            #expect(unit["Service", "RuntimeDirectory"] == ["keepalived-audio"])
            let start = try #require(unit["Service", "ExecStart"].first)
            #expect(start.contains(" run ") && start.contains("--config /etc/keepalived-audio/keepalived-audio.conf"), "\(start)")
            // Players in group audio reach the socket for their release, and only for it.
            #expect(start.contains("--player-group audio"), "\(start)")
            #expect(unit["Service", "RuntimeDirectoryMode"] == ["0755"])

            let user = try UnitFile(TestPaths.repositoryRoot.appendingPathComponent("systemd/user/keepalived.service"))
            let after = Set(user["Unit", "After"].flatMap { $0.split(separator: " ").map(String.init) })
            #expect(after.isSuperset(of: ["pipewire.service", "pulseaudio.service"]), "\(after)")
            #expect(user["Service", "Type"] == ["notify"])
            #expect(user["Service", "ExecReload"].count == 1, "the daemon rereads its options file on reload")
            #expect(user["Service", "ExecReload"] == unit["Service", "ExecReload"], "\(user["Service", "ExecReload"])")
        }
    }
}

/// A systemd unit file's directives by section, in order, without comments: what systemd reads.
struct UnitFile {
    private var values: [String: [String: [String]]] = [:]

    init(_ url: URL) throws {
        var section = ""
        var pending = ""
        for rawLine in try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
            var line = pending + rawLine.trimmingCharacters(in: .whitespaces)
            pending = ""
            if line.hasPrefix("#") || line.hasPrefix(";") || line.isEmpty { continue }
            if line.hasSuffix("\\") {
                line.removeLast()
                pending = line + " "
                continue
            }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast())
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            values[section, default: [:]][key, default: []].append(value)
        }
    }

    /// Every value of `key` in `section`, in order (a directive may be repeated).
    subscript(section: String, key: String) -> [String] { values[section]?[key] ?? [] }
}
