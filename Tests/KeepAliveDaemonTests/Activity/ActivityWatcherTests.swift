import Testing

import KeepAlive
@testable import KeepAliveDaemon

/// What ``ActivityWatcher`` makes of one listing of the sound server: who plays real audio on
/// each followed output's sink. The listing comes from the real server in ActivityTests; here
/// every kind of stream and sink, without one.
@Suite("Activity watcher: real audio on a followed sink")
struct ActivityWatcherTests {
    static let tv = sink(0, "tv")
    static let dac = sink(1, "dac")

    static func sink(_ index: UInt32, _ name: String) -> ServerSink {
        var sink = ServerSink(name: name, description: name)
        sink.index = index
        return sink
    }

    static func stream(_ index: UInt32, on sink: ServerSink, corked: Bool = false, own: Bool = false, _ application: String) -> ServerStream {
        ServerStream(index: index, sink: sink.index, isCorked: corked, isOwn: own, application: application)
    }

    static func view(defaultSink: String? = "tv", _ streams: [ServerStream]) -> SoundServerView {
        SoundServerView(server: "test", defaultSink: defaultSink, sinks: [tv, dac], streams: streams)
    }

    @Test("a player on a followed sink is the output's player; on another sink, nobody's")
    func playerOnItsSink() {
        let view = Self.view([Self.stream(1, on: Self.tv, "mpv")])
        #expect(ActivityWatcher.players(in: view, followed: ["pulse:DEVICE=tv": "tv", "pulse:DEVICE=dac": "dac"])
            == ["pulse:DEVICE=tv": BoxActivity.Player(program: "mpv", sink: "tv")])
    }

    @Test("an output that follows the default sink follows it where it is; with no default sink, nothing")
    func defaultSink() {
        let streams = [Self.stream(1, on: Self.dac, "squeezelite")]
        #expect(ActivityWatcher.players(in: Self.view(defaultSink: "dac", streams), followed: ["default": nil])
            == ["default": BoxActivity.Player(program: "squeezelite", sink: "dac")])
        #expect(ActivityWatcher.players(in: Self.view(defaultSink: "tv", streams), followed: ["default": nil]).isEmpty)
        #expect(ActivityWatcher.players(in: Self.view(defaultSink: nil, streams), followed: ["default": nil]).isEmpty)
    }

    @Test("streams that are not real audio are not a player: corked, this process's, another keepalived's")
    func notRealAudio() {
        let view = Self.view([
            Self.stream(1, on: Self.tv, corked: true, "mpv"),
            Self.stream(2, on: Self.tv, own: true, "keepalived"),
            Self.stream(3, on: Self.tv, "keepalived"),
            Self.stream(4, on: Self.tv, "Kodi [keepalived]"),
        ])
        #expect(ActivityWatcher.players(in: view, followed: ["pulse:DEVICE=tv": "tv"]).isEmpty)
    }

    @Test("the first real stream names the player, after the ones that are not; a nameless one is '?'")
    func firstRealStream() {
        let view = Self.view([Self.stream(1, on: Self.tv, own: true, "keepalived"), Self.stream(2, on: Self.tv, ""), Self.stream(3, on: Self.tv, "mpv")])
        #expect(ActivityWatcher.players(in: view, followed: ["pulse:DEVICE=tv": "tv"]) == ["pulse:DEVICE=tv": BoxActivity.Player(program: "?", sink: "tv")])
    }

    @Test("a followed sink that the listing does not show has no player")
    func sinkGone() {
        let view = Self.view([Self.stream(1, on: Self.tv, "mpv")])
        #expect(ActivityWatcher.players(in: view, followed: ["pulse:DEVICE=hdmi": "hdmi"]).isEmpty)
        #expect(ActivityWatcher.players(in: view, followed: [:]).isEmpty)
    }
}
