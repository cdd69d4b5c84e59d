import Foundation
import TestSupport
import Testing

/// The fault-injecting ALSA test PCM (Tests/Fixtures/faulty-pcm) set up for one test: the plug-in
/// built once per test run, a private HOME whose `.asoundrc` defines the devices, and a state
/// directory per device where the plug-in logs events, records audio and takes commands.
///
/// Devices: `faulty` (resumes from a suspend), `faulty-noresume` (cannot resume: only prepare
/// brings it back) and `faulty-ring` (its dump says it is a card's hardware, so keepalived plays
/// it as a ring loop, which it underruns after one ring), each with its own state directory.
final class FaultyDevice: @unchecked Sendable {
    let directory: URL
    let home: URL
    /// Where the spawned keepalived puts its control socket, so tests never collide.
    let socket: URL

    init() throws {
        directory = try TestPaths.makeTemporaryDirectory("faulty")
        home = directory.appendingPathComponent("home")
        socket = directory.appendingPathComponent("control.sock")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let library = try Self.pluginLibrary()
        let config = """
            pcm_type.faulty { lib "\(library.path)" }
            pcm.faulty { type faulty state "\(stateDirectory("faulty").path)" }
            pcm.faulty-noresume { type faulty state "\(stateDirectory("faulty-noresume").path)" resume false }
            pcm.faulty-ring { type faulty state "\(stateDirectory("faulty-ring").path)" dump "Hardware PCM card 31 'Faulty' device 0 subdevice 0" }

            """
        try config.write(to: home.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
    }

    deinit {
        TestPaths.removeTemporaryDirectory(directory)
    }

    /// The environment for keepalived: this HOME's ALSA config and its own control socket.
    var environment: [String: String] {
        ["HOME": home.path, "KEEPALIVED_SOCKET": socket.path, "XDG_RUNTIME_DIR": directory.path]
    }

    func stateDirectory(_ device: String) -> URL {
        directory.appendingPathComponent("state-\(device)")
    }

    /// Starts `keepalived run -d DEVICE` with `arguments` added.
    func launch(_ device: String = "faulty", _ arguments: [String] = []) throws -> ChildProcess {
        try ChildProcess(TestPaths.keepalivedBinary.path, ["run", "-d", device] + arguments,
                         environment: environment, directory: directory, label: "keepalived")
    }

    // MARK: - Commands

    /// Sends control commands the way the plug-in expects: written to a temp file, then renamed.
    func control(_ commands: String..., device: String = "faulty") throws {
        let state = stateDirectory(device)
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let temporary = state.appendingPathComponent(".control.test")
        try (commands.joined(separator: "\n") + "\n").write(to: temporary, atomically: false, encoding: .utf8)
        guard rename(temporary.path, state.appendingPathComponent("control").path) == 0 else {
            throw CocoaError(.fileWriteUnknown)
        }
    }

    /// Makes the device absent for new opens (what `vanish` leaves behind), before any handle
    /// exists to take a command.
    func markVanished(device: String = "faulty") throws {
        let state = stateDirectory(device)
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        try "1\n".write(to: state.appendingPathComponent("vanished"), atomically: true, encoding: .utf8)
    }

    /// Brings a vanished device back now and returns the CLOCK_MONOTONIC time it happened.
    ///
    /// This is exactly what the plug-in's `appear` command does (unlink `vanished`), but done by
    /// the test: a command is only taken by the next callback or open, so `appear` would make
    /// the device come back at the moment keepalived next tries, which measures nothing.
    @discardableResult
    func appear(device: String = "faulty") -> UInt64 {
        let now = monotonicNanoseconds()
        unlink(stateDirectory(device).appendingPathComponent("vanished").path)
        return now
    }

    /// The pending refusal's deadline (CLOCK_MONOTONIC ns), from the plug-in's `refuse` file.
    func refusalDeadline(device: String = "faulty") -> UInt64? {
        guard let text = try? FileContents.text(stateDirectory(device).appendingPathComponent("refuse")) else { return nil }
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        return fields.count >= 2 ? UInt64(fields[1]) : nil
    }

    // MARK: - What the plug-in recorded

    /// One line of events.log: `NS EVENT [ARGS...] pid=PID h=N`.
    struct Event: Sendable, CustomStringConvertible {
        let time: UInt64
        let name: String
        let arguments: [String]
        let handle: Int

        var description: String { "\(time) \(name) \(arguments.joined(separator: " ")) h=\(handle)" }
        var isWrite: Bool { name == "write" }
    }

    func events(device: String = "faulty") -> [Event] {
        let url = stateDirectory(device).appendingPathComponent("events.log")
        guard let text = try? FileContents.text(url) else { return [] }
        return Self.parse(text)
    }

    static func parse(_ text: Substring) -> [Event] {
        text.split(separator: "\n").compactMap { line in
            var words = line.split(separator: " ")
            guard words.count >= 4, let time = UInt64(words[0]) else { return nil }
            guard let handleWord = words.last, handleWord.hasPrefix("h="), let handle = Int(handleWord.dropFirst(2)) else { return nil }
            words.removeLast(2)  // pid=, h=
            return Event(time: time, name: String(words[1]), arguments: words.dropFirst(2).map(String.init), handle: handle)
        }
    }

    static func parse(_ text: String) -> [Event] { parse(Substring(text)) }

    /// Every sample the device received, as S16_LE (the format the embedded clip negotiates).
    func capturedSamples(device: String = "faulty") throws -> [Int16] {
        let data = try FileContents.data(stateDirectory(device).appendingPathComponent("capture.raw"))
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    func capturedBytes(device: String = "faulty") -> Int {
        let path = stateDirectory(device).appendingPathComponent("capture.raw").path
        return ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// The number of lines in the events log (cheap enough to poll).
    func eventCount(_ name: String, device: String = "faulty") -> Int {
        events(device: device).filter { $0.name == name }.count
    }

    // MARK: - Building the plug-in

    private static let built = TestLock<Result<URL, BuildFailed>?>(nil)

    /// Builds libasound_module_pcm_faulty.so once per test process, into a temp directory.
    static func pluginLibrary() throws -> URL {
        try built.withLock { cached in
            if let cached { return try cached.get() }
            let result: Result<URL, BuildFailed>
            removeStaleBuilds()
            do {
                let output = FileManager.default.temporaryDirectory.appendingPathComponent("\(buildPrefix)\(getpid())")
                let script = TestPaths.repositoryRoot.appendingPathComponent("Tests/Fixtures/faulty-pcm/build.sh")
                let build = try ChildProcess("/bin/sh", [script.path, output.path],
                                             directory: FileManager.default.temporaryDirectory, label: "build-faulty-pcm")
                let status = build.waitForExitBlocking(timeout: .seconds(60))
                let library = output.appendingPathComponent("libasound_module_pcm_faulty.so")
                if status == 0, FileManager.default.fileExists(atPath: library.path) {
                    result = .success(library)
                } else {
                    result = .failure(BuildFailed(log: build.stderr))
                }
                try? FileManager.default.removeItem(at: build.stdoutURL)
                try? FileManager.default.removeItem(at: build.stderrURL)
            } catch {
                result = .failure(BuildFailed(log: "\(error)"))
            }
            cached = result
            return try result.get()
        }
    }

    private static let buildPrefix = "keepalived-faulty-pcm-"

    /// Removes the plug-in builds of test processes that have exited (each run builds its own:
    /// a daemon of a concurrent run may have the other's loaded).
    private static func removeStaleBuilds() {
        let temporary = FileManager.default.temporaryDirectory
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [] where name.hasPrefix(buildPrefix) {
            guard let pid = pid_t(name.dropFirst(buildPrefix.count)), pid != getpid() else { continue }
            if kill(pid, 0) != 0, errno == ESRCH {
                try? FileManager.default.removeItem(at: temporary.appendingPathComponent(name))
            }
        }
    }

    struct BuildFailed: Error, CustomStringConvertible {
        let log: String
        var description: String { "cannot build the faulty-pcm plug-in (needs cc and libasound2-dev):\n\(log)" }
    }
}

/// A tiny lock around a value, for test support shared across tests.
final class TestLock<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of the plug-in's events.log.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Milliseconds between two CLOCK_MONOTONIC readings.
func milliseconds(from start: UInt64, to end: UInt64) -> Double {
    (Double(end) - Double(start)) / 1e6
}

// MARK: - keepalived's log

/// The `recovered` lines of a keepalived log, parsed.
struct RecoveryLine {
    let reason: String
    let downtime: Double
    let count: Int
    let device: String
}

func recoveryLines(_ log: String) -> [RecoveryLine] {
    log.split(separator: "\n").filter { $0.contains(" recovered ") }.compactMap { line in
        var fields: [String: String] = [:]
        for word in line.split(separator: " ") {
            let parts = word.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        guard let reason = fields["reason"], let downtimeText = fields["downtime"], downtimeText.hasSuffix("s"),
              let downtime = Double(downtimeText.dropLast()), let count = Int(fields["count"] ?? ""),
              let device = fields["device"] else { return nil }
        return RecoveryLine(reason: reason, downtime: downtime, count: count, device: device)
    }
}

/// The recovery counts by reason that `keepalived status --json` reports for the first output,
/// or nil when this build has no `status` command.
func statusRecoveries(socket: URL, environment: [String: String]) async throws -> [String: Int]? {
    let help = try await runCommand(TestPaths.keepalivedBinary.path, ["--help"])
    guard help.stdout.contains("status") || help.stderr.contains("status") else { return nil }
    let result = try await runCommand(TestPaths.keepalivedBinary.path, ["status", "--json", "--socket", socket.path],
                                      environment: environment, timeout: .seconds(5))
    #expect(result.status == 0, "keepalived status failed: \(result.stderr)")
    let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
    let outputs = object?["outputs"] as? [[String: Any]]
    return outputs?.first?["recoveriesByReason"] as? [String: Int] ?? [:]
}
