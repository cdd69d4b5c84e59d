import Foundation
import Testing

extension Integration {
    @Suite("systemd notify protocol and journal logging")
    struct SystemdNotifyTests {
        let directory: URL
        let binary = TestPaths.keepalivedBinary.path

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("notify")
        }

        func launch(_ arguments: [String], listener: NotifyListener, watchdogMicroseconds: Int? = nil) throws -> ChildProcess {
            var environment = ["NOTIFY_SOCKET": listener.path]
            if let watchdogMicroseconds { environment["WATCHDOG_USEC"] = "\(watchdogMicroseconds)" }
            return try ChildProcess(binary, arguments + ["--socket", directory.appendingPathComponent("rt-\(UUID().uuidString.prefix(4))/control.sock").path],
                                    environment: environment, directory: directory, label: "keepalived")
        }

        @Test("READY=1 within 1 s, STATUS= with the state, WATCHDOG=1 at half WATCHDOG_USEC, STOPPING=1 on SIGTERM")
        func readyWatchdogStopping() async throws {
            let listener = try NotifyListener(path: directory.appendingPathComponent("notify.sock").path)
            let daemon = try launch(["run", "-d", "null"], listener: listener, watchdogMicroseconds: 400_000)
            let ready = try await waitUntil("READY=1", timeout: .seconds(1)) { listener.assignments.contains { $0.line == "READY=1" } }
            #expect(ready < .seconds(1))
            let statuses = listener.assignments.filter { $0.line.hasPrefix("STATUS=") }.map(\.line)
            #expect(statuses.last == "STATUS=playing on null", "\(statuses)")
            #expect(Set(statuses).isSubset(of: ["STATUS=starting on null", "STATUS=playing on null"]), "\(statuses)")

            // Pings every 200 ms: count them over a window of at least 1 s.
            try await waitUntil("six watchdog pings", timeout: .seconds(3)) {
                listener.assignments.filter { $0.line == "WATCHDOG=1" }.count >= 6
            }
            let pings = listener.assignments.filter { $0.line == "WATCHDOG=1" }.map(\.at)
            let intervals = zip(pings.dropFirst(), pings).map { $0.0 - $0.1 }
            for interval in intervals.dropFirst() {
                #expect(interval > .milliseconds(120) && interval < .milliseconds(400), "ping interval \(interval)")
            }

            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(1)) == 0)
            #expect(listener.assignments.contains { $0.line == "STOPPING=1" })
        }

        @Test("STATUS= follows the state: waiting for a device that does not exist")
        func statusWhileWaiting() async throws {
            let listener = try NotifyListener(path: directory.appendingPathComponent("notify2.sock").path)
            let daemon = try launch(["run", "-d", "hw:CARD=NoSuchCard,DEV=0"], listener: listener)
            try await waitUntil("READY=1 while waiting", timeout: .seconds(1)) { listener.assignments.contains { $0.line == "READY=1" } }
            #expect(listener.assignments.contains { $0.line == "STATUS=waiting for device (no-device) on hw:CARD=NoSuchCard,DEV=0" },
                    "\(listener.assignments.map(\.line))")
            #expect(!listener.assignments.contains { $0.line == "WATCHDOG=1" }, "pinged without WATCHDOG_USEC")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(1)) == 0)
        }

        @Test("under the journal, lines carry syslog priorities and no timestamp")
        func journalPriorities() async throws {
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:CARD=NoSuchCard,DEV=0", "--socket", directory.appendingPathComponent("rt-j/control.sock").path],
                                          environment: ["JOURNAL_STREAM": "8:12345"], directory: directory, label: "keepalived")
            try await daemon.waitForLog("waiting for device")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(1)) == 0)
            let lines = daemon.stderr.split(separator: "\n")
            #expect(lines.contains { $0.hasPrefix("<6>starting") }, "\(daemon.stderr)")
            #expect(lines.contains { $0.hasPrefix("<4>waiting for device (no-device)") }, "\(daemon.stderr)")
            #expect(lines.allSatisfy { $0.hasPrefix("<") && !$0.contains("T00:") && !$0.contains("Z info") }, "\(daemon.stderr)")
        }
    }
}
