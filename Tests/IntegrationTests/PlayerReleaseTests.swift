import Foundation
import TestSupport
import Testing

extension Integration {
    /// The control socket's `release` (what the `keepalived:` PCM sends from a player's open),
    /// against the real daemon. This machine has no sound card: `hw:0,0` is an output that waits
    /// for its card, which is enough for the daemon's side (which outputs close, who is named,
    /// when they come back, who may ask); the kernel's side (a real player, a real card) is the
    /// VM's `69-box-mpd` scenario.
    @Suite("a player's release of a card device")
    struct PlayerReleaseTests {
        let directory: URL
        let socketPath: String
        let binary = TestPaths.keepalivedBinary.path

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("release")
            chmod(directory.path, 0o755)
            // Made here, open to others: --socket names it, so the daemon leaves its mode alone.
            mkdir(directory.appendingPathComponent("rt").path, 0o755)
            chmod(directory.appendingPathComponent("rt").path, 0o755)
            socketPath = directory.appendingPathComponent("rt/control.sock").path
        }

        func launchDaemon(_ extra: [String] = []) async throws -> ChildProcess {
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:0,0", "-d", "null", "--socket", socketPath] + extra,
                                          directory: directory, label: "keepalived")
            try await waitUntil("both outputs in the status", timeout: .seconds(5)) { (try? outputs())?.count == 2 }
            return daemon
        }

        func status() throws -> [String: Any] {
            let reply = try UnixClient(connectingTo: socketPath).request("status")
            return try #require(reply["status"] as? [String: Any])
        }

        func outputs() throws -> [String] {
            try (status()["outputs"] as? [[String: Any]] ?? []).compactMap { $0["device"] as? String }
        }

        /// An output's state and reason as status --json gives them: `paused (lent)`.
        func state(of device: String) throws -> String? {
            let output = (try status()["outputs"] as? [[String: Any]] ?? []).first { $0["device"] as? String == device }
            guard let state = output?["state"] as? String else { return nil }
            return (output?["reason"] as? String).map { "\(state) (\($0))" } ?? state
        }

        func loans() throws -> [[String: Any]] { try status()["loans"] as? [[String: Any]] ?? [] }

        func release(_ client: UnixClient, card: Int, device: Int, program: String = "test-player") throws -> [String: Any] {
            client.send(#"{"request":"release","card":\#(card),"device":\#(device),"program":"\#(program)"}"# + "\n")
            let line = try #require(client.readLine(), "no reply to the release")
            return try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
        }

        @Test("a release closes the outputs on that card device only, names the player in status, and they come back when it never opens it")
        func releaseAndReturn() async throws {
            let daemon = try await launchDaemon()
            let client = try UnixClient(connectingTo: socketPath)
            let reply = try release(client, card: 0, device: 0)
            #expect(reply["ok"] as? Bool == true, "\(reply)")
            #expect(reply["released"] as? [String] == ["hw:0,0"])
            // Held closed for the loan, still configured: a reload or rescan cannot reopen it.
            #expect(try outputs() == ["hw:0,0", "null"])
            #expect(try state(of: "hw:0,0") == "paused (lent)")
            let loan = try #require(try loans().first)
            #expect(loan["pid"] as? Int == Int(getpid()))
            #expect(loan["program"] as? String == "test-player")
            #expect(loan["state"] as? String == "lent")
            #expect(loan["pcm"] as? String == "hw:CARD=0,DEV=0")
            #expect(loan["outputs"] as? [String] == ["hw:0,0"])
            let text = try await runCommand(binary, ["status", "--socket", socketPath])
            #expect(text.stdout.contains("lent: hw:CARD=0,DEV=0 to test-player (pid \(getpid())), opening it"), "\(text.stdout)")

            // Asked again, or for a device keepalived does not play on: nothing more closes.
            #expect(try release(client, card: 0, device: 0)["released"] as? [String] == [])
            #expect(try release(client, card: 0, device: 1)["released"] as? [String] == [])
            #expect(try loans().count == 1)

            // This "player" never opens the device: it comes back when its window ends (2 s).
            try await waitUntil("the loan to end", timeout: .seconds(5)) { (try? loans())?.isEmpty == true }
            try await waitUntil("hw:0,0 no longer held", timeout: .seconds(2)) { (try? state(of: "hw:0,0")) != "paused (lent)" }
            #expect(daemon.stderr.contains("released a card device for a player"), "\(daemon.stderr)")
            // Logged just after the output is resumed (which the wait above saw): a moment later
            // under a sanitizer.
            try await daemon.waitForLog("took a card device back from its player", timeout: .seconds(2).underSanitizer)
            #expect(daemon.stderr.contains("because=its player did not open it within its window"), "\(daemon.stderr)")
            #expect(daemon.isRunning)
        }

        @Test("a player that dies gives the device back without waiting for its window")
        func deadPlayer() async throws {
            let daemon = try await launchDaemon()
            let script = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                s.sendall(b'{"request":"release","card":0,"device":0,"program":"short-lived"}\\n')
                print(s.makefile().readline().strip())
                """
            let result = try await runCommand("/usr/bin/python3", ["-c", script, socketPath])
            #expect(result.stdout.contains(#""released":["hw:0,0"]"#), "\(result.stdout) \(result.stderr)")
            try await waitUntil("the dead player's loan to end", timeout: .seconds(5)) { (try? loans())?.isEmpty == true }
            try await waitUntil("hw:0,0 back", timeout: .seconds(2)) { (try? state(of: "hw:0,0")) != "paused (lent)" }
            // Taken back because its player is gone, not at the end of its window (2 s): the
            // daemon's own reason, which no scheduler's delay can change (a stopwatch here could
            // not tell a look made late from a window waited out).
            try await daemon.waitForLog("took a card device back from its player", timeout: .seconds(2).underSanitizer)
            #expect(daemon.stderr.contains("because=its player is gone"), "\(daemon.stderr)")
            #expect(daemon.isRunning)
        }

        @Test("a release whose player hung up before it was read is not applied: the output keeps playing")
        func hungUpPlayer() async throws {
            let daemon = try await launchDaemon()
            // The player's open gave up (its 200 ms passed) and closed its socket.
            let script = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                s.sendall(b'{"request":"release","card":0,"device":0,"program":"gave-up"}\\n')
                s.close()
                """
            // Stopped, the daemon reads nothing: the player's request and its hang-up are both
            // there when it goes on, as when its control thread was held up past 200 ms.
            kill(daemon.pid, SIGSTOP)
            let sent = try await runCommand("/usr/bin/python3", ["-c", script, socketPath])
            kill(daemon.pid, SIGCONT)
            #expect(sent.status == 0, "\(sent.stderr)")
            try await waitUntil("the daemon to log the dropped release", timeout: .seconds(3)) {
                daemon.stderr.contains("a player's release came after it stopped waiting: not applied")
            }
            #expect(try loans().isEmpty)
            #expect(try state(of: "hw:0,0") != "paused (lent)")
            #expect(!daemon.stderr.contains("released a card device for a player"), "\(daemon.stderr)")
            #expect(daemon.isRunning)
        }

        @Test("a release during a reload that waits seconds for a sound server is answered at once; the reload's reply comes after")
        func releaseDuringSlowReload() async throws {
            // A sound server that accepts connections and never answers: the reload's new
            // selection waits for its first answer (up to 2 s) on the main loop.
            let serverPath = directory.appendingPathComponent("rt/silent-pulse").path
            let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(listener) }
            #expect(withUnixAddress(serverPath) { bind(listener, $0, $1) } == 0)
            #expect(listen(listener, 16) == 0)
            let options = directory.appendingPathComponent("options.conf")
            try "KEEPALIVED_OPTIONS=\"-d hw:0,0 -d null\"\n".write(to: options, atomically: true, encoding: .utf8)
            let daemon = try ChildProcess(binary, ["run", "--config", options.path, "--socket", socketPath],
                                          environment: ["PULSE_SERVER": "unix:\(serverPath)"], directory: directory, label: "keepalived")
            try await waitUntil("both outputs in the status", timeout: .seconds(5)) { (try? outputs())?.count == 2 }
            try "KEEPALIVED_OPTIONS=\"-d hw:0,0 -d null --digital\"\n".write(to: options, atomically: true, encoding: .utf8)
            let reloader = try UnixClient(connectingTo: socketPath)
            let asked = ContinuousClock.now
            reloader.send(#"{"request":"reload"}"# + "\n")
            try await Task.sleep(for: .milliseconds(300))
            let player = try UnixClient(connectingTo: socketPath)
            let releaseAsked = ContinuousClock.now
            let reply = try release(player, card: 0, device: 0)
            let releaseTook = ContinuousClock.now - releaseAsked
            #expect(reply["released"] as? [String] == ["hw:0,0"], "\(reply)")
            // Requirement: a player's release is answered within its 200 ms timeout
            // (docs/players.md), during a reload too; margin: the sanitizer's stretch.
            #expect(releaseTook < .milliseconds(200).underSanitizer, "the release took \(releaseTook)")
            #expect(try state(of: "hw:0,0") == "paused (lent)")
            let reloadReply = try #require(reloader.readLine(timeout: .seconds(10)), "no reply to the reload")
            let reloadTook = ContinuousClock.now - asked
            #expect(reloadReply.contains(#""ok":true"#), "\(reloadReply)")
            // The reload really was slow: else this shows nothing.
            #expect(reloadTook > .milliseconds(300) + releaseTook, "the reload took \(reloadTook)")
            #expect(daemon.isRunning)
        }

        @Test("a player's open racing keepalived's own front-door open: the control socket answers meanwhile, and the player gets the device once keepalived's open is closed")
        func releaseDuringOwnOpen() async throws {
            // keepalived's output hw:0,0 is a multi PCM whose first slave (the fault-injecting
            // test PCM) holds the open until the test lets it go, and whose second is a front
            // door (type keepalived, card 0 device 0) over a stand-in for the card, as on a box
            // whose `default` is the front door. keepalived's playback thread is inside that
            // open when the player's release comes; the control socket's thread used to join it
            // there, so it answered nobody (keepalived's own open, which asked it for a release
            // then, waited 10 s here: the player's 8 s ran out first; on a card, its open then
            // found keepalived there, busy). keepalived's own open asks nothing now (its process
            // is marked for the plug-in), and the socket's thread still must not wait on it.
            let states = try TestPaths.makeTemporaryDirectory("own-open")
            defer { try? FileManager.default.removeItem(at: states) }
            let gate = states.appendingPathComponent("gate"), standin = states.appendingPathComponent("standin")
            let faulty = try FaultyDevice.pluginLibrary()
            let setup = try PluginSetup("own-open", hardware: """
                pcm_type.faulty { lib "\(faulty.path)" }
                pcm.standin { type faulty state "\(standin.path)" }
                pcm.gate { type faulty state "\(gate.path)" }
                pcm.frontdoor { type keepalived card 0 device 0 slave "standin" }
                pcm.!hw {
                    @args [ CARD DEV SUBDEV ]
                    @args.CARD { type string }
                    @args.DEV { type integer }
                    @args.SUBDEV { type integer default -1 }
                    type multi
                    slaves.a { pcm "gate" channels 1 }
                    slaves.b { pcm "frontdoor" channels 1 }
                    bindings.0 { slave a channel 0 }
                    bindings.1 { slave b channel 0 }
                }
                """)
            try FileManager.default.createDirectory(at: gate, withIntermediateDirectories: true)
            let hold = gate.appendingPathComponent("hold-open")
            try "1\n".write(to: hold, atomically: true, encoding: .utf8)
            defer { unlink(hold.path) }
            let environment = setup.environment.merging(["KEEPALIVED_SOCKET": socketPath, "KEEPALIVED_RELEASE_TIMEOUT": "10000"]) { $1 }
            let daemon = try ChildProcess(binary, ["run", "-d", "hw:0,0", "--socket", socketPath], environment: environment,
                                          directory: directory, label: "keepalived")
            let gateLog = gate.appendingPathComponent("events.log")
            try await waitUntil("keepalived's open to be held", timeout: .seconds(10)) {
                ((try? FileContents.text(gateLog)) ?? "").contains("open-held")
            }
            let player = Task.detached {
                try await setup.open("frontdoor", socket: self.socketPath, extra: ["KEEPALIVED_RELEASE_TIMEOUT": "8000"])
            }
            // The control socket answers while the release waits for keepalived's open: status
            // (each request's reply within 2 s, or the socket's thread is held) shows the loan.
            try await waitUntil("the player's loan in status", timeout: .seconds(10)) {
                try loans().contains { $0["program"] as? String == "alsa-open" }
            }
            #expect(!((try? FileContents.text(gateLog)) ?? "").contains("open-released"), "answered while keepalived's open was still held")
            unlink(hold.path)
            let opened = try await player.value
            #expect(opened.result == 0, "\(opened)\n\(daemon.stderr)")
            #expect(!opened.stderr.contains("keepalived"), "answered, within the player's wait: \(opened.stderr)")
            // On the stand-in card: keepalived's own open, then its close, then the player's open.
            let lines = ((try? FileContents.text(standin.appendingPathComponent("events.log"))) ?? "").split(separator: "\n").map(String.init)
            let ours = "pid=\(daemon.pid) "
            let ownClose = lines.firstIndex { $0.contains(" close ") && $0.contains(ours) }
            let playerOpen = lines.firstIndex { $0.contains(" open ") && !$0.contains(ours) }
            #expect(lines.contains { $0.contains(" open ") && $0.contains(ours) }, "\(lines)")
            #expect(ownClose != nil && playerOpen != nil && ownClose! < playerOpen!, "keepalived's close before the player's open: \(lines)")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("a program that probes the front door (opens `default` and closes it without playing, as PortAudio's device list does) takes nothing from keepalived")
        func probeTakesNothing() async throws {
            // The box's `default` is the front door (as 60-keepalived-default.conf makes it) over a
            // stand-in for the card's own default, whose dump names card 0's device 0, and keepalived
            // keeps `default` awake through it, as on a Pi whose HDMI cannot mix.
            let states = try TestPaths.makeTemporaryDirectory("probe")
            defer { try? FileManager.default.removeItem(at: states) }
            let standin = states.appendingPathComponent("standin")
            let faulty = try FaultyDevice.pluginLibrary()
            let setup = try PluginSetup("probe", hardware: """
                pcm_type.faulty { lib "\(faulty.path)" }
                pcm.standin { type faulty state "\(standin.path)" dump "Hardware PCM card 0 'Standin' device 0 subdevice 0" }
                pcm.!default { type keepalived card 0 device 0 slave "standin" }
                """)
            let environment = setup.environment.merging(["KEEPALIVED_SOCKET": socketPath]) { $1 }
            let daemon = try ChildProcess(binary, ["run", "-d", "default", "--no-ring-loop", "--socket", socketPath], environment: environment,
                                          directory: directory, label: "keepalived")
            let events = standin.appendingPathComponent("events.log")
            try await waitUntil("keepalived to write to the stand-in", timeout: .seconds(10)) {
                ((try? FileContents.text(events)) ?? "").contains(" write ")
            }
            try await waitUntil("keepalived's output on card 0's device 0", timeout: .seconds(5)) {
                (try status()["outputs"] as? [[String: Any]] ?? []).contains { $0["hardware"] as? String == "hw:CARD=0,DEV=0" }
            }
            // The probe: open and close, nothing played (alsa-open opens non-blocking, as PortAudio).
            let probe = try await setup.open("default", socket: socketPath)
            #expect(probe.result == 0, "\(probe)")
            // A slave's chain is carried on keepalived's stream only where it ends on the card's
            // hw PCM (75-pi-standin's probe, in the VM: nothing taken). This stand-in is no hw
            // PCM, as a chain through dmix is none, and such a chain is handed the card: the plug-in
            // asks for the release in its open, the only moment it has (it hands the player the
            // slave's own handle, so it sees no hw_params), and the device must be free before the
            // slave can be opened. Recorded as a known issue: a fix for this path flips it.
            let lent = try loans()
            let lines = ((try? FileContents.text(events)) ?? "").split(separator: "\n")
            let ours = "pid=\(daemon.pid) "
            withKnownIssue("a probe of a front door whose chain cannot be carried takes the card from keepalived") {
                #expect(lent.isEmpty, "a probe is lent nothing")
                #expect(!lines.contains { $0.contains(" close ") && $0.contains(ours) }, "keepalived's stream was never closed: \(lines.suffix(8))")
                #expect(!daemon.stderr.contains("released a card device for a player"), "\(daemon.stderr)")
            }
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("partial and out-of-range releases: an error naming the field; the daemon goes on")
        func badReleases() async throws {
            let daemon = try await launchDaemon()
            let client = try UnixClient(connectingTo: socketPath)
            for (line, error) in [
                (#"{"request":"release","card":0}"#, #"bad release request: no \"device\" number"#),
                (#"{"request":"release","device":0}"#, #"bad release request: no \"card\" number"#),
                (#"{"request":"release","card":300,"device":0}"#, "bad release request: card 300 is outside 0...255"),
                (#"{"request":"release","card":0,"device":-2}"#, "bad release request: device -2 is outside 0...255"),
                (#"{"request":"release","card":"0","device":0}"#, "malformed request"),
            ] {
                client.send(line + "\n")
                let reply = try #require(client.readLine())
                #expect(reply.contains(#""ok":false"#) && reply.contains(error), "\(line) → \(reply)")
            }
            #expect(try loans().isEmpty)
            #expect(try outputs().sorted() == ["hw:0,0", "null"])
            #expect(daemon.isRunning)
        }

        @Test("--player-group: its members may ask for a release and nothing else; others cannot connect",
              .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && getgrnam("audio") != nil))
        func playerGroup() async throws {
            let daemon = try await launchDaemon(["--player-group", "audio"])
            var info = stat()
            #expect(stat(socketPath, &info) == 0)
            let audio = try #require(getgrnam("audio")).pointee.gr_gid
            #expect(info.st_mode & 0o777 == 0o660)
            #expect(info.st_gid == audio)
            let script = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                for line in sys.argv[2:]:
                    s.sendall(line.encode() + b'\\n'); print(s.makefile().readline().strip())
                """
            let asPlayer = ["--reuid=65534", "--regid=65534", "--groups=\(audio)", "/usr/bin/python3", "-c", script, socketPath,
                            #"{"request":"release","card":0,"device":0,"program":"mpd"}"#, #"{"request":"status"}"#, #"{"request":"stop"}"#]
            let player = try await runCommand("/usr/bin/setpriv", asPlayer)
            let lines = player.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 3, "\(player.stdout) \(player.stderr)")
            #expect(lines.first?.contains(#""released":["hw:0,0"]"#) == true, "\(lines)")
            #expect(lines.dropFirst().allSatisfy { $0.contains("permission denied: members of group audio may only ask for a release") }, "\(lines)")
            let stranger = try await runCommand("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script,
                                                                      socketPath, #"{"request":"release","card":0,"device":0}"#])
            #expect(stranger.status != 0)
            #expect(stranger.stderr.contains("PermissionError"), "\(stranger.stderr)")
            #expect(daemon.isRunning)
        }

        @Test("a member of the player group holding every connection it can: its own are capped, and another player's release is answered",
              .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && getgrnam("audio") != nil))
        func connectionFlood() async throws {
            let daemon = try await launchDaemon(["--player-group", "audio"])
            let audio = try #require(getgrnam("audio")).pointee.gr_gid
            let directory = try TestPaths.makeTemporaryDirectory("flood")
            chmod(directory.path, 0o777)  // the flood runs as nobody
            let marker = directory.appendingPathComponent("holding")
            // 40 connections, kept open; how many were refused at once, then hold the rest.
            let flood = """
                import os, socket, sys, time
                held, busy = [], 0
                for _ in range(40):
                    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(0.3)
                    try:
                        busy += b"too many control connections" in s.recv(4096)
                    except socket.timeout:
                        held.append(s)
                print(len(held), busy, flush=True)
                open(sys.argv[2], "w").close()
                time.sleep(6)
                """
            let flooding = Task.detached {
                try await runCommand("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--groups=\(audio)", "/usr/bin/python3", "-c", flood, socketPath, marker.path],
                                     timeout: .seconds(30))
            }
            try await waitUntil("the flood to hold its connections", timeout: .seconds(20).underSanitizer) { FileManager.default.fileExists(atPath: marker.path) }
            let release = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                s.sendall(b'{"request":"release","card":0,"device":0,"program":"mpd"}\\n'); print(s.makefile().readline().strip())
                """
            let player = try await runCommand("/usr/bin/setpriv", ["--reuid=65533", "--regid=65533", "--groups=\(audio)", "/usr/bin/python3", "-c", release, socketPath])
            #expect(player.stdout.contains(#""released":["hw:0,0"]"#), "another user's release during the flood: \(player.stdout) \(player.stderr)")
            let counts = try await flooding.value.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            #expect(counts == [4, 36], "held and refused: \(counts)")
            #expect(daemon.stderr.components(separatedBy: "too many of one user's").count == 2, "told once:\n\(daemon.stderr)")
            #expect(daemon.isRunning)
        }

        @Test("--player-group naming no group: exit 67, naming it")
        func unknownGroup() async throws {
            let result = try await runCommand(binary, ["run", "-d", "null", "--socket", socketPath, "--player-group", "no-such-group-here"])
            #expect(result.status == 67)
            #expect(result.stderr.contains("--player-group: no group named 'no-such-group-here'"), "\(result.stderr)")
        }
    }
}
