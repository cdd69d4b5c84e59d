import Foundation
import TestSupport
import Testing

extension Integration {
    /// Sleep, lock and idle through logind, against a private dbus-daemon with the fake logind
    /// of Tests/Fixtures/fake-logind on it (the daemon finds it through DBUS_SYSTEM_BUS_ADDRESS).
    /// The real binary plays to ALSA's `null` device; its status and log are what is checked.
    @Suite("following logind")
    struct LogindTests {
        let directory: URL
        let socketPath: String
        let busAddress: String
        let binary = TestPaths.keepalivedBinary.path

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("logind")
            socketPath = directory.appendingPathComponent("control.sock").path
            busAddress = "unix:path=" + directory.appendingPathComponent("bus").path
        }

        /// A system-like bus: anyone may own names and send, as logind's policy allows its clients.
        func startBus() async throws -> ChildProcess {
            let config = directory.appendingPathComponent("bus.conf")
            try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>\(busAddress)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow own="*"/>
                <allow send_type="method_call"/><allow send_type="signal"/>
                <allow send_type="method_return"/><allow send_type="error"/>
                <allow receive_type="method_call"/><allow receive_type="signal"/>
                <allow receive_type="method_return"/><allow receive_type="error"/>
              </policy>
            </busconfig>
            """.write(to: config, atomically: true, encoding: .utf8)
            let bus = try ChildProcess("dbus-daemon", ["--config-file=\(config.path)", "--nofork", "--print-address"],
                                       directory: directory, label: "dbus-daemon")
            try await waitUntil("the bus socket", timeout: .seconds(5)) {
                FileManager.default.fileExists(atPath: directory.appendingPathComponent("bus").path)
            }
            return bus
        }

        /// The fake logind, fed commands through a FIFO this test keeps open.
        final class FakeLogind {
            let process: ChildProcess
            let commands: FileHandle

            init(directory: URL, busAddress: String, commandsFIFO: String = "logind.in") async throws {
                let fifo = directory.appendingPathComponent(commandsFIFO).path
                #expect(mkfifo(fifo, 0o600) == 0)
                let descriptor = open(fifo, O_RDWR)
                #expect(descriptor >= 0)
                commands = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
                let script = TestPaths.repositoryRoot.appendingPathComponent("Tests/Fixtures/fake-logind/fake-logind").path
                process = try ChildProcess(script, [], environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress],
                                           directory: directory, label: "fake-logind", stdin: fifo)
                try await waitUntil("the fake logind on the bus", timeout: .seconds(10)) { process.stdout.contains("ready") }
            }

            /// Sends one command and waits until the fake has acted on it.
            func send(_ command: String) async throws {
                let before = process.stdout.components(separatedBy: "emitted \(command)\n").count
                commands.write(Data("\(command)\n".utf8))
                try await waitUntil("the fake logind to do '\(command)'", timeout: .seconds(5)) {
                    process.stdout.components(separatedBy: "emitted \(command)\n").count > before
                }
            }

            var output: String { process.stdout }
        }

        /// The bus with the fake logind on it, for `body`; both stopped after it, logind first.
        func withLogind(_ body: (FakeLogind) async throws -> Void) async throws {
            let bus = try await startBus()
            defer { bus.signal(SIGTERM) }
            let logind = try await FakeLogind(directory: directory, busAddress: busAddress)
            defer { logind.process.signal(SIGTERM) }
            try await body(logind)
        }

        func startDaemon(_ extra: [String] = []) async throws -> ChildProcess {
            let daemon = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath] + extra,
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress], directory: directory, label: "keepalived")
            try await daemon.waitForLog("playing device=null")
            return daemon
        }

        func status() throws -> (state: String?, reason: String?, frames: Int) {
            let reply = try UnixClient(connectingTo: socketPath).request("status")
            let status = reply["status"] as? [String: Any]
            let output = (status?["outputs"] as? [[String: Any]])?.first
            return (status?["state"] as? String, status?["reason"] as? String, output?["framesPlayed"] as? Int ?? -1)
        }

        func count(_ text: String, in log: String) -> Int { log.components(separatedBy: text).count - 1 }

        @Test("before sleep every output closes and only then is the delay lock released; after resume it plays again under a new lock")
        func sleepAndResume() async throws {
            try await withLogind { logind in
                let daemon = try await startDaemon()
                defer { daemon.signal(SIGTERM) }
                try await waitUntil("a delay lock", timeout: .seconds(5)) { logind.output.contains("inhibit 1 sleep delay") }

                try await logind.send("sleep true")
                try await waitUntil("the lock released", timeout: .seconds(5)) { logind.output.contains("released 1") }
                // The daemon logs its output closed before it closes the lock: by now it must be there.
                #expect(daemon.stderr.contains("sleeping device=null"), "log:\n\(daemon.stderr)")
                #expect(count("paused reason=sleep", in: daemon.stderr) == 1, "logged once:\n\(daemon.stderr)")
                #expect(try status().state == "sleeping")
                let frames = try status().frames
                try await Task.sleep(for: .milliseconds(300))
                #expect(try status().frames == frames, "nothing is played while sleeping")

                try await logind.send("sleep false")
                try await waitUntil("a new lock", timeout: .seconds(5)) { logind.output.contains("inhibit 2 sleep delay") }
                try await waitUntil("playing again", timeout: .seconds(2)) { (try? status().state) == "playing" }
                #expect(count("resumed reason=sleep", in: daemon.stderr) == 1, "logged once:\n\(daemon.stderr)")
                // A clean exit: under a sanitizer, a report about the bus code fails it.
                #expect(try await daemon.terminate(within: .seconds(5)) == 0, "log:\n\(daemon.stderr)")
            }
        }

        @Test("--pause-when locked and idle: paused while the session is locked or idle for --idle-after, back at once when active")
        func lockAndIdle() async throws {
            try await withLogind { logind in
                let daemon = try await startDaemon(["--pause-when", "locked", "--pause-when", "idle", "--idle-after", "2s"])
                defer { daemon.signal(SIGTERM) }

                try await logind.send("locked true")
                try await waitUntil("paused for the lock", timeout: .seconds(5)) { (try? status()).map { $0.state == "paused" && $0.reason == "locked" } ?? false }
                try await logind.send("locked false")
                let unlocked = ContinuousClock.now
                // Playing again after the unlock: a wait for the state with a deadline that means "it
                // never came"; how fast is not a documented requirement (CONTRIBUTING, "What a test
                // may bound in time"; it was 1 s, unstretched).
                try await waitUntil("playing after unlock", timeout: .seconds(5)) { (try? status().state) == "playing" }
                #expect(unlocked.duration(to: .now) < Duration.seconds(5).underSanitizer)

                // Idle since now: --idle-after 2s must pass first.
                try await logind.send("idle true 0")
                let idle = ContinuousClock.now
                try await waitUntil("paused for idle", timeout: .seconds(5)) { (try? status()).map { $0.state == "paused" && $0.reason == "idle" } ?? false }
                #expect(idle.duration(to: .now) > .milliseconds(1500), "paused before --idle-after had passed")
                try await logind.send("idle false")
                try await waitUntil("playing when active again", timeout: .seconds(1)) { (try? status().state) == "playing" }

                // Reported idle long after it began: paused at once.
                try await logind.send("idle true 30")
                try await waitUntil("paused at once", timeout: .seconds(1)) { (try? status().reason) == "idle" }
                try await logind.send("idle false")
                try await waitUntil("playing again", timeout: .seconds(1)) { (try? status().state) == "playing" }
                #expect(count("paused reason=locked", in: daemon.stderr) == 1)
                #expect(count("paused reason=idle", in: daemon.stderr) == 2)
                #expect(try await daemon.terminate(within: .seconds(5)) == 0, "log:\n\(daemon.stderr)")
            }
        }

        @Test("without --pause-when a lock changes nothing; a reload that adds it pauses at once, one that drops it resumes")
        func lockIgnoredThenReloaded() async throws {
            try await withLogind { logind in
                let options = directory.appendingPathComponent("options")
                try "KEEPALIVED_OPTIONS=\"-d null\"\n".write(to: options, atomically: true, encoding: .utf8)
                let daemon = try ChildProcess(binary, ["run", "--config", options.path, "--socket", socketPath],
                                              environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress], directory: directory, label: "keepalived")
                defer { daemon.signal(SIGTERM) }
                try await daemon.waitForLog("playing")

                try await logind.send("locked true")
                // Sleep is handled after the lock (one bus, in order): once it has been slept and
                // resumed, the lock was seen, and ignored.
                try await logind.send("sleep true")
                try await waitUntil("the lock released", timeout: .seconds(5)) { logind.output.contains("released 1") }
                try await logind.send("sleep false")
                try await waitUntil("playing after resume", timeout: .seconds(2)) { (try? status().state) == "playing" }

                try "KEEPALIVED_OPTIONS=\"-d null --pause-when locked\"\n".write(to: options, atomically: true, encoding: .utf8)
                #expect(try UnixClient(connectingTo: socketPath).request("reload")["ok"] as? Bool == true)
                try await waitUntil("paused by the reloaded option", timeout: .seconds(1)) { (try? status().reason) == "locked" }
                try "KEEPALIVED_OPTIONS=\"-d null\"\n".write(to: options, atomically: true, encoding: .utf8)
                #expect(try UnixClient(connectingTo: socketPath).request("reload")["ok"] as? Bool == true)
                try await waitUntil("playing once the option is gone", timeout: .seconds(1)) { (try? status().state) == "playing" }
            }
        }

        @Test("a user service outside any session follows its user's display session; with none it says so and plays")
        func userDisplaySession() async throws {
            try await withLogind { logind in
                // GetSessionByPID refuses from now on, as for a `systemd --user` service.
                try await logind.send("nosession")
                let daemon = try await startDaemon(["--pause-when", "locked"])
                try await logind.send("locked true")
                try await waitUntil("paused for the display session's lock", timeout: .seconds(1)) { (try? status().reason) == "locked" }
                daemon.signal(SIGTERM)
                _ = try await daemon.waitForExit(timeout: .seconds(5))

                try await logind.send("nodisplay")
                let lost = try await startDaemon(["--pause-when", "locked"])
                defer { lost.signal(SIGTERM) }
                #expect(lost.stderr.contains("--pause-when locked has no session to follow: this process belongs to no login session"), "log:\n\(lost.stderr)")
                #expect(try status().state == "playing")
            }
        }

        @Test("a system bus that goes away: it plays on, reconnects, and follows a logind that comes back after the bus")
        func busRestart() async throws {
            var bus = try await startBus()
            defer { bus.signal(SIGTERM) }
            let first = try await FakeLogind(directory: directory, busAddress: busAddress)
            defer { first.process.signal(SIGTERM) }
            let daemon = try await startDaemon(["--pause-when", "locked"])
            defer { daemon.signal(SIGTERM) }
            try await waitUntil("a delay lock", timeout: .seconds(5)) { first.output.contains("inhibit 1 sleep delay") }
            try await first.send("locked true")
            try await waitUntil("paused while locked", timeout: .seconds(2)) { (try? status().reason) == "locked" }

            // What logind said no longer holds once it is out of reach: keeping awake is the safe side.
            bus.signal(SIGTERM)
            _ = try await bus.waitForExit(timeout: .seconds(5))
            first.process.signal(SIGTERM)
            try await daemon.waitForLog("lost the system bus")
            try await waitUntil("playing without the bus", timeout: .seconds(2)) { (try? status().state) == "playing" }

            // The bus first (the daemon reconnects 1 s after the loss), logind some time later.
            unlink(directory.appendingPathComponent("bus").path)
            bus = try await startBus()
            try await daemon.waitForLog("back on the system bus", timeout: .seconds(10))
            let second = try await FakeLogind(directory: directory, busAddress: busAddress, commandsFIFO: "logind2.in")
            defer { second.process.signal(SIGTERM) }
            try await waitUntil("a lock from the new logind", timeout: .seconds(5)) { second.output.contains("inhibit 1 sleep delay") }
            try await second.send("locked true")
            try await waitUntil("paused for the new logind's session", timeout: .seconds(2)) { (try? status().reason) == "locked" }
            try await second.send("sleep true")
            try await waitUntil("the new lock released before sleep", timeout: .seconds(5)) { second.output.contains("released 1") }
            #expect(try status().state == "sleeping")
            #expect(count("lost the system bus", in: daemon.stderr) == 1, "log:\n\(daemon.stderr)")
            #expect(try await daemon.terminate(within: .seconds(5)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("logind restarted on the same bus: a new lock from the new logind and its session followed, not a second lock")
        func logindRestart() async throws {
            try await withLogind { first in
                let daemon = try await startDaemon(["--pause-when", "locked"])
                defer { daemon.signal(SIGTERM) }
                try await waitUntil("a delay lock", timeout: .seconds(5)) { first.output.contains("inhibit 1 sleep delay") }
                first.process.signal(SIGTERM)
                _ = try await first.process.waitForExit(timeout: .seconds(5))

                let second = try await FakeLogind(directory: directory, busAddress: busAddress, commandsFIFO: "logind2.in")
                defer { second.process.signal(SIGTERM) }
                try await waitUntil("a lock from the new logind", timeout: .seconds(5)) { second.output.contains("inhibit 1 sleep delay") }
                try await second.send("locked true")
                try await waitUntil("paused for the new logind's session", timeout: .seconds(2)) { (try? status().reason) == "locked" }
                try await second.send("locked false")
                try await waitUntil("playing again", timeout: .seconds(2)) { (try? status().state) == "playing" }
                #expect(!second.output.contains("inhibit 2"), "one lock only:\n\(second.output)")
                #expect(!daemon.stderr.contains("lost the system bus"), "log:\n\(daemon.stderr)")
            }
        }

        @Test("without a system bus it plays as before, with no more than a debug line about logind; --pause-when says it cannot follow")
        func noBus() async throws {
            let daemon = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath],
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory.path)/nothing"],
                                          directory: directory, label: "keepalived")
            try await daemon.waitForLog("playing")
            #expect(!daemon.stderr.contains("logind"), "log:\n\(daemon.stderr)")
            #expect(try status().state == "playing")
            daemon.signal(SIGTERM)
            _ = try await daemon.waitForExit(timeout: .seconds(5))

            let asking = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath, "--pause-when", "idle"],
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory.path)/nothing"],
                                          directory: directory, label: "keepalived")
            defer { asking.signal(SIGTERM) }
            try await asking.waitForLog("playing")
            #expect(asking.stderr.contains("--pause-when idle has no session to follow: logind is not reachable"), "log:\n\(asking.stderr)")
        }

        @Test("bad --pause-when and --idle-after values exit 64 naming the option", arguments: [
            (["--pause-when", "asleep"], "--pause-when takes 'locked' or 'idle', not 'asleep'"),
            (["--pause-when", "idle", "--idle-after", "soon"], "--idle-after: 'soon' is not a duration"),
            (["--pause-when", "idle", "--idle-after", "0.5s"], "--idle-after must be at least 1s"),
            (["--idle-after", "5min"], "--idle-after goes with --pause-when idle"),
        ])
        func badOptions(arguments: [String], message: String) async throws {
            let daemon = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath] + arguments,
                                          directory: directory, label: "keepalived")
            #expect(try await daemon.waitForExit(timeout: .seconds(10)) == 64)
            #expect(daemon.stderr.contains(message), "stderr:\n\(daemon.stderr)")
        }
    }
}
