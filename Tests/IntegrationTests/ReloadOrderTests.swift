import Foundation
import TestSupport
import Testing

extension Integration {
    /// Reloads from every side at once (the control socket from several threads, SIGHUP) while
    /// the cards change under a selection (rescans): whatever the interleaving, the options file
    /// as it stood at the last reload is what plays and what `status` reports once that reload
    /// answered.
    @Suite("reloads and rescans applied in order")
    struct ReloadOrderTests {
        /// Rounds in one run of the test: each is a burst of about 20 reloads and 6 card
        /// changes, then a last reload checked at once. Under a sanitizer each reload reads ALSA's
        /// configuration instrumented: 20 rounds took 71 s of CPU under ThreadSanitizer, a fifth
        /// of its whole suite's, so the sanitized runs (CI's) take 8, still about 200 reloads.
        static let rounds = Sanitizer.active == nil ? 20 : 8

        /// One options file the test may write: its level and its one named output.
        struct Options: Equatable {
            let volume: Double
            let device: String
        }

        @Test("socket reloads, SIGHUPs and rescans together: the last reload's options are applied and reported, every round")
        func lastReloadWins() async throws {
            let device = try FaultyDevice()
            let library = try FaultyDevice.pluginLibrary().path
            let rc = device.home.appendingPathComponent(".asoundrc")
            let optionsFile = device.directory.appendingPathComponent("keepalived.conf")
            let choices = (0..<4).map { index in
                Options(volume: 0.010 + 0.002 * Double(index),
                        device: "file:'\(device.directory.appendingPathComponent("out-\(index).raw").path)',raw")
            }
            @Sendable func writeOptions(_ options: Options) throws {
                let text = "KEEPALIVED_OPTIONS=\"--volume \(options.volume) --buffer 0.2 -d \"\(options.device)\"\"\n"
                try text.write(to: optionsFile, atomically: true, encoding: .utf8)
            }
            /// A card changing: the TV (digital, picked by `--digital`) comes or goes.
            @Sendable func writeCards(tv: Bool) throws {
                var text = "pcm_type.faulty { lib \"\(library)\" }\n"
                text += "pcm.speakers { type faulty state \"\(device.stateDirectory("speakers").path)\" hint { show on description \"Desk speakers, analog\" } }\n"
                if tv {
                    text += "pcm.tv { type faulty state \"\(device.stateDirectory("tv").path)\" hint { show on description \"Living room TV, HDMI\" } }\n"
                }
                try text.write(to: rc, atomically: true, encoding: .utf8)
            }
            try writeCards(tv: true)
            try writeOptions(choices[0])
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "--digital", "--config", optionsFile.path],
                                          environment: device.environment, directory: device.directory, label: "keepalived")
            try await waitUntil("the TV playing", timeout: .seconds(5)) { device.capturedBytes(device: "tv") > 0 }
            let socket = device.socket.path

            for round in 0..<Self.rounds {
                // The burst: every side at once, each at its own pace.
                let failures = Failures()
                runTogether([
                    {
                        for step in 0..<8 {
                            do { try writeOptions(choices[(round + step) % choices.count]) } catch { failures.add("options: \(error)") }
                            usleep(useconds_t.random(in: 5_000...25_000))
                        }
                    },
                    {
                        for step in 0..<6 {
                            do { try writeCards(tv: (round + step) % 2 == 0) } catch { failures.add("cards: \(error)") }
                            usleep(useconds_t.random(in: 20_000...60_000))
                        }
                    },
                    {
                        for _ in 0..<8 {
                            daemon.signal(SIGHUP)
                            usleep(useconds_t.random(in: 5_000...30_000))
                        }
                    },
                    { socketReloads(socket, count: 4, failures: failures) },
                    { socketReloads(socket, count: 4, failures: failures) },
                ])
                #expect(failures.all.isEmpty, "round \(round): \(failures.all)")

                // The last reload, with a SIGHUP and a card change still on their way.
                let last = choices[(round * 3 + 1) % choices.count]
                daemon.signal(SIGHUP)
                try writeCards(tv: round % 2 == 1)
                usleep(useconds_t.random(in: 0...30_000))
                try writeOptions(last)
                let reply = try UnixClient(connectingTo: socket).request("reload", timeout: Self.replyDeadline)
                #expect(reply["ok"] as? Bool == true, "round \(round): \(reply)")
                // At once, and again once what was on its way landed: the last options hold.
                for look in 0..<3 {
                    let outputs = try Self.outputs(UnixClient(connectingTo: socket).request("status")["status"] as? [String: Any])
                    let problems = Self.problems(outputs, expected: last, among: choices)
                    #expect(problems.isEmpty, "round \(round), look \(look): \(problems)\n\(outputs)")
                    if !problems.isEmpty { break }
                    try await Task.sleep(for: .milliseconds(150))
                }
            }
            // What a user sees: `keepalived status --json`.
            let status = try await runCommand(TestPaths.keepalivedBinary.path, ["status", "--json"], environment: device.environment)
            let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
            let last = choices[((Self.rounds - 1) * 3 + 1) % choices.count]
            #expect(Self.problems(Self.outputs(object), expected: last, among: choices).isEmpty, "\(status.stdout)")
            #expect(daemon.isRunning)
            #expect(try await daemon.terminate(within: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }

        /// `count` reloads on the control socket, one connection each; a refusal is a failure.
        /// How long a client waits for its reload's reply: beyond the daemon's own bound (it
        /// answers within 10 s, `MainLoopQueue.replyTimeout`, a failure if the reload has not run
        /// by then), so that a reply that never comes is told from a slow one. In a burst a reload
        /// waits for the ones queued before it (each may join playback threads): 2 s was a
        /// scheduler's bound (`scripts/test --stress` round 2: "timed out after 2.0 seconds").
        static let replyDeadline: Duration = .seconds(15)

        @Sendable func socketReloads(_ socket: String, count: Int, failures: Failures) {
            for _ in 0..<count {
                do {
                    let reply = try UnixClient(connectingTo: socket).request("reload", timeout: Self.replyDeadline)
                    if reply["ok"] as? Bool != true { failures.add("reload: \(reply)") }
                } catch {
                    failures.add("reload: \(error)")
                }
                usleep(useconds_t.random(in: 5_000...30_000))
            }
        }

        static func outputs(_ status: [String: Any]?) -> [(device: String, volume: Double)] {
            (status?["outputs"] as? [[String: Any]] ?? []).map { ($0["device"] as? String ?? "", $0["volume"] as? Double ?? -1) }
        }

        /// What in `outputs` is not `expected`'s: its named output missing, another choice's
        /// present, an output at another level.
        static func problems(_ outputs: [(device: String, volume: Double)], expected: Options, among choices: [Options]) -> [String] {
            var problems: [String] = []
            let devices = outputs.map(\.device)
            if !devices.contains(expected.device) { problems.append("missing \(expected.device)") }
            for other in choices where other.device != expected.device && devices.contains(other.device) {
                problems.append("stale output \(other.device)")
            }
            for output in outputs where abs(output.volume - expected.volume) > 1e-6 {
                problems.append("\(output.device) at volume \(output.volume), not \(expected.volume)")
            }
            return problems
        }
    }
}

/// What the test's threads saw go wrong, gathered from all of them.
final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []

    func add(_ failure: String) { lock.withLock { list.append(failure) } }

    var all: [String] { lock.withLock { list } }
}

/// Runs each body on a thread of its own, all at once, and returns when all have returned.
func runTogether(_ bodies: [@Sendable () -> Void]) {
    let group = DispatchGroup()
    for body in bodies {
        group.enter()
        Thread.detachNewThread {
            body()
            group.leave()
        }
    }
    group.wait()
}
