import Foundation
import TestSupport
import Testing

extension Integration {
    /// A ring loop on a device that stops itself once its ring is played (issue 58, item 15):
    /// the fault-injecting PCM dressed as a card's hardware (its dump names a Hardware PCM, so
    /// keepalived ring-loops it), which ignores the boundary stop threshold and underruns after
    /// the one ring written, as a driver that stops with an XRUN does.
    @Suite("a device that stops itself after one ring streams instead")
    struct RingLoopFallbackTests {
        let device: FaultyDevice

        init() throws {
            device = try FaultyDevice()
        }

        @Test("an XRUN after the first ring: the output streams, and its writes go on")
        func xrunAfterFirstRing() async throws {
            let daemon = try device.launch("faulty-ring")
            // The ring loop's first open, then the ring's underrun.
            try await daemon.waitForLog("mode=ring-loop", timeout: .seconds(10))
            // Its first look comes two rings (at most 4 s each) and a second after the fill; a
            // refill left it to the health check a minute later, and so for ever.
            try await daemon.waitForLog("streaming instead", timeout: .seconds(30))
            try await daemon.waitForLog("mode=stream", timeout: .seconds(10))
            // Streaming: one handle, opened after the ring's, written to again and again with
            // no underrun.
            let streamed = try await waitFor("a handle written to 20 times", timeout: .seconds(20)) { () -> Int? in
                let events = device.events(device: "faulty-ring")
                let last = events.last { $0.name == "open" }?.handle
                return last.flatMap { handle in events.filter { $0.handle == handle && $0.isWrite }.count >= 20 ? handle : nil }
            }
            let events = device.events(device: "faulty-ring").filter { $0.handle == streamed }
            #expect(!events.contains { $0.name == "xrun" }, "\(events.map(\.description).joined(separator: "\n"))")
            #expect(device.events(device: "faulty-ring").filter { $0.name == "open" }.count == 2, "\(device.events(device: "faulty-ring"))")
            daemon.signal(SIGTERM)
            #expect(try await daemon.waitForExit(timeout: .seconds(5)) == 0, "\(daemon.stderr)")
        }
    }
}
