import Foundation
import TestSupport
import Testing

extension Integration {
    /// org.freedesktop.ReserveDevice1 on a private session bus (a real dbus-daemon), between two
    /// real keepalived processes and `busctl` as the program that asks for the card. Card 7 is
    /// named (`-d hw:7`) and does not exist here: the reservation is a bus name, and what the
    /// daemons do with it shows in `status`.
    @Suite("device reservations on the session bus")
    struct DeviceReservationTests {
        static let name = "org.freedesktop.ReserveDevice1.Audio7"
        static let path = "/org/freedesktop/ReserveDevice1/Audio7"

        let directory: URL
        init() throws { directory = try TestPaths.makeTemporaryDirectory("reserve") }

        static var isInstalled: Bool {
            ["dbus-daemon", "busctl"].allSatisfy { FileManager.default.isExecutableFile(atPath: ChildProcess.which($0)) }
        }

        /// A private session bus; at `path` when given (so that one started again there is the
        /// same bus to its clients), else at an address of its own choosing in the test's
        /// directory (the session default, /tmp, keeps a killed bus's socket).
        func startBus(at path: String? = nil) async throws -> (ChildProcess, String) {
            let listen = ["--address=" + (path.map { "unix:path=\($0)" } ?? "unix:dir=\(directory.path)")]
            let bus = try ChildProcess("dbus-daemon", ["--session", "--nofork", "--print-address"] + listen,
                                       environment: ["HOME": directory.path], directory: directory, label: "dbus-daemon")
            let address = try await waitFor("the session bus address", timeout: .seconds(10)) {
                guard bus.isRunning else { throw Failed(what: "dbus-daemon", log: bus.stderr) }
                let address = bus.stdout.split(separator: "\n").first.map(String.init) ?? ""
                return address.isEmpty ? nil : address
            }
            // A client checks a printed address's guid against the server's, so one started again
            // is reached only through the bare path (as a session's /run/user/UID/bus is).
            return (bus, path.map { "unix:path=\($0)" } ?? address)
        }

        func busctl(_ address: String, _ arguments: [String]) -> String? {
            commandOutput("busctl", ["--address=\(address)"] + arguments, timeout: .seconds(5))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func owner(_ address: String) -> String? {
            busctl(address, ["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", Self.name])
        }

        func daemon(_ label: String, _ address: String, notify: NotifyListener? = nil) throws -> (ChildProcess, String) {
            let socket = directory.appendingPathComponent("\(label).sock").path
            var environment = ["DBUS_SESSION_BUS_ADDRESS": address, "XDG_RUNTIME_DIR": directory.path]
            if let notify { environment["NOTIFY_SOCKET"] = notify.path }
            let process = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", "hw:7", "--socket", socket],
                                           environment: environment,
                                           directory: directory, label: label)
            return (process, socket)
        }

        func status(_ socket: String) -> [String: Any] {
            let text = commandOutput(TestPaths.keepalivedBinary.path, ["status", "--json", "--socket", socket]) ?? ""
            return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
        }

        func devices(_ status: [String: Any]) -> [String] {
            (status["outputs"] as? [[String: Any]] ?? []).compactMap { $0["device"] as? String }
        }

        func withheld(_ status: [String: Any]) -> String? {
            (status["withheld"] as? [String: String])?["hw:7"]
        }

        @Test("a card keepalived opens is reserved at the lowest priority, left to whoever holds it, and given up when asked",
              .enabled(if: isInstalled))
        func reserveYieldAndTakeBack() async throws {
            let (bus, address) = try await startBus()
            defer { bus.signal(SIGTERM) }

            // A holds card 7's name, at the lowest priority, with its properties.
            let (first, firstSocket) = try daemon("first", address)
            defer { first.signal(SIGKILL) }
            let firstOwner = try await waitFor("keepalived to reserve card 7", timeout: .seconds(5)) {
                guard first.isRunning else { throw Failed(what: "keepalived", log: first.stderr) }
                return owner(address)
            }
            let properties = busctl(address, ["get-property", Self.name, Self.path, "org.freedesktop.ReserveDevice1",
                                              "ApplicationName", "ApplicationDeviceName", "Priority"])
            #expect(properties == "s \"keepalived\"\ns \"hw:7\"\ni -2147483648", "\(properties ?? "nil")")
            #expect(devices(status(firstSocket)) == ["hw:7"])

            // B finds it reserved and leaves it alone: no output, and status (and systemd's
            // STATUS=) says why.
            let listener = try NotifyListener(path: directory.appendingPathComponent("notify.sock").path)
            let (second, secondSocket) = try daemon("second", address, notify: listener)
            defer { second.signal(SIGKILL) }
            try await waitUntil("the second daemon to withhold hw:7", timeout: .seconds(5)) {
                guard second.isRunning else { throw Failed(what: "keepalived", log: second.stderr) }
                return withheld(status(secondSocket)) == "card 7 is reserved by keepalived: left to it until it lets go"
            }
            #expect(devices(status(secondSocket)).isEmpty)
            #expect(owner(address) == firstOwner)
            let withheldStatus = "STATUS=waiting for device (no-device): no output yet; left to others: hw:7: card 7 is reserved by keepalived: left to it until it lets go"
            try await waitUntil("STATUS= to name the reservation", timeout: .seconds(2)) {
                listener.assignments.contains { $0.line == withheldStatus }
            }

            // A request at A's own priority is refused; any higher one gets the card closed first.
            let refused = busctl(address, ["call", "--", Self.name, Self.path, "org.freedesktop.ReserveDevice1", "RequestRelease", "i", "-2147483648"])
            #expect(refused == "b false")
            #expect(devices(status(firstSocket)) == ["hw:7"])
            let granted = busctl(address, ["call", Self.name, Self.path, "org.freedesktop.ReserveDevice1", "RequestRelease", "i", "0"])
            #expect(granted == "b true")
            // The answer came after the output was gone.
            #expect(devices(status(firstSocket)).isEmpty)
            // A program that asks again before the release reached the bus still hears yes (a
            // missing object would answer UnknownObject, which PulseAudio takes as a no).
            let firstUnique = firstOwner.split(separator: "\"").dropFirst().first.map(String.init) ?? ""
            let late = busctl(address, ["call", "--", firstUnique, Self.path, "org.freedesktop.ReserveDevice1", "RequestRelease", "i", "0"])
            #expect(late == "b true")
            #expect(withheld(status(firstSocket))?.contains("card 7 is reserved by") == true)

            // The name is free, so B takes the card, and A then leaves it to B.
            let secondOwner = try await waitFor("the second daemon to reserve card 7", timeout: .seconds(5)) {
                owner(address).flatMap { $0 == firstOwner ? nil : $0 }
            }
            #expect(secondOwner != firstOwner)
            try await waitUntil("the second daemon to play hw:7", timeout: .seconds(5)) { devices(status(secondSocket)) == ["hw:7"] }
            #expect(withheld(status(firstSocket)) == "card 7 is reserved by keepalived: left to it until it lets go")

            // When B stops, its name goes with it and A takes the card back.
            second.signal(SIGTERM)
            _ = try await second.waitForExit(timeout: .seconds(5))
            try await waitUntil("the first daemon to play hw:7 again", timeout: .seconds(5)) { devices(status(firstSocket)) == ["hw:7"] }
            try await waitUntil("the first daemon to reserve card 7 again", timeout: .seconds(5)) {
                owner(address).map { $0 != secondOwner } == true
            }
            #expect(first.isRunning)
            #expect(!first.stderr.contains(" error: "))
        }

        @Test("a session bus that goes away: one warning, no spinning, and its cards reserved again once it is back",
              .enabled(if: isInstalled))
        func busRestarted() async throws {
            let path = directory.appendingPathComponent("bus").path
            var (bus, address) = try await startBus(at: path)
            let (daemon, socket) = try daemon("alone", address)
            defer { daemon.signal(SIGKILL) }
            try await waitUntil("keepalived to reserve card 7", timeout: .seconds(5)) {
                guard daemon.isRunning else { throw Failed(what: "keepalived", log: daemon.stderr) }
                return owner(address) != nil
            }

            bus.signal(SIGKILL)
            _ = try await bus.waitForExit(timeout: .seconds(5))
            let warning = "the session bus went away"
            try await waitUntil("keepalived to notice the bus is gone", timeout: .seconds(5)) { daemon.stderr.contains(warning) }
            // The bus stays away for 3 s, the length of the scenario: keepalived tries it again
            // meanwhile (after 1 s), and a daemon that spun on the dead connection used most of a
            // core here and wrote the warning tens of thousands of times.
            let cpu = try daemon.cpuSeconds()
            try await Task.sleep(for: .seconds(3))
            let spent = try daemon.cpuSeconds() - cpu
            #expect(spent < min(0.3 * Sanitizer.timeScale, 1), "\(spent) s of CPU in 3 s without a bus")
            #expect(daemon.stderr.components(separatedBy: warning).count - 1 == 1, "log:\n\(daemon.stderr.suffix(2000))")
            #expect(devices(status(socket)) == ["hw:7"], "the output plays on without the bus")

            // The same bus again (a restarted dbus-daemon): the card is reserved on it anew.
            unlink(path)
            (bus, address) = try await startBus(at: path)
            defer { bus.signal(SIGTERM) }
            try await waitUntil("keepalived to reserve card 7 on the new bus", timeout: .seconds(10)) {
                guard daemon.isRunning else { throw Failed(what: "keepalived", log: daemon.stderr) }
                return owner(address) != nil
            }
            let holder = busctl(address, ["get-property", Self.name, Self.path, "org.freedesktop.ReserveDevice1", "ApplicationName"])
            #expect(holder == "s \"keepalived\"", "\(holder ?? "nil")")
            #expect(daemon.stderr.contains("back on the session bus"))
            #expect(devices(status(socket)) == ["hw:7"])
        }

        @Test("a card given up on request that its asker never reserves is taken back when the hand-over ends",
              .enabled(if: isInstalled))
        func unclaimedHandOver() async throws {
            let (bus, address) = try await startBus()
            defer { bus.signal(SIGTERM) }
            let (daemon, socket) = try daemon("alone", address)
            defer { daemon.signal(SIGKILL) }
            _ = try await waitFor("keepalived to reserve card 7", timeout: .seconds(5)) {
                guard daemon.isRunning else { throw Failed(what: "keepalived", log: daemon.stderr) }
                return owner(address)
            }
            let granted = busctl(address, ["call", Self.name, Self.path, "org.freedesktop.ReserveDevice1", "RequestRelease", "i", "0"])
            #expect(granted == "b true")
            #expect(devices(status(socket)).isEmpty)
            let released = ContinuousClock.now
            // busctl asked and went away without reserving: after the 5 s hand-over the card is
            // keepalived's again, with no card event to prompt it.
            try await waitUntil("keepalived to play hw:7 again", timeout: .seconds(8)) { devices(status(socket)) == ["hw:7"] }
            let back = released.duration(to: .now)
            #expect(back >= .seconds(4.5), "taken back after \(back), before the hand-over ended")
            try await waitUntil("keepalived to reserve card 7 again", timeout: .seconds(2)) { owner(address) != nil }
            #expect(daemon.isRunning)
        }
    }
}
