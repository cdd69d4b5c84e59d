import Testing
@testable import KeepAlive

/// The stall detector's window: a stream's first progress may come as late as a sound server
/// starts it; after that, three thresholds' time without progress is a stall.
@Suite("Stall detector")
struct StallDetectorTests {
    let start = ContinuousClock.now
    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    /// A 0.5 s buffer at 44.1 kHz in three periods: writes of two periods, a 1 s window.
    func halfSecondStream() -> StallDetector {
        var stalls = StallDetector(window: StallDetector.window(threshold: 14_700, rate: 44_100), at: at(0))
        stalls.observe(available: 22_050, bufferFrames: 22_050, at: at(0))
        stalls.wrote(availableAfter: 7_350, at: at(0))
        return stalls
    }

    @Test("a stream the server has not started yet is not stalled before the start window (PulseAudio's null sink: up to 2 s)")
    func notStartedYet() {
        var stalls = halfSecondStream()
        #expect(stalls.window == .seconds(1))
        for milliseconds in stride(from: 169, through: 2_900, by: 169) {
            stalls.observe(available: 7_350, bufferFrames: 22_050, at: at(milliseconds))
            #expect(stalls.stalled(at: at(milliseconds)) == nil, "at \(milliseconds) ms")
        }
        #expect(!stalls.started)
        #expect(stalls.remaining(at: at(2_900)) == .milliseconds(100))
        // A server that never starts it is still noticed.
        #expect(stalls.stalled(at: at(3_001)) == at(0))
    }

    @Test("once the device has freed room, the window is three thresholds again")
    func afterStart() {
        var stalls = halfSecondStream()
        stalls.observe(available: 7_350, bufferFrames: 22_050, at: at(169))
        stalls.observe(available: 14_700, bufferFrames: 22_050, at: at(1_800))
        #expect(stalls.started)
        stalls.wrote(availableAfter: 0, at: at(1_800))
        #expect(stalls.remaining(at: at(1_800)) == .seconds(1))
        stalls.observe(available: 0, bufferFrames: 22_050, at: at(2_500))
        #expect(stalls.stalled(at: at(2_801)) == at(1_800))
    }

    @Test("a restart (prepared or resumed) waits for the start again")
    func restart() {
        var stalls = halfSecondStream()
        stalls.observe(available: 14_700, bufferFrames: 22_050, at: at(200))
        #expect(stalls.started)
        stalls.restart(at: at(500))
        #expect(!stalls.started)
        stalls.observe(available: 22_050, bufferFrames: 22_050, at: at(500))
        #expect(!stalls.started, "a prepared buffer's first look is not progress of the stream")
        stalls.wrote(availableAfter: 7_350, at: at(500))
        #expect(stalls.stalled(at: at(2_000)) == nil)
        #expect(stalls.stalled(at: at(3_501)) == at(500))
    }

    @Test("a window longer than the start window (a sink's default 6 s buffer: 12 s) is unchanged at the start")
    func defaultBufferUnchanged() {
        var stalls = StallDetector(window: StallDetector.window(threshold: 4 * 48_000, rate: 48_000), at: at(0))
        stalls.observe(available: 288_000, bufferFrames: 288_000, at: at(0))
        stalls.wrote(availableAfter: 96_000, at: at(0))
        #expect(!stalls.started)
        #expect(stalls.remaining(at: at(0)) == .seconds(12))
        #expect(stalls.stalled(at: at(12_001)) == at(0))
    }

    @Test("a started device that frees nothing for half the window holds back; a top-up is no progress: a stalled one is still noticed when the window runs out")
    func holdsBack() {
        var stalls = halfSecondStream()
        stalls.observe(available: 14_700, bufferFrames: 22_050, at: at(300))
        #expect(stalls.started)
        #expect(!stalls.holdsBack(at: at(700)))
        #expect(stalls.holdsBack(at: at(801)))
        stalls.toppedUp(availableAfter: 0)
        stalls.observe(available: 0, bufferFrames: 22_050, at: at(900))
        #expect(stalls.stalled(at: at(1_300)) == nil)
        #expect(stalls.stalled(at: at(1_301)) == at(300))
    }
}
