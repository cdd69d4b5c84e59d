import Foundation
import TestSupport

/// A private PipeWire: its own session bus, `pipewire`, `wireplumber` and a null sink named
/// `keep`, in a private runtime directory, plus a HOME whose `.asoundrc` defines the `pipewire`
/// ALSA device with PipeWire's ALSA plug-in.
///
/// Debian 12's `pipewire-alsa` conflicts with `pulseaudio`, which the other tests need, so the
/// plug-in is not installed: its .deb is fetched with `apt-get download` (scripts/setup --test
/// does it ahead of time) into `.build/test-cache/pipewire-alsa` and unpacked with `dpkg-deb -x`.
final class PipeWireServer: @unchecked Sendable {
    let directory: URL
    let sinkName = "keep"
    private var bus: ChildProcess?
    private var busAddress = ""
    private var pipewire: ChildProcess?
    private var wireplumber: ChildProcess?
    private var pulseServer: ChildProcess?

    static var isInstalled: Bool {
        ["pipewire", "wireplumber", "pw-cli", "pw-dump", "dbus-daemon"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: ChildProcess.which($0))
        }
    }

    /// `allowedRates`: PipeWire's `default.clock.allowed-rates` (a drop-in in this HOME's
    /// `.config/pipewire/pipewire.conf.d`), so the graph runs at the streams' own rates.
    init(allowedRates: [Int]? = nil) throws {
        directory = try TestPaths.makeTemporaryDirectory("pipewire")
        chmod(directory.path, 0o700)
        if let allowedRates {
            let dropIns = directory.appendingPathComponent(".config/pipewire/pipewire.conf.d")
            try FileManager.default.createDirectory(at: dropIns, withIntermediateDirectories: true)
            let rates = allowedRates.map(String.init).joined(separator: " ")
            try "context.properties = { default.clock.allowed-rates = [ \(rates) ] }\n"
                .write(to: dropIns.appendingPathComponent("rates.conf"), atomically: true, encoding: .utf8)
        }
        let plugin = try Self.alsaPlugin()
        // Modeled on the package's /usr/share/alsa/alsa.conf.d/50-pipewire.conf, with its
        // defaults written out.
        let config = """
            pcm_type.pipewire { lib "\(plugin.path)" }
            pcm.pipewire {
                type pipewire
                server "pipewire-0"
                playback_node "-1"
                capture_node "-1"
                exclusive false
                role ""
                rate 0
                format ""
                channels 0
                period_bytes 0
                buffer_bytes 0
                hint { show on description "PipeWire Sound Server" }
            }

            """
        try config.write(to: directory.appendingPathComponent(".asoundrc"), atomically: true, encoding: .utf8)
    }

    deinit {
        for process in [pulseServer, wireplumber, pipewire, bus] { process?.signal(SIGKILL) }
        TestPaths.removeTemporaryDirectory(directory)
    }

    /// The environment of a client of this server (and only this one).
    var environment: [String: String] {
        [
            "XDG_RUNTIME_DIR": directory.path,
            "HOME": directory.path,
            "DBUS_SESSION_BUS_ADDRESS": busAddress,
            "PIPEWIRE_RUNTIME_DIR": directory.path,
        ]
    }

    /// Starts (or restarts) PipeWire and WirePlumber and creates the sink; returns once the sink
    /// exists, i.e. once a client's stream can play.
    func start() async throws {
        if bus == nil {
            // Its socket in the server's directory (the session default, /tmp, keeps a killed bus's).
            let bus = try ChildProcess("dbus-daemon", ["--session", "--nofork", "--print-address", "--address=unix:dir=\(directory.path)"],
                                       environment: environment, directory: directory, label: "dbus-daemon")
            self.bus = bus
            busAddress = try await waitFor("the session bus address", timeout: .seconds(10)) {
                guard bus.isRunning else { throw Failed(what: "dbus-daemon", log: bus.stderr) }
                let address = bus.stdout.split(separator: "\n").first.map(String.init) ?? ""
                return address.isEmpty ? nil : address
            }
        }
        let pipewire = try ChildProcess("pipewire", [], environment: environment, directory: directory, label: "pipewire")
        self.pipewire = pipewire
        try await waitUntil("PipeWire to accept clients", timeout: .seconds(10), every: .milliseconds(20)) {
            guard pipewire.isRunning else { throw Failed(what: "pipewire", log: pipewire.stderr) }
            return commandOutput("pw-cli", ["info", "0"], environment: environment, timeout: .seconds(2)) != nil
        }
        let wireplumber = try ChildProcess("wireplumber", [], environment: environment, directory: directory, label: "wireplumber")
        self.wireplumber = wireplumber
        guard commandOutput("pw-cli", ["create-node", "adapter",
            "{ factory.name=support.null-audio-sink node.name=\(sinkName) media.class=Audio/Sink object.linger=true audio.position=[FL FR] }"],
            environment: environment, timeout: .seconds(5)) != nil else { throw Failed(what: "pw-cli create-node", log: "") }
        try await waitUntil("the sink '\(sinkName)'", timeout: .seconds(10), every: .milliseconds(20)) {
            guard wireplumber.isRunning else { throw Failed(what: "wireplumber", log: wireplumber.stderr) }
            return dump()?.nodes.contains { $0.name == sinkName } == true
        }
    }

    /// One more null sink, with the properties a device's node has (`device.api`, `alsa.card`,
    /// …; values without spaces); returns once the graph shows it.
    func createSink(_ name: String, properties: [String: String]) throws {
        let extra = properties.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        guard commandOutput("pw-cli", ["create-node", "adapter",
            "{ factory.name=support.null-audio-sink node.name=\(name) media.class=Audio/Sink object.linger=true audio.position=[FL FR] \(extra) }"],
            environment: environment, timeout: .seconds(5)) != nil else { throw Failed(what: "pw-cli create-node \(name)", log: "") }
    }

    /// SIGKILLs PipeWire, as a crash would; WirePlumber loses it and exits (killed if it lingers).
    func kill() async throws {
        guard let pipewire else { return }
        pipewire.signal(SIGKILL)
        try await pipewire.waitForExit(timeout: .seconds(5))
        self.pipewire = nil
        if let wireplumber {
            do {
                try await wireplumber.waitForExit(timeout: .seconds(2))
            } catch {
                wireplumber.signal(SIGKILL)
                try await wireplumber.waitForExit(timeout: .seconds(5))
            }
            self.wireplumber = nil
        }
    }

    func stop() {
        for process in [pulseServer, wireplumber, pipewire, bus] { process?.signal(SIGTERM) }
        pulseServer = nil
        wireplumber = nil
        pipewire = nil
        bus = nil
    }

    // MARK: - Its PulseAudio protocol (what pipewire-pulse runs)

    /// The environment of a libpulse client of this server (``startPulseServer()``).
    var pulseEnvironment: [String: String] {
        environment.merging(["PULSE_SERVER": "unix:\(directory.path)/pulse/native", "PULSE_RUNTIME_PATH": "\(directory.path)/pulse"]) { $1 }
    }

    /// Starts PipeWire's PulseAudio protocol server, as pipewire-pulse does (`pipewire -c
    /// pipewire-pulse.conf`), from the tests' own copy of that configuration
    /// (Tests/Fixtures/pipewire-pulse): Debian 12's pipewire-pulse package conflicts with
    /// pulseaudio, but the module it loads ships with libpipewire-0.3-modules.
    /// Returns once a libpulse client sees the sink.
    func startPulseServer() async throws {
        let config = TestPaths.repositoryRoot.appendingPathComponent("Tests/Fixtures/pipewire-pulse/pipewire-pulse.conf")
        let server = try ChildProcess("pipewire", ["-c", config.path], environment: environment, directory: directory, label: "pipewire-pulse")
        pulseServer = server
        try await waitUntil("pipewire-pulse to show the sink", timeout: .seconds(10), every: .milliseconds(50)) {
            guard server.isRunning else { throw Failed(what: "pipewire -c pipewire-pulse.conf", log: server.stderr) }
            return commandOutput("pactl", ["list", "short", "sinks"], environment: pulseEnvironment)?.contains(sinkName) == true
        }
    }

    static var hasPulseModule: Bool {
        ["/usr/lib/x86_64-linux-gnu/pipewire-0.3", "/usr/lib/aarch64-linux-gnu/pipewire-0.3", "/usr/lib/pipewire-0.3"].contains {
            FileManager.default.fileExists(atPath: "\($0)/libpipewire-module-protocol-pulse.so")
        }
    }

    // MARK: - What the graph shows

    struct Node {
        let id: Int
        let name: String
        let mediaClass: String
        let applicationName: String
        let state: String
    }

    struct Graph {
        let nodes: [Node]
        /// Active links as (output node, input node).
        let links: [(Int, Int)]
    }

    /// The graph as `pw-dump` shows it, or nil if the server does not answer.
    func dump() -> Graph? {
        guard let text = commandOutput("pw-dump", [], environment: environment, timeout: .seconds(3)),
              let objects = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] else { return nil }
        var nodes: [Node] = []
        var links: [(Int, Int)] = []
        for object in objects {
            let type = object["type"] as? String ?? ""
            let info = object["info"] as? [String: Any] ?? [:]
            let id = object["id"] as? Int ?? -1
            if type.hasSuffix("Interface:Node") {
                let props = info["props"] as? [String: Any] ?? [:]
                nodes.append(Node(id: id, name: props["node.name"] as? String ?? "", mediaClass: props["media.class"] as? String ?? "",
                                  applicationName: props["application.name"] as? String ?? "", state: info["state"] as? String ?? ""))
            } else if type.hasSuffix("Interface:Link"), info["state"] as? String == "active",
                      let output = info["output-node-id"] as? Int, let input = info["input-node-id"] as? Int {
                links.append((output, input))
            }
        }
        return Graph(nodes: nodes, links: links)
    }

    /// Whether a playback stream of `application` runs into the sink through an active link.
    /// A property of the first stream node of `application` (`node.force-rate`), as `pw-dump`
    /// shows it; nil when there is no such node or it has no such property.
    func streamProperty(application: String, _ key: String) -> String? {
        guard let text = commandOutput("pw-dump", [], environment: environment, timeout: .seconds(3)),
              let objects = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] else { return nil }
        for object in objects where (object["type"] as? String ?? "").hasSuffix("Interface:Node") {
            let props = (object["info"] as? [String: Any])?["props"] as? [String: Any] ?? [:]
            guard props["media.class"] as? String == "Stream/Output/Audio",
                  (props["application.name"] as? String ?? "").contains(application) else { continue }
            return props[key].map { "\($0)" }
        }
        return nil
    }

    func streamPlaysIntoSink(application: String, sink name: String? = nil) -> Bool {
        let name = name ?? sinkName
        guard let graph = dump(), let sink = graph.nodes.first(where: { $0.name == name }) else { return false }
        return graph.nodes.contains { node in
            node.mediaClass == "Stream/Output/Audio" && node.applicationName.contains(application) && node.state == "running"
                && graph.links.contains { $0.0 == node.id && $0.1 == sink.id }
        }
    }

    // MARK: - The ALSA plug-in

    /// The unpacked `libasound_module_pcm_pipewire.so`, fetched on first use.
    static func alsaPlugin() throws -> URL {
        let cache = TestPaths.repositoryRoot.appendingPathComponent(".build/test-cache/pipewire-alsa")
        if let found = findPlugin(in: cache) { return found }
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        // The plug-in must match the installed libpipewire; ask for that version first.
        let version = commandOutput("dpkg-query", ["-W", "-f=${Version}", "libpipewire-0.3-0"])?.trimmingCharacters(in: .whitespacesAndNewlines)
        var log = ""
        for package in [version.map { "pipewire-alsa=\($0)" }, "pipewire-alsa"].compactMap({ $0 }) {
            let fetch = runBlocking("/bin/sh", ["-c", "cd '\(cache.path)' && apt-get download -q '\(package)'"])
            log += fetch.log
            if fetch.status == 0 { break }
        }
        let debs = (try? FileManager.default.contentsOfDirectory(atPath: cache.path))?.filter { $0.hasSuffix(".deb") } ?? []
        guard let deb = debs.sorted().last else {
            throw Failed(what: "apt-get download pipewire-alsa (run scripts/setup --test)", log: log)
        }
        let unpack = runBlocking("dpkg-deb", ["-x", cache.appendingPathComponent(deb).path, cache.appendingPathComponent("root").path])
        guard unpack.status == 0, let found = findPlugin(in: cache) else {
            throw Failed(what: "dpkg-deb -x \(deb)", log: unpack.log)
        }
        return found
    }

    private static func findPlugin(in cache: URL) -> URL? {
        let root = cache.appendingPathComponent("root")
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return nil }
        for case let url as URL in walker where url.lastPathComponent == "libasound_module_pcm_pipewire.so" { return url }
        return nil
    }

    private static func runBlocking(_ executable: String, _ arguments: [String]) -> (status: Int32, log: String) {
        let directory = FileManager.default.temporaryDirectory
        guard let child = try? ChildProcess(executable, arguments, directory: directory) else { return (-1, "cannot run \(executable)") }
        defer {
            try? FileManager.default.removeItem(at: child.stdoutURL)
            try? FileManager.default.removeItem(at: child.stderrURL)
        }
        let status = child.waitForExitBlocking(timeout: .seconds(120)) ?? -1
        return (status, child.stdout + child.stderr)
    }
}
