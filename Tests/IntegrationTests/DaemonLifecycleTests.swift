import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("keepalived start, stop and status")
    struct DaemonLifecycleTests {
        let directory: URL
        let socketPath: String
        let binary = TestPaths.keepalivedBinary.path

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("life")
            socketPath = directory.appendingPathComponent("rt/control.sock").path
        }

        func keepalived(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await runCommand(binary, arguments + ["--socket", socketPath], environment: environment, timeout: .seconds(10))
        }

        func statusJSON() async throws -> (Int32, [String: Any]) {
            let result = try await keepalived(["status", "--json"])
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
            return (result.status, object)
        }

        @Test("start, status, a refused second start, stop, status, stop again")
        func fullCycle() async throws {
            let clock = ContinuousClock()
            var began = clock.now
            let started = try await keepalived(["start", "-d", "null"])
            #expect(started.status == 0, "\(started.stderr)")
            // `start` returns once it plays (docs/usage.md), with no time stated: a deadline that
            // means "it never returned", not how fast a start is (CONTRIBUTING, "What a test may
            // bound in time"; it was 2 s).
            #expect(began.duration(to: clock.now) < .seconds(10).underSanitizer)
            #expect(started.stdout.contains("null: playing"), "\(started.stdout)")

            let (status, object) = try await statusJSON()
            #expect(status == 0)
            #expect(object["state"] as? String == "playing")
            let pid = try #require(object["pid"] as? Int)
            let outputs = try #require(object["outputs"] as? [[String: Any]])
            #expect(outputs.first?["device"] as? String == "null")
            #expect(outputs.first?["state"] as? String == "playing")
            #expect(outputs.first?["recoveries"] as? Int == 0)
            #expect(outputs.first?["format"] as? String == "S16_LE")
            #expect(processIsAlive(pid))
            // Detached: its own session, stdin from /dev/null.
            #expect(getsid(pid_t(pid)) == pid_t(pid))
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/0")) == "/dev/null")
            let log = try #require(object["logFile"] as? String)
            try await waitUntil("the daemon's log to show it playing", timeout: .seconds(2)) {
                (try? FileContents.text(log))?.contains("playing") == true
            }

            let human = try await keepalived(["status"])
            #expect(human.status == 0)
            #expect(human.stdout.contains("pid \(pid)"))
            #expect(human.stdout.contains("output null: playing"))
            #expect(human.stdout.contains("S16_LE 44100 Hz 1 ch"))

            let second = try await keepalived(["start", "-d", "null"])
            #expect(second.status != 0)
            #expect(second.stderr.contains("already running (pid \(pid))"), "\(second.stderr)")

            began = clock.now
            let stopped = try await keepalived(["stop"])
            #expect(stopped.status == 0, "\(stopped.stderr)")
            // Requirement: `stop` waits at most 2 s, then SIGKILLs (docs/usage.md); the margin is
            // the sanitizer's stretch only, as SIGKILL would say it was missed.
            #expect(began.duration(to: clock.now) < .seconds(2).underSanitizer)
            #expect(!processIsAlive(pid))
            #expect(!FileManager.default.fileExists(atPath: socketPath))

            let (afterStatus, afterObject) = try await statusJSON()
            #expect(afterStatus == 3)
            #expect(afterObject["state"] as? String == "stopped")
            let again = try await keepalived(["stop"])
            #expect(again.status == 0)
            #expect(again.stdout.contains("not running"))
        }

        @Test("start --digital with no digital output returns 0 at once: waiting for an output is ready; status shows it; stop works")
        func startWaitingForSelection() async throws {
            let environment = ["HOME": try analogOnlyHome(in: directory).path]
            let began = ContinuousClock.now
            let started = try await keepalived(["start", "--digital"], environment: environment)
            #expect(started.status == 0, "\(started.stderr)")
            // Returns once it waits for its selection (docs/usage.md, no time stated): "it never
            // returned", not a speed (it was 2 s).
            #expect(began.duration(to: .now) < .seconds(10).underSanitizer)
            #expect(started.stdout.contains("waiting"), "\(started.stdout)")

            let result = try await keepalived(["status", "--json"], environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
            #expect(object["state"] as? String == "waiting", "\(result.stdout)")
            #expect(object["reason"] as? String == "no-device", "\(result.stdout)")
            #expect((object["outputs"] as? [Any])?.isEmpty == true, "\(result.stdout)")
            let pid = try #require(object["pid"] as? Int)

            let stopped = try await keepalived(["stop"], environment: environment)
            #expect(stopped.status == 0, "\(stopped.stderr)")
            #expect(!processIsAlive(pid))
        }

        @Test("status --json when not running: a socket path with quotes and backslashes reads back from valid JSON")
        func notRunningJSONEscapes() async throws {
            let path = directory.appendingPathComponent(#"odd "dir" \ name/control.sock"#).path
            let result = try await runCommand(binary, ["status", "--json", "--socket", path])
            #expect(result.status == 3, "\(result.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
            #expect(object["socket"] as? String == path)
            #expect(object["state"] as? String == "stopped")
            #expect((object["outputs"] as? [Any])?.isEmpty == true)
        }

        @Test("start with a bad WAV fails with 65 and leaves no daemon and no socket")
        func badClip() async throws {
            let result = try await keepalived(["start", "-d", "null", "--clip-base64", "UklGRgAAAABXQVZF"])
            #expect(result.status == 65, "\(result.stderr)")
            #expect(result.stderr.contains("no 'fmt ' chunk") || result.stderr.contains("RIFF"), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: socketPath))
            let (status, _) = try await statusJSON()
            #expect(status == 3)
            #expect(try await runCommand("pgrep", ["-f", socketPath]).status == 1)
        }

        @Test("start reports the daemon's own reason when it fails after launch")
        func daemonFailsAfterLaunch() async throws {
            // A socket path that cannot be created: the option check passes, the daemon fails.
            let blocked = directory.appendingPathComponent("file-not-dir")
            FileManager.default.createFile(atPath: blocked.path, contents: Data())
            let result = try await runCommand(binary, ["start", "-d", "null", "--socket", blocked.path + "/control.sock"], timeout: .seconds(10))
            #expect(result.status != 0)
            #expect(result.stderr.contains("runtime directory"), "\(result.stderr)")
        }

        @Test("a stale socket left by a killed daemon is replaced")
        func staleSocket() async throws {
            let first = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath], directory: directory, label: "first")
            try await first.waitForLog("playing")
            first.signal(SIGKILL)
            try await first.waitForExit(timeout: .seconds(2))
            #expect(FileManager.default.fileExists(atPath: socketPath))
            let (status, _) = try await statusJSON()
            #expect(status == 3)

            let second = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath], directory: directory, label: "second")
            try await second.waitForLog("playing")
            let (secondStatus, object) = try await statusJSON()
            #expect(secondStatus == 0)
            #expect(object["pid"] as? Int == Int(second.pid))

            let third = try await runCommand(binary, ["run", "-d", "null", "--socket", socketPath])
            #expect(third.status == 75)
            #expect(third.stderr.contains("already running (pid \(second.pid))"), "\(third.stderr)")
            #expect(try await second.terminate(within: .seconds(1)) == 0, "log:\n\(second.stderr)")
        }
    }
}

func processIsAlive(_ pid: Int) -> Bool {
    guard kill(pid_t(pid), 0) == 0,
          let stat = try? FileContents.text("/proc/\(pid)/stat"),
          let close = stat.lastIndex(of: ")") else { return false }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state != "Z" && state != "X"
}
