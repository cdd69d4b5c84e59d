import Foundation
import TestSupport
import Testing

extension Integration {
    @Suite("the control socket")
    struct ControlSocketTests {
        let directory: URL
        let socketPath: String
        let binary = TestPaths.keepalivedBinary.path

        init() throws {
            directory = try TestPaths.makeTemporaryDirectory("sock")
            chmod(directory.path, 0o755)
            socketPath = directory.appendingPathComponent("rt/control.sock").path
        }

        func launchDaemon() async throws -> ChildProcess {
            let daemon = try ChildProcess(binary, ["run", "-d", "null", "--socket", socketPath], directory: directory, label: "keepalived")
            try await daemon.waitForLog("playing")
            try await waitUntil("the control socket", timeout: .seconds(2)) { FileManager.default.fileExists(atPath: socketPath) }
            return daemon
        }

        func framesPlayed() throws -> Int {
            let reply = try UnixClient(connectingTo: socketPath).request("status")
            let status = try #require(reply["status"] as? [String: Any])
            let outputs = try #require(status["outputs"] as? [[String: Any]])
            return try #require(outputs.first?["framesPlayed"] as? Int)
        }

        /// The daemon still answers and its frame counter still advances.
        func expectPlayingAndAnswering(_ daemon: ChildProcess) async throws {
            #expect(daemon.isRunning)
            let before = try framesPlayed()
            try await waitUntil("frames played to advance past \(before)", timeout: .seconds(3)) { (try? framesPlayed()) ?? 0 > before }
        }

        @Test("the directory is 0700 and the socket 0600; status, stop and errors speak JSON lines")
        func modesAndProtocol() async throws {
            let daemon = try await launchDaemon()
            var info = stat()
            #expect(stat(directory.appendingPathComponent("rt").path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o700)
            #expect(stat(socketPath, &info) == 0)
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            #expect(info.st_mode & 0o777 == 0o600)

            let client = try UnixClient(connectingTo: socketPath)
            let status = try client.request("status")
            #expect(status["ok"] as? Bool == true)
            #expect((status["status"] as? [String: Any])?["pid"] as? Int == Int(daemon.pid))
            client.send("this is not json\n")
            let malformed = try #require(client.readLine())
            #expect(malformed.contains(#""ok":false"#) && malformed.contains("malformed request"), "\(malformed)")
            let unknown = try client.request("dance")
            #expect(unknown["ok"] as? Bool == false)
            #expect((unknown["error"] as? String)?.contains("unknown request") == true)
            let stop = try client.request("stop")
            #expect(stop["ok"] as? Bool == true)
            #expect(try await daemon.waitForExit(timeout: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("requests arrive as the socket delivers them: several in one read, one split byte by byte, nested JSON")
        func framing() async throws {
            let daemon = try await launchDaemon()
            let client = try UnixClient(connectingTo: socketPath)
            client.send(#"{"request":"status"}"# + "\n" + #"{"request":"dance"}"# + "\n" + "\n")
            let replies = (0..<3).compactMap { _ in client.readLine() }
            #expect(replies.count == 3)
            #expect(replies.first?.contains(#""ok":true"#) == true)
            #expect(replies.dropFirst().first?.contains("unknown request 'dance'") == true, "\(replies)")
            #expect(replies.last?.contains("malformed request") == true, "\(replies)")
            for byte in Array(#"{"request":"status","extra":[1,{"x":null}]}"#.utf8) + [0x0A] {
                _ = client.send([byte])
            }
            #expect(client.readLine()?.contains(#""ok":true"#) == true)
            // Deep nesting is refused by the JSON reader, not by a stack overflow.
            client.send(String(repeating: "[", count: 60_000) + "\n")
            #expect(client.readLine()?.contains("malformed request") == true)
            try await expectPlayingAndAnswering(daemon)
            #expect(try client.request("stop")["ok"] as? Bool == true)
            #expect(try await daemon.waitForExit(timeout: .seconds(2)) == 0, "log:\n\(daemon.stderr)")
        }

        @Test("another uid is refused, by the file modes and by SO_PEERCRED, and the daemon plays on",
              .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
        func otherUserRefused() async throws {
            let daemon = try await launchDaemon()
            // The binary must be reachable for the unprivileged user.
            let copy = directory.appendingPathComponent("keepalived-copy")
            try FileManager.default.copyItem(atPath: binary, toPath: copy.path)
            chmod(copy.path, 0o755)
            let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", copy.path, "status", "--json", "--socket", socketPath]

            let blocked = try await runCommand("/usr/bin/setpriv", asNobody)
            #expect(blocked.status != 0)
            #expect(blocked.stderr.contains("Permission denied") || blocked.stderr.contains("permission denied"), "\(blocked.stderr)")

            // Open the modes so the connection reaches the daemon: its peer check must refuse.
            chmod(directory.appendingPathComponent("rt").path, 0o755)
            chmod(socketPath, 0o666)
            let refused = try await runCommand("/usr/bin/setpriv", asNobody)
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("permission denied: only uid 0 or root"), "\(refused.stderr)")
            #expect(daemon.stderr.contains("refused a client"))
            let stopAttempt = try await runCommand("/usr/bin/setpriv", Array(asNobody.prefix(4)) + ["stop", "--socket", socketPath])
            #expect(stopAttempt.status == 1)
            try await expectPlayingAndAnswering(daemon)
        }

        @Test("1 MiB of garbage, an endless line and 200 simultaneous connections leave it playing and answering")
        func hostileClients() async throws {
            let daemon = try await launchDaemon()

            let garbage = try UnixClient(connectingTo: socketPath)
            var random = SystemRandomNumberGenerator()
            let noise = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &random) }
            garbage.send(noise)
            try await expectPlayingAndAnswering(daemon)

            let endless = try UnixClient(connectingTo: socketPath)
            let sent = endless.send([UInt8](repeating: UInt8(ascii: "a"), count: 256 * 1024))
            #expect(sent > 64 * 1024)
            let refusal = endless.readLine(timeout: .seconds(3))
            #expect(refusal?.contains("request too large") == true, "\(refusal ?? "nil")")
            try await expectPlayingAndAnswering(daemon)

            var crowd: [UnixClient] = []
            for _ in 0..<200 {
                if let client = try? UnixClient(connectingTo: socketPath) { crowd.append(client) }
            }
            #expect(crowd.count >= 100, "only \(crowd.count) connections were accepted")
            var answered = 0
            var turnedAway = 0
            for client in crowd {
                client.send(#"{"request":"status"}"# + "\n")
            }
            for client in crowd {
                guard let line = client.readLine(timeout: .seconds(3)) else { continue }
                if line.contains(#""ok":true"#) { answered += 1 } else if line.contains("busy") { turnedAway += 1 }
            }
            #expect(answered + turnedAway == crowd.count, "answered \(answered), busy \(turnedAway) of \(crowd.count)")
            #expect(answered > 0)
            crowd.removeAll()
            try await expectPlayingAndAnswering(daemon)

            // A slow client that never finishes its line is cut off, not waited for.
            let slow = try UnixClient(connectingTo: socketPath)
            slow.send(#"{"request":"sta"#)
            let timedOut = slow.readLine(timeout: .seconds(8))
            #expect(timedOut?.contains("timed out") == true, "\(timedOut ?? "nil")")
            try await expectPlayingAndAnswering(daemon)
            #expect(try await daemon.terminate(within: .seconds(1)) == 0, "log:\n\(daemon.stderr)")
            #expect(!FileManager.default.fileExists(atPath: socketPath))
        }
    }
}
