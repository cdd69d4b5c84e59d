import Foundation
import Glibc
import KeepAlive
import TestSupport
import Testing

@testable import KeepAliveDaemon

/// The libmosquitto shim against Debian's own broker (`mosquitto`, started here on a port of its
/// own): a connect, a retained publish read back by `mosquitto_sub`, a refused connect.
@Suite("libmosquitto client against a real broker", .enabled(if: MosquittoBroker.isInstalled))
struct MosquittoClientTests {
    /// Services the client's socket until `done` or 10 s.
    static func run(_ client: MosquittoClient, until done: () -> Bool) throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !done(), ContinuousClock.now < deadline {
            let fd = client.socket
            guard fd >= 0 else { break }
            var p = pollfd(fd: fd, events: Int16(POLLIN) | (client.wantsWrite ? Int16(POLLOUT) : 0), revents: 0)
            _ = poll(&p, 1, 100)
            try client.serviceSocket(readable: p.revents & Int16(POLLIN) != 0, writable: p.revents & Int16(POLLOUT) != 0)
        }
    }

    @Test("connect, publish retained, read back by mosquitto_sub; then disconnect")
    func publishRetained() async throws {
        let broker = try MosquittoBroker()
        try await broker.start()
        defer { broker.stop() }
        let owner = ThreadOwner.claimed("the test's thread")
        var events: [MosquittoClient.Event] = []
        let client = try MosquittoClient(id: "keepalived-test-\(broker.port)", owner: owner) { events.append($0) }
        try client.connect(host: "127.0.0.1", port: broker.port, keepAlive: 60)
        try Self.run(client) { events.contains(.connected(code: 0)) }
        #expect(events.first == .connected(code: 0), "\(events)")
        try client.publish(topic: "keepalived/test/availability", payload: Array("online".utf8), retain: true)
        try Self.run(client) { !client.wantsWrite }
        client.disconnect()
        #expect(try broker.retained("keepalived/test/availability") == "online")
    }

    @Test("nothing listening: the connect or the loop fails with libmosquitto's reason, never a crash")
    func refused() throws {
        let owner = ThreadOwner.claimed("the test's thread")
        var events: [MosquittoClient.Event] = []
        let client = try MosquittoClient(id: "keepalived-test-refused", owner: owner) { events.append($0) }
        var failure: MosquittoClient.Failure?
        do {
            // Port 1 on the loopback: nothing listens there.
            try client.connect(host: "127.0.0.1", port: 1, keepAlive: 60)
            try Self.run(client) { !events.isEmpty }
        } catch {
            failure = error as? MosquittoClient.Failure ?? MosquittoClient.Failure(loading: "\(error)")
        }
        #expect(failure != nil || events.contains { if case .disconnected(let code) = $0 { code != 0 } else { false } },
                "failure \(String(describing: failure)), events \(events)")
        #expect(!events.contains(.connected(code: 0)))
    }
}
