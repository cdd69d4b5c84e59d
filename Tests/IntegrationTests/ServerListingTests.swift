import Foundation
import TestSupport
import Testing

extension Integration {
    /// The daemon's one listing of a real PulseAudio: the selection and `--linger` both follow
    /// the server, and one event of the server's costs one listing between them.
    @Suite("one listing of the sound server per event")
    struct ServerListingTests {
        @Test("--all with --linger: one sink-input event causes one listing, which both watchers get",
              .enabled(if: PulseAudioServer.isInstalled))
        func oneListingPerEvent() async throws {
            // A TV and speakers (device-like sinks, which --all picks), a Bluetooth one and a
            // virtual one.
            let server = try await SoundServerSinksTests.desktopServer()
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path,
                                          ["run", "--all", "--linger", "10min", "--verbose", "--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            defer { daemon.signal(SIGKILL) }
            try await waitUntil("the TV and the speakers to run", timeout: .seconds(5)) {
                let states = server.sinkStates()
                return states["tv"] == "RUNNING" && states["speakers"] == "RUNNING"
            }
            try await daemon.waitForLog("watchers=2")
            func listings() -> Int { daemon.stderr.components(separatedBy: "listed the sound server").count - 1 }
            // The stream's start moves the sink through its states: wait for a second with no
            // listing (bounded: a server that never settles fails here).
            var settled = listings()
            let quietBy = ContinuousClock.now + .seconds(10).underSanitizer
            while ContinuousClock.now < quietBy {
                try await Task.sleep(for: .seconds(1))
                let now = listings()
                if now == settled { break }
                settled = now
            }
            #expect(listings() == settled, "the server kept changing for 10 s:\n\(daemon.stderr)")

            // One event: a stream's mute changed ('change' on sink-input).
            let inputs = try #require(commandOutput("pactl", ["list", "short", "sink-inputs"], environment: server.environment))
            let index = try #require(inputs.split(separator: "\n").first?.split(separator: "\t").first.map(String.init), "\(inputs)")
            #expect(commandOutput("pactl", ["set-sink-input-mute", index, "toggle"], environment: server.environment) != nil)
            try await waitUntil("a listing after the event", timeout: .seconds(2)) { listings() > settled }
            // Anything else it caused would come within moments.
            try await Task.sleep(for: .milliseconds(500))
            #expect(listings() == settled + 1, "one event, one listing (a watcher listing on its own makes two):\n\(daemon.stderr)")
            let last = daemon.stderr.components(separatedBy: "\n").last { $0.contains("listed the sound server") } ?? ""
            #expect(last.contains("watchers=2"), "the selection's watcher and --linger's get the same listing: \(last)")
            #expect(try await daemon.terminate(within: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }
    }
}
