import Foundation
import TestSupport
import Testing

extension Integration {
    /// Real audio's start and stop on an output, as `--on-active`, `--on-idle`, `keepalived
    /// events` and `status` see it: a user's stream on a sink keepalived keeps awake (a real
    /// PulseAudio, paplay), and a player's release through the control socket (the front door's
    /// daemon side; the VM's box scenario is the kernel's side).
    @Suite("real audio's activity: hooks and events")
    struct ActivityTests {
        let binary = TestPaths.keepalivedBinary.path

        /// A hook that appends `EVENT OUTPUT PROGRAM CARD DEVICE SINK` to `log` (a shell script: the
        /// hook itself runs without a shell; its own interpreter is its business).
        static func recordingHook(in directory: URL, log: URL) throws -> String {
            let script = directory.appendingPathComponent("hook.sh")
            try """
            #!/bin/sh
            echo "$KEEPALIVED_EVENT $KEEPALIVED_OUTPUT $KEEPALIVED_PROGRAM ${KEEPALIVED_CARD:--} ${KEEPALIVED_DEVICE:--} ${KEEPALIVED_SINK:--}" >> '\(log.path)'
            echo "hook saw $KEEPALIVED_EVENT"

            """.write(to: script, atomically: true, encoding: .utf8)
            chmod(script.path, 0o755)
            return script.path
        }

        static func lines(_ url: URL) -> [String] {
            ((try? String(contentsOf: url, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        static func events(_ child: ChildProcess) -> [[String: Any]] {
            child.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        static func activity(_ socket: String, _ environment: [String: String], of device: String) -> [String: Any]? {
            SoundServerSinksTests.outputs(SoundServerSinksTests.status(socket, environment))[device]?["activity"] as? [String: Any]
        }

        @Test("a user's tracks on a kept sink: on-active once with the program and the sink, not again between tracks, on-idle once --on-idle-after after the last; keepalived events and status say the same",
              .enabled(if: PulseAudioServer.isInstalled))
        func streamsOnASink() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: [SoundServerSinksTests.tv])
            defer { server.stop() }
            let log = server.directory.appendingPathComponent("hooks.log")
            let hook = try Self.recordingHook(in: server.directory, log: log)
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(binary, ["run", "--all", "--socket", socket, "--on-active", hook, "--on-idle", hook, "--on-idle-after", "2s"],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            try await daemon.waitForLog("playing device=pulse:DEVICE=tv")
            let device = "pulse:DEVICE=tv"
            #expect(Self.activity(socket, server.environment, of: device)?["state"] as? String == "idle")
            let events = try ChildProcess(binary, ["events", "--socket", socket], environment: server.environment,
                                          directory: server.directory, label: "keepalived events")
            // Subscribed once the daemon's reply is out; nothing is printed before a change.
            try await Task.sleep(for: .milliseconds(300))

            let track = server.directory.appendingPathComponent("track.wav").path
            #expect(commandOutput("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", track, "synth", "1", "sine", "440", "vol", "0.1"]) != nil)
            for index in 0..<2 {
                #expect(commandOutput("paplay", ["--device=tv", track], environment: server.environment, timeout: .seconds(10)) != nil, "track \(index)")
                if index == 0 {
                    #expect(Self.activity(socket, server.environment, of: device)?["state"] as? String == "active")
                    // Between tracks: half a second of silence.
                    try await Task.sleep(for: .milliseconds(500))
                }
            }
            try await waitUntil("the hooks to record active and idle", timeout: .seconds(6).underSanitizer) { Self.lines(log).count >= 2 }
            try await Task.sleep(for: .milliseconds(500))
            let recorded = Self.lines(log)
            #expect(recorded == ["active \(device) paplay - - tv", "idle \(device) paplay - - tv"], "\(recorded)\n\(daemon.stderr)")
            let seen = Self.events(events)
            #expect(seen.map { $0["event"] as? String } == ["active", "idle"], "\(events.stdout)")
            #expect(seen.allSatisfy { $0["output"] as? String == device && $0["program"] as? String == "paplay" && $0["sink"] as? String == "tv" }, "\(events.stdout)")
            if seen.count == 2, let active = seen[0]["time"] as? Double, let idle = seen[1]["time"] as? Double {
                // Two tracks of 1 s, half a second apart, then --on-idle-after's 2 s.
                #expect(idle - active >= 4.3 && idle - active < 4.5 + 3 * Sanitizer.timeScale, "active at \(active), idle at \(idle)")
            }
            #expect(Self.activity(socket, server.environment, of: device)?["state"] as? String == "idle")
            #expect(daemon.stderr.contains("hook output") && daemon.stderr.contains("hook saw active"), "\(daemon.stderr)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
            // The daemon stopped: its subscribers' connection ends, and so does `events`.
            #expect(try await events.waitForExit(timeout: .seconds(5)) == 0, "\(events.stderr)")
        }

        @Test("a player's release through the front door: on-active with the program, card and device; the loan's end then --on-idle-after: on-idle",
              .enabled(if: true))
        func playerRelease() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("activity")
            let log = directory.appendingPathComponent("hooks.log")
            let hook = try Self.recordingHook(in: directory, log: log)
            let socket = directory.appendingPathComponent("k.sock").path
            // No sound card here: hw:0,0 is an output waiting for its card, which is all the
            // daemon's side of a release needs.
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:0,0", "--socket", socket, "--on-active", hook, "--on-idle", hook, "--on-idle-after", "1s"],
                                          directory: directory, label: "keepalived")
            try await waitUntil("the control socket", timeout: .seconds(5)) { FileManager.default.fileExists(atPath: socket) }
            let client = try UnixClient(connectingTo: socket)
            client.send(#"{"request":"release","card":0,"device":0,"program":"mpd"}"# + "\n")
            _ = try #require(client.readLine(), "no reply to the release")
            try await waitUntil("on-active", timeout: .seconds(3).underSanitizer) { Self.lines(log).count >= 1 }
            #expect(Self.lines(log).first == "active hw:0,0 mpd 0 0 -", "\(Self.lines(log))")
            // The player never opens the device: it comes back after the loan's open window (2 s),
            // and the output goes idle a second later.
            try await waitUntil("on-idle", timeout: .seconds(8).underSanitizer) { Self.lines(log).count >= 2 }
            #expect(Self.lines(log) == ["active hw:0,0 mpd 0 0 -", "idle hw:0,0 mpd 0 0 -"], "\(Self.lines(log))\n\(daemon.stderr)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("a hook that outlives --hook-timeout is ended with what it started, and the daemon plays on")
        func hookTimeout() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("activity-timeout")
            let socket = directory.appendingPathComponent("k.sock").path
            let script = directory.appendingPathComponent("slow.sh")
            try "#!/bin/sh\nsleep 30 &\nwait\n".write(to: script, atomically: true, encoding: .utf8)
            chmod(script.path, 0o755)
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:0,0", "-d", "null", "--socket", socket, "--on-active", script.path, "--hook-timeout", "500ms"],
                                          directory: directory, label: "keepalived")
            try await waitUntil("the control socket", timeout: .seconds(5)) { FileManager.default.fileExists(atPath: socket) }
            let client = try UnixClient(connectingTo: socket)
            client.send(#"{"request":"release","card":0,"device":0,"program":"mpd"}"# + "\n")
            _ = try #require(client.readLine(), "no reply to the release")
            try await daemon.waitForLog("hook timed out and was ended", timeout: .seconds(5).underSanitizer)
            // The hook's own child (sleep) was in its process group: gone too.
            try await waitUntil("the hook's sleep to end", timeout: .seconds(3)) {
                commandOutput("pgrep", ["-f", "^sleep 30$"]).map { $0.isEmpty } ?? true
            }
            let status = try #require(UnixClient(connectingTo: socket).request("status")["status"] as? [String: Any])
            let null = (status["outputs"] as? [[String: Any]] ?? []).first { $0["device"] as? String == "null" }
            #expect(null?["state"] as? String == "playing", "\(status)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("bad hook options: exit 64 naming the option", arguments: [
            (["--on-active", ""], "--on-active"),
            (["--on-idle", "'unclosed"], "--on-idle"),
            (["--on-idle-after", "0s"], "--on-idle-after must be at least 1s"),
            (["--on-idle-after", "soon"], "--on-idle-after"),
            (["--hook-timeout", "10ms"], "--hook-timeout must be at least 100ms"),
        ])
        func badOptions(arguments: [String], message: String) async throws {
            let result = try await runCommand(binary, ["run", "-d", "null", "--socket", "/tmp/keepalived-activity-bad.sock"] + arguments, timeout: .seconds(10))
            #expect(result.status == 64, "\(result)")
            #expect(result.stderr.contains(message), "\(result.stderr)")
        }
    }
}
