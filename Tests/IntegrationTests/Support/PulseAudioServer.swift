import Foundation

/// A private PulseAudio server with one null sink named `keep`, in its own runtime directory,
/// started for one test suite and killed at the end.
final class PulseAudioServer: @unchecked Sendable {
    let directory: URL
    let sinkName = "keep"
    private(set) var server: ChildProcess?

    /// The environment a client needs to reach this server (and only this one).
    var environment: [String: String] {
        [
            "XDG_RUNTIME_DIR": directory.path,
            "HOME": directory.path,
            "PULSE_SERVER": "unix:\(directory.path)/pulse/native",
            "PULSE_RUNTIME_PATH": "\(directory.path)/pulse",
        ]
    }

    init() throws {
        directory = try TestPaths.makeTemporaryDirectory("pulse")
        chmod(directory.path, 0o700)
    }

    static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: ChildProcess.which("pulseaudio"))
            && FileManager.default.isExecutableFile(atPath: ChildProcess.which("pactl"))
    }

    /// Starts the server and waits until it accepts clients.
    func start(suspendTimeout: Int = 1) async throws {
        server = try ChildProcess("pulseaudio", [
            "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit", "--log-target=stderr",
            "-L", "module-null-sink sink_name=\(sinkName) rate=44100",
            "-L", "module-native-protocol-unix",
            "-L", "module-suspend-on-idle timeout=\(suspendTimeout)",
        ], environment: environment, directory: directory, label: "pulseaudio")
        try await waitUntil("PulseAudio to accept clients", timeout: .seconds(10), every: .milliseconds(50)) {
            guard server?.isRunning == true else { throw ServerFailed(log: server?.stderr ?? "") }
            return sinkStateNow() != nil
        }
    }

    /// SIGKILLs the server, as a crash would.
    func kill() async throws {
        guard let server else { return }
        server.signal(SIGKILL)
        try await server.waitForExit(timeout: .seconds(5))
        self.server = nil
    }

    func stop() {
        server?.signal(SIGTERM)
        server = nil
    }

    /// The sink's state as `pactl list short sinks` shows it: RUNNING, IDLE or SUSPENDED.
    func sinkStateNow() -> String? {
        guard let text = commandOutput("pactl", ["list", "short", "sinks"], environment: environment) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "\t")
            if fields.count >= 5, fields[1] == sinkName { return String(fields[4]) }
        }
        return nil
    }

    /// The clients playing into the server now (`pactl list short sink-inputs`), or nil if it
    /// does not answer.
    func sinkInputCount() -> Int? {
        commandOutput("pactl", ["list", "short", "sink-inputs"], environment: environment)
            .map { $0.split(separator: "\n").count }
    }

    /// Records `seconds` of the sink's monitor as 16-bit mono 44.1 kHz samples.
    func recordMonitor(seconds: Double) async throws -> [Int16] {
        let recorder = try ChildProcess("parec", [
            "-d", "\(sinkName).monitor", "--raw", "--format=s16le", "--channels=1", "--rate=44100", "--latency-msec=50",
        ], environment: environment, directory: directory, label: "parec")
        let wanted = Int(seconds * 44100) * 2
        try await waitUntil("\(seconds) s from the monitor", timeout: .seconds(seconds * 3 + 5)) {
            (try? FileManager.default.attributesOfItem(atPath: recorder.stdoutURL.path)[.size] as? Int).flatMap { $0 } ?? 0 >= wanted
        }
        recorder.signal(SIGTERM)
        try await recorder.waitForExit(timeout: .seconds(5))
        let data = recorder.stdoutBytes.prefix(wanted)
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    deinit {
        server?.signal(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }

    struct ServerFailed: Error, CustomStringConvertible {
        let log: String
        var description: String { "pulseaudio exited early:\n\(log)" }
    }
}
