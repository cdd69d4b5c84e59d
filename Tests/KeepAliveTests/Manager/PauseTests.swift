import Logging
import Synchronization
import TestSupport
import Testing

@testable import KeepAlive

/// Pausing through the real ALSA `null` device (paced by the engine): the streams close, the
/// frame counters stop, and resuming plays again; reasons add up and the strongest shows.
@Suite("Pause and resume")
struct PauseTests {
    private func manager(_ devices: [String]) throws -> KeepAliveManager {
        try KeepAliveManager(configuration: KeepAliveConfiguration(devices: devices), logger: Logger.quiet)
    }

    private func frames(_ manager: KeepAliveManager, _ device: String) -> Int {
        manager.outputs.first { $0.device == device }?.framesPlayed ?? -1
    }

    @Test("pause closes every output and holds it until the last reason is resumed; events and state say why")
    func wholeManager() async throws {
        let manager = try manager(["null"])
        let events = Mutex<[KeepAliveEvent]>([])
        manager.observe { event in events.withLock { $0.append(event) } }
        manager.start()
        try await waitUntil("the output to play") { manager.state == .playing }

        manager.pause(.locked)
        #expect(manager.state == .paused(.locked))
        #expect(manager.state.name == "paused" && manager.state.description == "paused (locked)")
        #expect(manager.isRunning)
        #expect(manager.isResponsive(within: .milliseconds(1)), "a paused output has no thread to answer for")
        let held = frames(manager, "null")
        manager.pause(.sleep)
        #expect(manager.state == .paused(.sleep) && manager.state.description == "sleeping")
        manager.pause(.sleep)  // idempotent: no second event
        try await Task.sleep(for: .milliseconds(200))
        #expect(frames(manager, "null") == held, "nothing is written while paused")

        manager.resume(.sleep)
        #expect(manager.state == .paused(.locked), "still locked")
        manager.resume(.locked)
        try await waitUntil("the output to play again") { manager.state == .playing && frames(manager, "null") > held }
        manager.resume(.locked)  // idempotent

        manager.stop()
        let seen = events.withLock { $0 }
        #expect(seen.filter { $0.kind == .paused } == [.paused(device: nil, reason: .locked), .paused(device: nil, reason: .sleep)])
        #expect(seen.filter { $0.kind == .resumed } == [.resumed(device: nil, reason: .sleep), .resumed(device: nil, reason: .locked)])
        #expect(seen.contains(.stateChanged(device: "null", state: .paused(.locked))))
        #expect(seen.contains(.stateChanged(device: "null", state: .paused(.sleep))))
        #expect(seen.last == .stopped)
    }

    @Test("a manager paused before start starts held; stop and start keep the hold")
    func pausedBeforeStart() async throws {
        let manager = try manager(["null"])
        manager.pause(.idle)
        manager.start()
        #expect(manager.state == .paused(.idle))
        try await Task.sleep(for: .milliseconds(100))
        #expect(frames(manager, "null") == 0, "never opened")
        manager.stop()
        #expect(manager.state == .stopped)
        manager.start()
        #expect(manager.state == .paused(.idle))
        manager.resume(.idle)
        try await waitUntil("the output to play") { manager.state == .playing }
        manager.stop()
    }

    @Test("one output paused, the other plays on; a reconfiguration re-adding it keeps the hold")
    func oneOutput() async throws {
        let manager = try manager(["null", "plug:null"])
        manager.start()
        try await waitUntil("both outputs to play") { manager.state == .playing }
        manager.pause(.linger, output: "plug:null")
        let held = frames(manager, "plug:null")
        let other = frames(manager, "null")
        try await waitUntil("the other output to go on playing") { frames(manager, "null") > other }
        #expect(frames(manager, "plug:null") == held)
        #expect(manager.outputs.map(\.state) == [.playing, .paused(.linger)])
        #expect(manager.state == .paused(.linger))

        var without = manager.configuration
        without.devices = ["null"]
        try manager.reconfigure(without)
        var with = without
        with.devices = ["null", "plug:null"]
        try manager.reconfigure(with)
        #expect(manager.outputs.map(\.state) == [.playing, .paused(.linger)])

        manager.resume(.linger, output: "plug:null")
        try await waitUntil("the paused output to play again") { manager.state == .playing && frames(manager, "plug:null") > 0 }
        manager.stop()
    }

    @Test("reasons sort strongest first, a program's own among the library's by strength")
    func order() {
        #expect([PauseReason.idle, .linger, .sleep, .locked].sorted() == [.sleep, .locked, .idle, .linger])
        #expect(Set([PauseReason.idle, .locked]).min() == .locked)
        #expect(PauseReason(name: "call", strength: 250) < .locked)
        #expect(PauseReason(name: "a", strength: 7) < PauseReason(name: "b", strength: 7), "one strength: by name")
        #expect(PauseReason.sleep.description == "sleep")
    }
}

extension PauseReason {
    /// A reason of a program's own, declared as an embedder declares one (the daemon's
    /// `--linger` has one of this name).
    static let linger = PauseReason(name: "linger", strength: 50)
}
