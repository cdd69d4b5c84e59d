import Foundation
import Testing

extension Integration {
    /// Sleep through logind, against a private dbus-daemon with the fake logind of
    /// Tests/Fixtures/fake-logind on it (the daemon finds it through DBUS_SYSTEM_BUS_ADDRESS).
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
        func startBus() throws -> ChildProcess {
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
            return try ChildProcess("dbus-daemon", ["--config-file=\(config.path)", "--nofork", "--print-address"],
                                    directory: directory, label: "dbus-daemon")
        }

        /// The fake logind, fed commands through a FIFO this test keeps open.
        func startLogind() async throws -> (ChildProcess, FileHandle) {
            let fifo = directory.appendingPathComponent("logind.in").path
            #expect(mkfifo(fifo, 0o600) == 0)
            let commands = open(fifo, O_RDWR)
            #expect(commands >= 0)
            let script = TestPaths.repositoryRoot.appendingPathComponent("Tests/Fixtures/fake-logind/fake-logind").path
            let logind = try ChildProcess(script, [], environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress],
                                          directory: directory, label: "fake-logind", stdin: fifo)
            try await waitUntil("the fake logind on the bus", timeout: .seconds(10)) { logind.stdout.contains("ready") }
            return (logind, FileHandle(fileDescriptor: commands, closeOnDealloc: true))
        }

        func state() throws -> String? {
            let reply = try UnixClient(connectingTo: socketPath).request("status")
            return (reply["status"] as? [String: Any])?["state"] as? String
        }

        @Test("before sleep every output closes and only then is the delay lock released; after resume it plays again under a new lock")
        func sleepAndResume() async throws {
            let bus = try startBus()
            defer { bus.signal(SIGTERM) }
            try await waitUntil("the bus socket", timeout: .seconds(5)) {
                FileManager.default.fileExists(atPath: directory.appendingPathComponent("bus").path)
            }
            let (logind, commands) = try await startLogind()
            defer { logind.signal(SIGTERM) }
            let daemon = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath],
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress], directory: directory, label: "keepalived")
            defer { daemon.signal(SIGTERM) }
            try await daemon.waitForLog("playing")
            try await waitUntil("a delay lock", timeout: .seconds(5)) { logind.stdout.contains("inhibit 1 sleep delay") }

            commands.write(Data("sleep true\n".utf8))
            try await waitUntil("the lock released", timeout: .seconds(5)) { logind.stdout.contains("released 1") }
            // The daemon logs its output closed before it closes the lock: by now it must be there.
            #expect(daemon.stderr.contains("stopped device=null"), "log:\n\(daemon.stderr)")
            #expect(daemon.stderr.components(separatedBy: "system going to sleep").count == 2)
            #expect(try state() != "playing")

            commands.write(Data("sleep false\n".utf8))
            try await waitUntil("a new lock", timeout: .seconds(5)) { logind.stdout.contains("inhibit 2 sleep delay") }
            try await waitUntil("playing again", timeout: .seconds(2)) { (try? state()) == "playing" }
            #expect(daemon.stderr.components(separatedBy: "system resumed").count == 2)
            #expect(daemon.isRunning)
        }

        @Test("without a system bus it plays as before, with no more than a debug line about logind")
        func noBus() async throws {
            let daemon = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath],
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory.path)/nothing"],
                                          directory: directory, label: "keepalived")
            defer { daemon.signal(SIGTERM) }
            try await daemon.waitForLog("playing")
            #expect(!daemon.stderr.contains("logind"), "log:\n\(daemon.stderr)")
            #expect(try state() == "playing")
        }
    }
}
