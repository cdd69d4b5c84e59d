import Foundation
import TestSupport
import Testing

extension Integration {
    /// The daemon's one listing of a real PulseAudio: the selection, `--linger` and the outputs'
    /// activity all follow the server (and each sink stream's rate follower, a user of the same
    /// connection), and one event of the server's costs one listing between them.
    @Suite("one listing of the sound server per event")
    struct ServerListingTests {
        @Test("--all with --linger: one server event causes one listing, which every watcher gets",
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
            try await daemon.waitForLog("watchers=3")
            func listings() -> Int { daemon.stderr.components(separatedBy: "listed the sound server").count - 1 }
            // One event at a time, on a server otherwise quiet: a sink's mute toggled ('change'
            // on sink). keepalived's own streams may be made again meanwhile (a slow sanitized
            // daemon recovering one), which is events of their own: an attempt that saw more
            // than one listing is tried again, at most three times; a watcher listing on its own
            // makes two every time.
            var seen: [Int] = []
            for _ in 0..<3 {
                // Quiet: a second with no listing (bounded: a server that never settles fails).
                var settled = listings()
                let quietBy = ContinuousClock.now + .seconds(10).underSanitizer
                while ContinuousClock.now < quietBy {
                    try await Task.sleep(for: .seconds(1))
                    let now = listings()
                    if now == settled { break }
                    settled = now
                }
                #expect(commandOutput("pactl", ["set-sink-mute", "speakers", "toggle"], environment: server.environment) != nil)
                try await waitUntil("a listing after the event", timeout: .seconds(2).underSanitizer) { listings() > settled }
                // Anything else it caused would come within moments.
                try await Task.sleep(for: .milliseconds(500))
                seen.append(listings() - settled)
                if seen.last == 1 { break }
            }
            #expect(seen.last == 1, "listings after each event: \(seen) (one event, one listing):\n\(daemon.stderr)")
            let last = daemon.stderr.components(separatedBy: "\n").last { $0.contains("listed the sound server") } ?? ""
            #expect(last.contains("watchers=3"), "the selection's watcher, --linger's and the activity's get the same listing: \(last)")
            #expect(try await daemon.terminate(within: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }
    }
}
