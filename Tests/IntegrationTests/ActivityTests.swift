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

        /// Until the daemon's control socket takes a connection. Its file exists from the bind and
        /// takes connections from the listen: a connect between the two was refused under
        /// ThreadSanitizer.
        static func waitForConnections(_ socket: String) async throws {
            try await waitUntil("the control socket to take a connection", timeout: .seconds(5).underSanitizer) {
                (try? UnixClient(connectingTo: socket)) != nil
            }
        }

        /// keepalived on `hw:0,0` with `arguments`, and a player's release of card 0's device 0 sent
        /// on a connection of its own: no sound card here, so hw:0,0 is an output waiting for its
        /// card, which is all the daemon's side of a release needs.
        static func daemonWithRelease(_ arguments: [String], in directory: URL) async throws -> (daemon: ChildProcess, client: UnixClient) {
            let socket = directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", "hw:0,0", "--socket", socket] + arguments,
                                          directory: directory, label: "keepalived")
            try await waitForConnections(socket)
            let client = try UnixClient(connectingTo: socket)
            client.send(#"{"request":"release","card":0,"device":0,"program":"mpd"}"# + "\n")
            return (daemon, client)
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

        @Test("a hook that leaves a child in the background holding its output: it finishes at its own exit, and the next hook runs while that child still lives")
        func hookWithBackgroundChild() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("activity")
            let log = directory.appendingPathComponent("hooks.log")
            let childPid = directory.appendingPathComponent("child.pid")
            let onActive = directory.appendingPathComponent("relay-on.sh")
            // As a box owner's script might: switch a relay, and leave something running.
            try """
            #!/bin/sh
            echo "relay on"
            sleep 600 &
            echo $! > '\(childPid.path)'
            echo "active" >> '\(log.path)'

            """.write(to: onActive, atomically: true, encoding: .utf8)
            chmod(onActive.path, 0o755)
            let onIdle = try Self.recordingHook(in: directory, log: log)
            let (daemon, client) = try await Self.daemonWithRelease(["--on-active", onActive.path, "--on-idle", onIdle, "--on-idle-after", "1s"], in: directory)
            defer {
                if let pid = try? String(contentsOf: childPid, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), let value = Int32(pid) { kill(value, SIGKILL) }
            }
            _ = try #require(client.readLine(), "no reply to the release")
            try await waitUntil("on-active's end", timeout: .seconds(5).underSanitizer) { daemon.stderr.contains("hook finished") }
            // The loan ends unused after its open window (2 s), the output goes idle a second later.
            try await waitUntil("on-idle", timeout: .seconds(10).underSanitizer) { Self.lines(log).count >= 2 }
            #expect(Self.lines(log) == ["active", "idle hw:0,0 mpd 0 0 -"], "\(Self.lines(log))\n\(daemon.stderr)")
            let pid = try #require(Int32(String(contentsOf: childPid, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(kill(pid, 0) == 0, "the background child should still live: the idle hook did not wait for it")
            #expect(daemon.stderr.contains("relay on"), "what the hook printed before it exited is logged:\n\(daemon.stderr)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("a stream named with a newline and a syslog priority on a real PulseAudio: one journal line at its own priority, the name made harmless in the log, status and the hook",
              .enabled(if: PulseAudioServer.isInstalled))
        func untrustedStreamName() async throws {
            let server = try PulseAudioServer()
            try await server.start(suspendTimeout: 1, sinks: [SoundServerSinksTests.tv])
            defer { server.stop() }
            let log = server.directory.appendingPathComponent("hooks.log")
            let hook = try Self.recordingHook(in: server.directory, log: log)
            let socket = server.directory.appendingPathComponent("k.sock").path
            // Under systemd: each line starts with its priority, as the journal reads it.
            var environment = server.environment
            environment["JOURNAL_STREAM"] = "8:12345"
            let daemon = try ChildProcess(binary, ["run", "--all", "--socket", socket, "--on-active", hook, "--on-idle-after", "30s"],
                                          environment: environment, directory: server.directory, label: "keepalived")
            try await daemon.waitForLog("playing device=pulse:DEVICE=tv")
            let track = server.directory.appendingPathComponent("track.wav").path
            #expect(commandOutput("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", track, "synth", "1", "sine", "440", "vol", "0.1"]) != nil)
            let forged = "evil\n<2>forged device=hw:9,9"
            #expect(commandOutput("paplay", ["--device=tv", "--client-name=\(forged)", track], environment: server.environment, timeout: .seconds(10)) != nil)
            try await waitUntil("on-active", timeout: .seconds(6).underSanitizer) { Self.lines(log).count >= 1 }
            let lines = daemon.stderr.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(lines.allSatisfy { $0.isEmpty || $0.hasPrefix("<") && !$0.hasPrefix("<2>") && !$0.hasPrefix("<0>") && !$0.hasPrefix("<1>") }, "\(daemon.stderr)")
            let active = try #require(lines.first { $0.contains("real audio plays: active") }, "\(daemon.stderr)")
            #expect(active.hasPrefix("<5>") && active.contains(#"program="evil?<2>forged device=hw:9,9""#), "\(active)")
            #expect(Self.lines(log).first == "active pulse:DEVICE=tv evil?<2>forged device=hw:9,9 - - tv", "the hook's KEEPALIVED_PROGRAM: \(Self.lines(log))")
            #expect(Self.activity(socket, server.environment, of: "pulse:DEVICE=tv")?["program"] as? String == "evil?<2>forged device=hw:9,9")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("a player's release through the front door: on-active with the program, card and device; the loan's end then --on-idle-after: on-idle",
              .enabled(if: true))
        func playerRelease() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("activity")
            let log = directory.appendingPathComponent("hooks.log")
            let hook = try Self.recordingHook(in: directory, log: log)
            let (daemon, client) = try await Self.daemonWithRelease(["--on-active", hook, "--on-idle", hook, "--on-idle-after", "1s"], in: directory)
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

        @Test("--output 'NAME --on-active … --on-idle … --on-idle-after …': that output's own hooks and idle time, the global ones for the others; --power-on-wait needs no global hook then")
        func outputsOwnHooks() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("activity-output")
            let globalLog = directory.appendingPathComponent("global.log")
            let dacLog = directory.appendingPathComponent("dac.log")
            let global = try Self.recordingHook(in: directory, log: globalLog)
            let dacDirectory = directory.appendingPathComponent("dac")
            try FileManager.default.createDirectory(at: dacDirectory, withIntermediateDirectories: true)
            let dac = try Self.recordingHook(in: dacDirectory, log: dacLog)
            let socket = directory.appendingPathComponent("k.sock").path
            // --power-on-wait with no global --on-active: an output's own hook is enough.
            let accepted = try ChildProcess(binary, ["run", "-d", "null", "--socket", directory.appendingPathComponent("a.sock").path,
                                                     "--output", "null --on-active true", "--power-on-wait", "2s"],
                                            directory: directory, label: "keepalived (accepted)")
            try await accepted.waitForLog("playing")
            #expect(try await accepted.terminate(within: .seconds(2)) == 0, "\(accepted.stderr)")
            // No sound card here: each output waits for its card, which is all a release needs.
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:0,0", "--socket", socket, "--on-active", global, "--on-idle", global, "--on-idle-after", "20s",
                                                   "--output", "hw:1,0 --on-active \(dac) --on-idle \(dac) --on-idle-after 1s", "--power-on-wait", "3s"],
                                          directory: directory, label: "keepalived")
            try await Self.waitForConnections(socket)
            for card in [0, 1] {
                let client = try UnixClient(connectingTo: socket)
                client.send(#"{"request":"release","card":\#(card),"device":0,"program":"mpd"}"# + "\n")
                _ = try #require(client.readLine(), "no reply to card \(card)'s release")
            }
            // Neither player opens its device: both outputs fall silent, and only the DAC goes
            // idle within the test: after its own second, not the global 20.
            try await waitUntil("the DAC's on-idle", timeout: .seconds(8).underSanitizer) { Self.lines(dacLog).count >= 2 }
            #expect(Self.lines(dacLog) == ["active hw:1,0 mpd 1 0 -", "idle hw:1,0 mpd 1 0 -"], "\(Self.lines(dacLog))\n\(daemon.stderr)")
            #expect(Self.lines(globalLog) == ["active hw:0,0 mpd 0 0 -"], "\(Self.lines(globalLog))\n\(daemon.stderr)")
            #expect(Self.activity(socket, [:], of: "hw:0,0")?["state"] as? String == "active")
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
            try await Self.waitForConnections(socket)
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

        /// A hook that writes `start EVENT SECONDS` and `end EVENT SECONDS` (/proc/uptime) around a
        /// sleep of `sleep` seconds.
        static func slowHook(in directory: URL, log: URL, sleep: String) throws -> String {
            let script = directory.appendingPathComponent("power.sh")
            try """
            #!/bin/sh
            read up idle < /proc/uptime; echo "start $KEEPALIVED_EVENT $up" >> '\(log.path)'
            sleep \(sleep)
            read up idle < /proc/uptime; echo "end $KEEPALIVED_EVENT $up" >> '\(log.path)'

            """.write(to: script, atomically: true, encoding: .utf8)
            chmod(script.path, 0o755)
            return script.path
        }

        @Test("--power-on-wait: the real plug-in's open waits for on-active's end and the settle, once per active period; status is answered meanwhile")
        func powerOnWait() async throws {
            let setup = try PluginSetup("power-on-wait")
            let log = setup.directory.appendingPathComponent("power.log")
            let hook = try Self.slowHook(in: setup.directory, log: log, sleep: "1")
            let socket = setup.socket
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:0,0", "-d", "null", "--socket", socket, "--on-active", hook,
                                                   "--power-on-wait", "5s", "--power-on-settle", "300ms", "--on-idle-after", "30s"],
                                          directory: setup.directory, label: "keepalived")
            try await Self.waitForConnections(socket)
            // The control socket serves others while the player's open is held; the output is
            // active, and still keepalived's (no loan yet: the card stays awake meanwhile).
            let probe = Task.detached { () async throws -> (ok: Bool, took: Duration, answered: ContinuousClock.Instant, loans: Bool, activity: String?) in
                try await waitUntil("on-active to start", timeout: .seconds(3).underSanitizer) { Self.lines(log).count >= 1 }
                let asked = ContinuousClock.now
                let reply = try UnixClient(connectingTo: socket).request("status")
                let answered = ContinuousClock.now
                let status = reply["status"] as? [String: Any] ?? [:]
                let output = (status["outputs"] as? [[String: Any]] ?? []).first { $0["device"] as? String == "hw:0,0" }
                return (reply["ok"] as? Bool == true, answered - asked, answered, status["loans"] != nil, (output?["activity"] as? [String: Any])?["state"] as? String)
            }
            // The player's open: alsa-lib, the plug-in, `type keepalived card 0`.
            let open = try await setup.open("keepalived-card0", socket: socket)
            let openEnded = ContinuousClock.now
            let status = try await probe.value
            // Served during the hold: an ordering (answered before the held open returned), not a
            // speed, which a busy machine can stretch (CONTRIBUTING, "What a test may bound in time").
            #expect(status.ok && status.answered < openEnded, "\(status), the open returned at \(openEnded)")
            #expect(!status.loans && status.activity == "active", "during the hold: \(status)")
            let recorded = Self.lines(log)
            #expect(recorded.map { $0.split(separator: " ").prefix(2).joined(separator: " ") } == ["start active", "end active"], "\(recorded)\n\(daemon.stderr)")
            // The open took the hook's second and the settle's 0.3 s, and ended silently.
            #expect(open.elapsed >= .milliseconds(1290), "\(open)\n\(daemon.stderr)")
            // At most --power-on-wait (5s here): the longest a player is held (docs/usage.md), the
            // requirement; 3 s was the hook's second and the settle with a quiet machine's margin.
            #expect(open.elapsed < Duration.seconds(5).underSanitizer, "\(open)")
            #expect(!open.stderr.contains("keepalived"), "\(open.stderr)")
            #expect(daemon.stderr.contains("the player's open goes on: the power is on"), "\(daemon.stderr)")

            // The same active period: the next open (a track of another format) is not held.
            let next = try await setup.open("keepalived-card0", socket: socket)
            // Not held: shorter than the hold the first open had (at least the hook's 1 s and the
            // 0.3 s settle), sanitizer or not: the bound says "not held", never how fast an open
            // is (the 500 ms it was is a busy machine's to break; CONTRIBUTING, "What a test may
            // bound in time").
            #expect(next.elapsed < .milliseconds(1250), "\(next)")
            #expect(Self.lines(log).count == 2, "on-active once per active period: \(Self.lines(log))")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("keepalived stopped during a player's hold: the player is answered ok once keepalived's output is closed, never left to a closed socket")
        func stopDuringHold() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("power-stop")
            let log = directory.appendingPathComponent("power.log")
            // Still running at the stop, which waits for it (bounded) after answering the player.
            let hook = try Self.slowHook(in: directory, log: log, sleep: "3")
            let (daemon, client) = try await Self.daemonWithRelease(["--on-active", hook, "--power-on-wait", "20s"], in: directory)
            let interim = try #require(client.readLine(), "no interim line")
            #expect(interim.contains(#""wait":"#), "\(interim)")
            try await waitUntil("on-active to start", timeout: .seconds(3).underSanitizer) { Self.lines(log).count >= 1 }
            // systemctl stop, or the first half of a restart, in the middle of the hold.
            daemon.signal(SIGTERM)
            let final = try #require(client.readLine(), "the player's connection closed without an answer:\n\(daemon.stderr)")
            #expect(final.contains(#""ok":true"#), "\(final)")
            #expect(try await daemon.waitForExit(timeout: .seconds(15).underSanitizer) == 0, "\(daemon.stderr)")
            // The answer went out once the output was closed: the card was free for the player.
            let lines = daemon.stderr.split(separator: "\n")
            let closed = try #require(lines.firstIndex { $0.contains("stopped device=hw:0,0") }, "\(daemon.stderr)")
            let answered = try #require(lines.firstIndex { $0.contains("a held player's open goes on now") }, "\(daemon.stderr)")
            #expect(closed < answered, "\(daemon.stderr)")
        }

        @Test("a stop with an on-idle queued behind a slow on-active: both run before keepalived exits")
        func stopWithIdlePending() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("idle-at-stop")
            let log = directory.appendingPathComponent("power.log")
            // Longer than the loan's open window (2 s) and the idle time (1 s) together.
            let hook = try Self.slowHook(in: directory, log: log, sleep: "6")
            let onIdle = try Self.recordingHook(in: directory, log: log)
            let (daemon, client) = try await Self.daemonWithRelease(["--on-active", hook, "--on-idle", onIdle, "--on-idle-after", "1s"], in: directory)
            _ = try #require(client.readLine(), "no reply to the release")
            // The loan ends unused after its open window; the output goes idle while on-active
            // still sleeps, so on-idle waits in the queue.
            try await daemon.waitForLog("idle device=hw:0,0", timeout: .seconds(10).underSanitizer)
            #expect(Self.lines(log).map { $0.split(separator: " ").prefix(2).joined(separator: " ") } == ["start active"], "\(Self.lines(log))")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(15).underSanitizer) == 0, "\(daemon.stderr)")
            #expect(Self.lines(log).map { $0.split(separator: " ").prefix(2).joined(separator: " ") } == ["start active", "end active", "idle hw:0,0"],
                    "\(Self.lines(log))\n\(daemon.stderr)")
        }

        @Test("two players opening within one hold: the second waits for the same power, and both are let go by it")
        func twoPlayersInOneHold() async throws {
            let setup = try PluginSetup("power-two")
            let log = setup.directory.appendingPathComponent("power.log")
            let hook = try Self.slowHook(in: setup.directory, log: log, sleep: "1.5")
            let socket = setup.socket
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:0,0", "--socket", socket, "--on-active", hook,
                                                   "--power-on-wait", "8s", "--on-idle-after", "30s"],
                                          directory: setup.directory, label: "keepalived")
            try await Self.waitForConnections(socket)
            // The first player's open, as setup.open runs it, in the background.
            let opener = try ALSAPluginBuild.get().opener.path
            let environment = setup.environment.merging(["KEEPALIVED_SOCKET": socket]) { $1 }
            let first = Task.detached { try await runCommand(opener, ["keepalived-card0", "playback"], environment: environment, timeout: .seconds(15)) }
            try await waitUntil("on-active to start", timeout: .seconds(5).underSanitizer) { Self.lines(log).count >= 1 }
            let second = try await setup.open("keepalived-card0", socket: socket)
            #expect(try await first.value.status == 0)
            #expect(Self.lines(log).count == 2, "on-active once: \(Self.lines(log))")
            // Each open went on from the hold, at the power's arrival: none was let go at once.
            let held = daemon.stderr.components(separatedBy: "a player waits while the power comes on").count - 1
            let letGo = daemon.stderr.components(separatedBy: "the player's open goes on: the power is on").count - 1
            #expect(held == 2 && letGo == 2, "\(second)\n\(daemon.stderr)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(10)) == 0, "\(daemon.stderr)")
        }

        @Test("--power-on-wait is a bound: a hook that takes longer holds the open that long, no longer, and is told of")
        func powerOnWaitBound() async throws {
            let directory = try TestPaths.makeTemporaryDirectory("power-bound")
            let log = directory.appendingPathComponent("power.log")
            let hook = try Self.slowHook(in: directory, log: log, sleep: "3")
            let socket = directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:0,0", "--socket", socket, "--on-active", hook, "--power-on-wait", "600ms"],
                                          directory: directory, label: "keepalived")
            try await Self.waitForConnections(socket)
            let client = try UnixClient(connectingTo: socket)
            let asked = ContinuousClock.now
            client.send(#"{"request":"release","card":0,"device":0,"program":"mpd"}"# + "\n")
            let interim = try #require(client.readLine(), "no interim line")
            let wait = (try JSONSerialization.jsonObject(with: Data(interim.utf8)) as? [String: Any])?["wait"] as? Int
            #expect(wait.map { (600...900).contains($0) } == true, "\(interim)")
            let final = try #require(client.readLine(), "no reply after the hold")
            let took = ContinuousClock.now - asked
            #expect(final.contains(#""released":["hw:0,0"]"#) && final.contains(#""ok":true"#), "\(final)")
            // Requirement: held for --power-on-wait (600ms) and no longer (docs/usage.md); margin
            // 0.9 s, stretched under a sanitizer.
            #expect(took >= .milliseconds(590) && took < Duration.milliseconds(1500).underSanitizer, "\(took)")
            try await daemon.waitForLog("--on-active still runs at --power-on-wait's end", timeout: .seconds(2))
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(8)) == 0, "\(daemon.stderr)")
        }

        @Test("bad hook options: exit 64 naming the option", arguments: [
            (["--on-active", ""], "--on-active"),
            (["--on-idle", "'unclosed"], "--on-idle"),
            (["--on-idle-after", "0s"], "--on-idle-after must be at least 1s"),
            (["--on-idle-after", "soon"], "--on-idle-after"),
            (["--hook-timeout", "10ms"], "--hook-timeout must be at least 100ms"),
            (["--power-on-wait", "5s"], "--power-on-wait holds a player's open while the power comes on: give --on-active (the command that switches it on) or --cec (the receiver woken over HDMI-CEC)"),
            (["--on-active", "true", "--power-on-wait", "50ms"], "--power-on-wait must be at least 100ms"),
            (["--on-active", "true", "--power-on-wait", "31s"], "--power-on-wait must be at most 30s"),
            (["--on-active", "true", "--power-on-wait", "later"], "--power-on-wait"),
            (["--on-active", "true", "--power-on-settle", "1s"], "--power-on-settle is part of --power-on-wait"),
            (["--on-active", "true", "--power-on-wait", "5s", "--power-on-settle", "soon"], "--power-on-settle"),
        ])
        func badOptions(arguments: [String], message: String) async throws {
            let result = try await runCommand(binary, ["run", "-d", "null", "--socket", "/tmp/keepalived-activity-bad.sock"] + arguments, timeout: .seconds(10))
            #expect(result.status == 64, "\(result)")
            #expect(result.stderr.contains(message), "\(result.stderr)")
        }
    }
}
