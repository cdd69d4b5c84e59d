import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("systemd notify protocol and journal logging")
    struct SystemdNotifyTests {
        let directory: URL
        let binary = TestPaths.keepalivedBinary.path

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("notify")
        }

        func launch(_ arguments: [String], listener: NotifyListener, watchdogMicroseconds: Int? = nil,
                    environment extra: [String: String] = [:]) throws -> ChildProcess {
            var environment = extra.merging(["NOTIFY_SOCKET": listener.path]) { $1 }
            if let watchdogMicroseconds { environment["WATCHDOG_USEC"] = "\(watchdogMicroseconds)" }
            return try ChildProcess(binary, arguments + ["--socket", directory.appendingPathComponent("rt-\(UUID().uuidString.prefix(4))/control.sock").path],
                                    environment: environment, directory: directory, label: "keepalived")
        }

        @Test("READY=1 within 1 s, STATUS= with the state, WATCHDOG=1 at half WATCHDOG_USEC, STOPPING=1 on SIGTERM")
        func readyWatchdogStopping() async throws {
            let listener = try NotifyListener(path: directory.appendingPathComponent("notify.sock").path)
            let daemon = try launch(["run", "-d", "null"], listener: listener, watchdogMicroseconds: 400_000)
            // READY=1 comes once the output plays; how soon is not a documented requirement, so a
            // deadline that means "it never came" (CONTRIBUTING, "What a test may bound in time").
            let ready = try await waitUntil("READY=1", timeout: .seconds(5)) { listener.assignments.contains { $0.line == "READY=1" } }
            #expect(ready < .seconds(5).underSanitizer)
            let statuses = listener.assignments.filter { $0.line.hasPrefix("STATUS=") }.map(\.line)
            #expect(statuses.last == "STATUS=playing on null", "\(statuses)")
            #expect(Set(statuses).isSubset(of: ["STATUS=starting on null", "STATUS=playing on null"]), "\(statuses)")

            // Pings every 200 ms: count them over a window of at least 1 s.
            try await waitUntil("six watchdog pings", timeout: .seconds(3)) {
                listener.assignments.filter { $0.line == "WATCHDOG=1" }.count >= 6
            }
            let pings = listener.assignments.filter { $0.line == "WATCHDOG=1" }.map(\.at)
            let intervals = zip(pings.dropFirst(), pings).map { $0.0 - $0.1 }
            // The pace, not each ping: the median interval is half WATCHDOG_USEC (200 ms). A single
            // interval is one wakeup of a scheduler a busy machine may delay (and then the next is
            // short); the median of the run is what a wrong pace would move.
            let sorted = intervals.dropFirst().sorted()
            let median = sorted[sorted.count / 2]
            #expect(median > .milliseconds(120) && median < .milliseconds(400).underSanitizer, "ping intervals \(intervals)")

            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
            #expect(listener.assignments.contains { $0.line == "STOPPING=1" })
        }

        @Test("WATCHDOG=1 stops while the playback thread is wedged in a driver, and resumes when it returns")
        func watchdogFollowsPlaybackHealth() async throws {
            let device = try FaultyDevice()
            let listener = try NotifyListener(path: device.directory.appendingPathComponent("notify.sock").path)
            // A 0.2 s buffer: the thread reports at least every 50 ms while healthy, so it counts as
            // wedged 1.2 s after its last report (buffer or retry cap, plus a second).
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", "faulty", "--buffer", "0.2", "--retry-max", "0.2"],
                                          environment: device.environment.merging(["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "200000"]) { $1 },
                                          directory: device.directory, label: "keepalived")
            try await waitUntil("READY=1", timeout: .seconds(2)) { listener.assignments.contains { $0.line == "READY=1" } }
            try await waitUntil("watchdog pings", timeout: .seconds(2)) { listener.assignments.filter { $0.line == "WATCHDOG=1" }.count >= 3 }

            try device.control("hang")
            try await waitUntil("the plug-in to hang a write", timeout: .seconds(3)) { device.eventCount("hung") > 0 }
            let hungAt = ContinuousClock.now
            // Pings stop once the last report is older than 1.2 s; allow two ping intervals more.
            try await waitUntil("the pings to stop", timeout: .seconds(3)) {
                guard let last = listener.assignments.last(where: { $0.line == "WATCHDOG=1" })?.at else { return false }
                return last.duration(to: .now) > .milliseconds(600)
            }
            let lastPing = try #require(listener.assignments.last { $0.line == "WATCHDOG=1" }?.at)
            #expect(hungAt.duration(to: lastPing) < .milliseconds(1600).underSanitizer, "pinged \(hungAt.duration(to: lastPing)) after the hang")
            #expect(daemon.isRunning)
            #expect(daemon.stderr.contains("withholding the watchdog ping"))

            try FileManager.default.removeItem(at: device.stateDirectory("faulty").appendingPathComponent("hang"))
            let released = listener.assignments.count
            try await waitUntil("pings to resume", timeout: .seconds(3)) {
                listener.assignments.dropFirst(released).contains { $0.line == "WATCHDOG=1" }
            }
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("STATUS= follows the state: waiting for a device that does not exist")
        func statusWhileWaiting() async throws {
            let listener = try NotifyListener(path: directory.appendingPathComponent("notify2.sock").path)
            let daemon = try launch(["run", "-d", "hw:CARD=NoSuchCard,DEV=0"], listener: listener)
            try await waitUntil("READY=1 while waiting", timeout: .seconds(1)) { listener.assignments.contains { $0.line == "READY=1" } }
            #expect(listener.assignments.contains { $0.line == "STATUS=waiting for device (no-device) on hw:CARD=NoSuchCard,DEV=0" },
                    "\(listener.assignments.map(\.line))")
            #expect(!listener.assignments.contains { $0.line == "WATCHDOG=1" }, "pinged without WATCHDOG_USEC")
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("--digital with no digital output: stays up, READY=1, STATUS= names the wait and the selection")
        func selectionFindsNothing() async throws {
            let home = try analogOnlyHome(in: directory)
            let listener = try NotifyListener(path: directory.appendingPathComponent("notify3.sock").path)
            let daemon = try launch(["run", "--digital"], listener: listener, environment: ["HOME": home.path])
            try await waitUntil("READY=1 while waiting for an output", timeout: .seconds(2)) {
                listener.assignments.contains { $0.line == "READY=1" } || !daemon.isRunning
            }
            #expect(daemon.isRunning, "exited with \(daemon.terminationStatus ?? -1); log:\n\(daemon.stderr)")
            #expect(listener.assignments.contains { $0.line == "READY=1" })
            #expect(listener.assignments.contains { $0.line == "STATUS=waiting for device (no-device): no digital output yet" },
                    "\(listener.assignments.map(\.line))")
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("under the journal, lines carry syslog priorities and no timestamp")
        func journalPriorities() async throws {
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:CARD=NoSuchCard,DEV=0", "--socket", directory.appendingPathComponent("rt-j/control.sock").path],
                                          environment: ["JOURNAL_STREAM": "8:12345"], directory: directory, label: "keepalived")
            try await daemon.waitForLog("waiting for device")
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
            let lines = daemon.stderr.split(separator: "\n")
            #expect(lines.contains { $0.hasPrefix("<6>starting") }, "\(daemon.stderr)")
            #expect(lines.contains { $0.hasPrefix("<4>waiting for device (no-device)") }, "\(daemon.stderr)")
            #expect(lines.allSatisfy { $0.hasPrefix("<") && !$0.contains("T00:") && !$0.contains("Z info") }, "\(daemon.stderr)")
        }
    }
}

/// A private HOME whose ALSA configuration adds one hinted PCM, an analog one: with it, the test
/// machine (which has no digital output) offers `--digital` nothing to pick.
func analogOnlyHome(in directory: URL) throws -> URL {
    let home = directory.appendingPathComponent("home-analog")
    try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
    let config = "pcm.test-speakers { type null hint { show on description \"Test Card, Analog\\nFront speakers\" } }\n"
    try config.write(to: home.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
    return home
}
