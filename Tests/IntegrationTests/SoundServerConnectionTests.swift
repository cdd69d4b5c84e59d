import Foundation
import Glibc
import KeepAlive
import Logging
import TestSupport
import Testing

extension Integration {
    /// One libpulse connection per process (`SoundServerConnection`): every sink's stream, the
    /// sink watcher and `--linger` share one main loop (its thread named `keepalive-pulse`) and
    /// one context, so a sink adds its stream and its playback thread, never a libpulse thread.
    /// A private PulseAudio with card-like sinks (SoundServerSinksTests'), the real binary; and an
    /// embedder's manager in this process.
    @Suite("one connection to the sound server per process")
    struct SoundServerConnectionTests {
        static let loopThread = "keepalive-pulse"
        static let sinks = [SoundServerSinksTests.tv, SoundServerSinksTests.speakers, SoundServerSinksTests.dac]

        /// The names of a process's threads (/proc/PID/task/*/comm).
        static func threads(of pid: pid_t) -> [String] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            return tasks.compactMap { task in
                (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            }.sorted()
        }

        /// keepalived run --all --linger 30s on `count` card-like sinks, once each plays: its
        /// threads' names.
        static func runThreads(sinks count: Int) async throws -> [String] {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: Array(sinks.prefix(count)))
            defer { server.stop() }
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--all", "--linger", "30s", "--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            defer { daemon.signal(SIGKILL) }
            let names = Set(sinks.prefix(count).map(\.name))
            try await waitUntil("\(count) sinks to run, each output playing and lingering", timeout: .seconds(8)) {
                let states = server.sinkStates()
                let outputs = SoundServerSinksTests.outputs(SoundServerSinksTests.status(socket, server.environment))
                return names.allSatisfy { states[$0] == "RUNNING" }
                    && names.allSatisfy { name in
                        let output = outputs["pulse:DEVICE=\(name)"]
                        return output?["state"] as? String == "playing" && output?["linger"] != nil
                    }
            }
            // keepalived's own streams, one per sink, from the one client.
            let streams = server.streamNames()
            #expect(streams.count == count && streams.allSatisfy { $0.application == "keepalived" && $0.media == "keep-alive" }, "\(streams)")
            // Settled: the same threads twice, 300 ms apart.
            var threads = Self.threads(of: daemon.pid)
            try await waitUntil("keepalived's threads to settle", timeout: .seconds(5), every: .milliseconds(300)) {
                let now = Self.threads(of: daemon.pid)
                defer { threads = now }
                return now == threads
            }
            print("keepalived run --all --linger 30s on \(count) sink(s): \(threads.count) threads: \(threads)")
            #expect(try await daemon.terminate(within: .seconds(5)) == 0, "\(daemon.stderr)")
            return threads
        }

        @Test("keepalived run --all --linger on 1 and on 3 sinks: one libpulse main-loop thread either way; 3 sinks add only their 2 playback threads",
              .enabled(if: PulseAudioServer.isInstalled))
        func oneLoopThread() async throws {
            let one = try await Self.runThreads(sinks: 1)
            let three = try await Self.runThreads(sinks: 3)
            for threads in [one, three] {
                #expect(threads.filter { $0 == Self.loopThread }.count == 1, "\(threads)")
                // libpulse's own name for a threaded main loop's thread: none but the named one.
                #expect(!threads.contains("threaded-ml"), "\(threads)")
            }
            #expect(three.filter { $0 == "keepalive-play" }.count - one.filter { $0 == "keepalive-play" }.count == 2, "1 sink: \(one)\n3 sinks: \(three)")
            #expect(three.count - one.count <= 2, "1 sink: \(one)\n3 sinks: \(three)")
        }

        @Test("an embedder's manager with two sinks plays both through one connection, and keeps no libpulse thread once stopped",
              .enabled(if: PulseAudioServer.isInstalled))
        func embedderSharesAndLetsGo() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: [SoundServerSinksTests.tv])
            defer { server.stop() }
            let sinks = [server.sinkName, SoundServerSinksTests.tv.name]
            var configuration = KeepAliveConfiguration(devices: sinks.map { "pulse:DEVICE=\($0)" })
            for sink in sinks {
                configuration.outputSettings["pulse:DEVICE=\(sink)"] = OutputSettings(bufferDuration: .seconds(6), serverSink: sink)
            }
            let manager = try KeepAliveManager(configuration: configuration, logger: Logger(label: "shared-connection"))
            let pid = getpid()
            // As EmbeddedSinkTests: libpulse reads the server from this process's environment.
            try await EmbeddedSinkTests.withEnvironment([
                "PULSE_SERVER": server.environment["PULSE_SERVER"]!,
                "PULSE_COOKIE": server.directory.appendingPathComponent(".config/pulse/cookie").path,
            ]) {
                #expect(!Self.threads(of: pid).contains(Self.loopThread), "no libpulse thread before a sink plays")
                manager.start()
                defer { manager.stop() }
                try await waitUntil("both sinks to run", timeout: .seconds(5)) {
                    let states = server.sinkStates()
                    return sinks.allSatisfy { states[$0] == "RUNNING" } && manager.outputs.allSatisfy { $0.state == .playing }
                }
                #expect(Self.threads(of: pid).filter { $0 == Self.loopThread }.count == 1, "\(Self.threads(of: pid))")
                #expect(SoundServerConnection.isHeld)
                manager.stop()
                try await waitUntil("the streams to be gone", timeout: .seconds(2)) { server.sinkInputCount() == 0 }
                // The last stream let go of the connection: its thread was joined.
                #expect(!SoundServerConnection.isHeld)
                #expect(!Self.threads(of: pid).contains(Self.loopThread), "\(Self.threads(of: pid))")
            }
        }
    }
}
