import Foundation
import TestSupport
import Testing

extension Integration {
    /// `-d default`, `-d pulse` and `-d pulse:DEVICE=…` on a desktop: through a stream of
    /// keepalived's own (ServerSinkPCM), not ALSA's pulse plug-in, against a real PulseAudio.
    /// `default` is the pulse plug-in here as on Debian's desktops: Debian's own hook
    /// (/usr/share/alsa/alsa.conf.d/pulse.conf) loads pulse-alsa.conf while a server answers.
    @Suite("named outputs that end at a sound server")
    struct ServerDefaultOutputTests {
        static let tv = SoundServerSinksTests.tv
        static let speakers = SoundServerSinksTests.speakers

        func start(_ arguments: [String], _ server: PulseAudioServer) throws -> (ChildProcess, String) {
            let socket = server.directory.appendingPathComponent("k.sock").path
            let daemon = try ChildProcess(TestPaths.keepalivedBinary.path, ["run"] + arguments + ["--socket", socket],
                                          environment: server.environment, directory: server.directory, label: "keepalived")
            return (daemon, socket)
        }

        /// keepalived's own stream ("keepalived", "keep-alive"), on which sink; nil while there is
        /// none, or while the plug-in's stream plays instead.
        func ownStreamSink(_ server: PulseAudioServer) -> String? {
            let names = server.streamNames()
            guard names.count == 1, names[0].application == "keepalived", names[0].media == "keep-alive" else { return nil }
            return server.streamSinks().values.first
        }

        @Test("-d default follows the server's default sink through keepalived's own stream; status names it",
              .enabled(if: PulseAudioServer.isInstalled))
        func defaultFollowsTheDefaultSink() async throws {
            let server = try PulseAudioServer()
            try await server.start(sinks: [Self.tv, Self.speakers])
            defer { server.stop() }
            #expect(commandOutput("pactl", ["set-default-sink", "tv"], environment: server.environment) != nil)
            let (daemon, socket) = try start(["-d", "default"], server)
            try await waitUntil("keepalived's own stream on the TV", timeout: .seconds(5)) { ownStreamSink(server) == "tv" }
            let outputs = SoundServerSinksTests.outputs(SoundServerSinksTests.status(socket, server.environment))
            #expect(outputs["default"]?["sink"] as? String == "tv (the default sink)", "\(outputs)")
            #expect(outputs["default"]?["sinkKind"] as? String == "HDMI/DisplayPort", "\(outputs)")
            // A sink's 8 s buffer, as --all gives one.
            #expect(SoundServerSinksTests.bufferSeconds(outputs["default"]).map { $0 >= 7.5 } == true, "\(outputs)")

            // The user picks other speakers: the stream goes with the default, as the plug-in's would.
            #expect(commandOutput("pactl", ["set-default-sink", "speakers"], environment: server.environment) != nil)
            try await waitUntil("keepalived's stream to follow the default to the speakers", timeout: .seconds(5)) {
                ownStreamSink(server) == "speakers"
            }
            try await waitUntil("the speakers kept awake", timeout: .seconds(5)) { server.sinkStates()["speakers"] == "RUNNING" }
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }

        @Test("-d pulse and -d pulse:DEVICE=… without a selection: keepalived's own stream too",
              .enabled(if: PulseAudioServer.isInstalled))
        func pulseNames() async throws {
            let server = try PulseAudioServer()
            try await server.start(sinks: [Self.tv, Self.speakers])
            defer { server.stop() }
            #expect(commandOutput("pactl", ["set-default-sink", "tv"], environment: server.environment) != nil)
            for (device, sink) in [("pulse", "tv"), ("pulse:DEVICE=speakers", "speakers")] {
                let (daemon, _) = try start(["-d", device], server)
                try await waitUntil("\(device): keepalived's own stream on \(sink)", timeout: .seconds(5)) { ownStreamSink(server) == sink }
                daemon.signal(SIGTERM)
                #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
                try await waitUntil("the stream gone", timeout: .seconds(5)) { server.sinkInputCount() == 0 }
            }
        }
    }
}
