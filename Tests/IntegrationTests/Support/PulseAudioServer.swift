import Foundation
import TestSupport

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

    /// Starts the server and waits until it accepts clients. `sinks` are more null sinks, by
    /// name, with the properties a real device's sink has (`device.api`, `alsa.card`, …).
    func start(suspendTimeout: Int = 1, sinks: [(name: String, properties: [String: String])] = []) async throws {
        var arguments = [
            "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit", "--log-target=stderr",
            "-L", "module-null-sink sink_name=\(sinkName) rate=44100",
            "-L", "module-native-protocol-unix",
            "-L", "module-suspend-on-idle timeout=\(suspendTimeout)",
        ]
        for sink in sinks { arguments += ["-L", "module-null-sink " + Self.arguments(sink: sink.name, sink.properties)] }
        server = try ChildProcess("pulseaudio", arguments, environment: environment, directory: directory, label: "pulseaudio")
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

    /// A null sink's module arguments: its name and properties (values without spaces or quotes).
    static func arguments(sink name: String, _ properties: [String: String]) -> String {
        let list = properties.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return "sink_name=\(name) rate=44100" + (list.isEmpty ? "" : " sink_properties=\"\(list)\"")
    }

    /// Loads one more null sink while the server runs; returns its module's index.
    func loadSink(_ name: String, _ properties: [String: String]) throws -> Int {
        let arguments = Self.arguments(sink: name, properties).split(separator: " ", maxSplits: 1).map(String.init)
        guard let text = commandOutput("pactl", ["load-module", "module-null-sink"] + arguments, environment: environment),
              let index = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw ServerFailed(log: "pactl load-module \(name) failed") }
        return index
    }

    func unloadModule(_ index: Int) {
        _ = commandOutput("pactl", ["unload-module", "\(index)"], environment: environment)
    }

    /// `pactl list short sinks`: a row of tab-separated fields per sink (index, name, driver,
    /// sample spec, state); none when pactl fails.
    private func shortSinks() -> [[Substring]] {
        (commandOutput("pactl", ["list", "short", "sinks"], environment: environment) ?? "").split(separator: "\n").map { $0.split(separator: "\t") }
    }

    /// Every sink's state by name, as `pactl list short sinks` shows them.
    func sinkStates() -> [String: String] {
        var states: [String: String] = [:]
        for fields in shortSinks() where fields.count >= 5 { states[String(fields[1])] = String(fields[4]) }
        return states
    }

    /// Each sink's rate as `pactl list short sinks` shows it now (PulseAudio moves an idle sink
    /// to the rate of the stream that starts it).
    func sinkSampleRates() -> [String: Int] {
        var rates: [String: Int] = [:]
        for fields in shortSinks() where fields.count >= 4 {
            guard let spec = fields[3].split(separator: " ").last, spec.hasSuffix("Hz") else { continue }
            rates[String(fields[1])] = Int(spec.dropLast(2))
        }
        return rates
    }

    /// The sink's state as `pactl list short sinks` shows it: RUNNING, IDLE or SUSPENDED.
    func sinkStateNow() -> String? {
        shortSinks().first { $0.count >= 5 && $0[1] == sinkName }.map { String($0[4]) }
    }

    /// The sink each stream plays on, by stream index (`pactl list short sink-inputs`).
    func streamSinks() -> [Int: String] {
        var names: [Substring: String] = [:]
        for line in (commandOutput("pactl", ["list", "short", "sinks"], environment: environment) ?? "").split(separator: "\n") {
            let fields = line.split(separator: "\t")
            if fields.count >= 2 { names[fields[0]] = String(fields[1]) }
        }
        var sinks: [Int: String] = [:]
        for line in (commandOutput("pactl", ["list", "short", "sink-inputs"], environment: environment) ?? "").split(separator: "\n") {
            let fields = line.split(separator: "\t")
            if fields.count >= 2, let index = Int(fields[0]) { sinks[index] = names[fields[1]] }
        }
        return sinks
    }

    /// Each stream playing into the server: its `application.name` and `media.name`
    /// (`pactl -f json list sink-inputs`).
    func streamNames() -> [(application: String, media: String)] {
        guard let text = commandOutput("pactl", ["-f", "json", "list", "sink-inputs"], environment: environment),
              let inputs = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] else { return [] }
        return inputs.map { input in
            let properties = input["properties"] as? [String: Any] ?? [:]
            return (properties["application.name"] as? String ?? "", properties["media.name"] as? String ?? "")
        }
    }

    /// Each stream's `key` property, by stream index, where it has one (`pactl -f json list sink-inputs`).
    func streamProperties(_ key: String) -> [Int: String] {
        guard let text = commandOutput("pactl", ["-f", "json", "list", "sink-inputs"], environment: environment),
              let inputs = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] else { return [:] }
        var values: [Int: String] = [:]
        for input in inputs {
            if let index = input["index"] as? Int, let value = (input["properties"] as? [String: Any])?[key] as? String { values[index] = value }
        }
        return values
    }

    /// The clients playing into the server now (`pactl list short sink-inputs`), or nil if it
    /// does not answer.
    func sinkInputCount() -> Int? {
        commandOutput("pactl", ["list", "short", "sink-inputs"], environment: environment)
            .map { $0.split(separator: "\n").count }
    }

    /// Records `seconds` of a sink's monitor (``sinkName``'s by default) as 16-bit 44.1 kHz
    /// samples, interleaved when `channels` is 2.
    func recordMonitor(seconds: Double, sink: String? = nil, channels: Int = 1) async throws -> [Int16] {
        let recorder = try ChildProcess("parec", [
            "-d", "\(sink ?? sinkName).monitor", "--raw", "--format=s16le", "--channels=\(channels)", "--rate=44100", "--latency-msec=50",
        ], environment: environment, directory: directory, label: "parec")
        let wanted = Int(seconds * 44100) * 2 * channels
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
        TestPaths.removeTemporaryDirectory(directory)
    }

    struct ServerFailed: Error, CustomStringConvertible {
        let log: String
        var description: String { "pulseaudio exited early:\n\(log)" }
    }
}
