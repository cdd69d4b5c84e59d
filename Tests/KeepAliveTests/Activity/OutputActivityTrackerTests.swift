import Logging
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

@testable import KeepAlive

/// The library's activity model: the changes each call returns and publishes, the idle times, and
/// `run()` advancing it on its own.
@Suite("OutputActivityTracker: active and idle, returned, published and timed")
struct OutputActivityTrackerTests {
    static let start = ContinuousClock.now
    static func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    @Test("a session of two tracks: active once, nothing between the tracks, idle the idle time after the last, naming who played")
    func session() async {
        let tracker = OutputActivityTracker(idleAfter: .seconds(10))
        let changes = tracker.changes
        #expect(tracker.activity(of: "hw:0,0") == .idle(since: nil))
        #expect(tracker.update(["hw:0,0": "mpd"], at: Self.at(0)) == [.init(output: "hw:0,0", kind: .active, program: "mpd", at: Self.at(0))])
        #expect(tracker.update([:], at: Self.at(3)).isEmpty, "the track ended: quieting, still active")
        #expect(tracker.nextDeadline == Self.at(13))
        #expect(tracker.activity(of: "hw:0,0") == .active(since: Self.at(0), program: "mpd", idleAt: Self.at(13)))
        #expect(tracker.update(["hw:0,0": "mpd"], at: Self.at(4)).isEmpty, "the next track")
        #expect(tracker.nextDeadline == nil)
        #expect(tracker.update([:], at: Self.at(7)).isEmpty)
        #expect(tracker.advance(to: Self.at(16.9)).isEmpty, "not yet")
        #expect(tracker.advance(to: Self.at(17)) == [.init(output: "hw:0,0", kind: .idle, program: "mpd", at: Self.at(17))])
        #expect(tracker.activity(of: "hw:0,0") == .idle(since: Self.at(17)))
        #expect(tracker.activeOutputs.isEmpty && tracker.nextDeadline == nil)
        var iterator = changes.makeAsyncIterator()
        let first = await iterator.next()
        let second = await iterator.next()
        #expect(first?.kind == .active && second?.kind == .idle && second?.description == "idle output=hw:0,0 program=mpd",
                "published in order: \(String(describing: first)), \(String(describing: second))")
    }

    @Test("outputs apart: each its own machine and idle time; a program change on an active output is no change")
    func outputs() {
        let tracker = OutputActivityTracker(idleAfter: .seconds(60), idleAfterByOutput: ["dac": .seconds(5)])
        let both = tracker.update(["dac": "squeezelite", "hdmi": "kodi"], at: Self.at(0))
        #expect(both.map(\.output) == ["dac", "hdmi"] && both.allSatisfy { $0.kind == .active })
        #expect(tracker.activeOutputs == ["dac", "hdmi"])
        #expect(tracker.update(["dac": "mpd", "hdmi": "kodi"], at: Self.at(1)).isEmpty)
        #expect(tracker.update([:], at: Self.at(2)).isEmpty)
        #expect(tracker.nextDeadline == Self.at(7), "the DAC's 5 s first")
        #expect(tracker.advance(to: Self.at(7)) == [.init(output: "dac", kind: .idle, program: "mpd", at: Self.at(7))])
        #expect(tracker.nextDeadline == Self.at(62))
        #expect(tracker.activeOutputs == ["hdmi"])
    }

    @Test("new idle times: a silence under way is timed anew from then; active and idle outputs stay as they are")
    func newIdleTimes() {
        let tracker = OutputActivityTracker(idleAfter: .seconds(300))
        tracker.update(["a": "mpd", "b": "kodi"], at: Self.at(0))
        tracker.update(["b": "kodi"], at: Self.at(10))
        #expect(tracker.nextDeadline == Self.at(310))
        tracker.setIdleAfter(.seconds(20), at: Self.at(15))
        #expect(tracker.nextDeadline == Self.at(35))
        #expect(tracker.activity(of: "b") == .active(since: Self.at(0), program: "kodi", idleAt: nil))
        #expect(tracker.advance(to: Self.at(35)).map(\.output) == ["a"])
        #expect(tracker.activity(of: "a") == .idle(since: Self.at(35)))
    }

    @Test("run() goes idle on its own, wakes for a nearer deadline while it waits for a later one, and ends when cancelled")
    func run() async throws {
        // The slow output's hour is what run() would sleep for if a nearer deadline did not wake
        // it; the quick one's 200 ms must. No upper bound on the time taken: the suite runs many
        // tests at once on two cores (under a sanitizer this one took 34 s), so the bound is
        // the hour's, checked by a deadline far below it.
        let tracker = OutputActivityTracker(idleAfter: .seconds(3600), idleAfterByOutput: ["quick": .milliseconds(200)])
        let changes = tracker.changes
        let running = Task { try await tracker.run() }
        tracker.update(["slow": "mpd", "quick": "aplay"])
        tracker.update(["slow": "mpd"])
        let began = ContinuousClock.now
        let seen = await withTaskGroup(of: [OutputActivityTracker.Change]?.self) { group in
            group.addTask {
                var seen: [OutputActivityTracker.Change] = []
                for await change in changes {
                    seen.append(change)
                    if change.kind == .idle { break }
                }
                return seen
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(60).underSanitizer)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        let waited = began.duration(to: .now)
        #expect(seen?.map(\.description) == ["active output=quick program=aplay", "active output=slow program=mpd", "idle output=quick program=aplay"],
                "run() did not make the quick output idle within \(waited): \(String(describing: seen))")
        #expect(waited >= .milliseconds(190), "idle before its 200 ms: \(waited)")
        running.cancel()
        try await running.value
        #expect(tracker.activeOutputs == ["slow"])
    }

    @Test("run() in a ServiceGroup ends at the group's graceful shutdown")
    func service() async throws {
        let tracker = OutputActivityTracker(idleAfter: .seconds(30))
        let group = ServiceGroup(services: [tracker], logger: .quiet)
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(50))
        await group.triggerGracefulShutdown()
        try await running.value
    }
}
