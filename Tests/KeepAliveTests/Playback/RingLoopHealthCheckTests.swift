import Glibc
import Testing
@testable import KeepAlive

/// The ring loop's sleep and looks, without a device: every event in every state.
@Suite("Ring loop health check")
struct RingLoopHealthCheckTests {
    let start = ContinuousClock.now
    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    /// Where positions wrap: past two minutes at 48 kHz.
    let boundary = 1 << 24

    /// A 2 s ring at 48 kHz.
    func check(quiet: Bool) -> RingLoopHealthCheck {
        RingLoopHealthCheck(quiet: quiet, ringFrames: 96_000, ringDuration: .seconds(2), boundary: boundary, rate: 48_000)
    }

    /// Filled at 0 from position 1000, the ring seen to go round at the replay's look (5 s):
    /// health checks from then on, the last position 100 000.
    func checking(quiet: Bool) -> RingLoopHealthCheck {
        var check = check(quiet: quiet)
        check.filled(at: at(0), position: 1_000)
        check.playing(position: 1_000)
        #expect(check.sleep(from: at(0)) == .seconds(5))
        #expect(check.timedOut(at: at(5_000)) == .lookAtReplay)
        #expect(check.replayLooked(at: at(5_000), .running(position: 100_000)) == .none)
        check.playing(position: 100_000)
        return check
    }

    @Test("the interval: a minute where the descriptors wake the loop, 15 s where they do not")
    func interval() {
        #expect(check(quiet: false).interval == RingLoopPlayback.healthCheckInterval)
        #expect(check(quiet: true).interval == RingLoopPlayback.quietHealthCheckInterval)
        #expect(check(quiet: true).sleep(from: at(0)) == .seconds(15))
        #expect(checking(quiet: false).sleep(from: at(5_000)) == .seconds(60))
        #expect(checking(quiet: true).sleep(from: at(5_000)) == .seconds(15))
    }

    @Test("before the replay's deadline a timeout reads nothing; at it, the replay is looked at first")
    func replayFirst() {
        var check = check(quiet: true)
        check.filled(at: at(0), position: 1_000)
        check.playing(position: 1_000)
        #expect(check.timedOut(at: at(4_999)) == .none)
        #expect(check.sleep(from: at(4_999)) == .milliseconds(1))
        #expect(check.timedOut(at: at(5_000)) == .lookAtReplay)
    }

    @Test("the replay's answers: a stopped position or an underrun means stream instead")
    func replayAnswers() {
        var stopped = check(quiet: false)
        stopped.filled(at: at(0), position: 1_000)
        #expect(stopped.replayLooked(at: at(5_000), .running(position: 1_000 + 90_000)) == .none)
        #expect(stopped.timedOut(at: at(5_500)) == .none, "the second look comes a margin later")
        #expect(stopped.timedOut(at: at(6_000)) == .lookAtReplay)
        #expect(stopped.replayLooked(at: at(6_000), .running(position: 1_000 + 90_000)) == .notReplayed(.positionStopped))
        #expect(stopped.timedOut(at: at(7_000)) == .lookAtHealth, "the replay is done with")

        var underrun = check(quiet: false)
        underrun.filled(at: at(0), position: 1_000)
        #expect(underrun.replayLooked(at: at(5_000), .underrun) == .notReplayed(.underrun))
    }

    @Test("a stream error: an underrun before the ring went round is not replaying; any other is the recovery's")
    func streamErrors() {
        var early = check(quiet: false)
        #expect(early.streamFailed(-EPIPE) == .recover(-EPIPE), "the first fill's own write may fail")
        early.filled(at: at(0), position: 0)
        #expect(early.streamFailed(-EPIPE) == .notReplayed(.underrun))
        var late = checking(quiet: false)
        for code in [-EPIPE, -ESTRPIPE, -ENODEV, -EIO, -EBADFD] { #expect(late.streamFailed(code) == .recover(code)) }
        var filling = checking(quiet: false)
        filling.filled(at: at(10_000), position: 5)
        #expect(filling.streamFailed(-ESTRPIPE) == .recover(-ESTRPIPE))
        #expect(filling.streamFailed(-EPIPE) == .notReplayed(.underrun), "a refill is checked again")
    }

    @Test("a health check: a state other than running is the recovery's")
    func healthFailed() {
        var check = checking(quiet: false)
        #expect(check.timedOut(at: at(65_000)) == .lookAtHealth)
        #expect(check.healthLooked(at: at(65_000), .failed(-ESTRPIPE)) == .recover(-ESTRPIPE))
        #expect(check.healthLooked(at: at(125_000), .running(position: 100_000 + 48_000)) == .played(48_000),
                "the last position is kept across a failed look")
    }

    @Test("a health check: frames played are the heartbeat, at most two intervals' worth, across the boundary")
    func healthPlayed() {
        var check = checking(quiet: false)
        #expect(check.healthLooked(at: at(65_000), .running(position: 100_000 + 60 * 48_000)) == .played(60 * 48_000))
        var wrapped = checking(quiet: true)
        wrapped.playing(position: boundary - 10)
        #expect(wrapped.healthLooked(at: at(20_000), .running(position: 10)) == .played(20))
        var long = checking(quiet: true)
        long.playing(position: 0)
        #expect(long.healthLooked(at: at(20_000), .running(position: 2_000_000)) == .played(15 * 48_000 * 2))
    }

    @Test("a health check: a position that cannot be read is remembered as unknown, and judged from the next")
    func healthUnknown() {
        var check = checking(quiet: false)
        #expect(check.healthLooked(at: at(65_000), .running(position: nil)) == .none)
        #expect(check.healthLooked(at: at(125_000), .running(position: 200_000)) == .none)
        #expect(check.healthLooked(at: at(185_000), .running(position: 248_000)) == .played(48_000))
    }

    @Test("a stall where the descriptors wake the loop: reported as a minute without movement")
    func stalled() {
        var check = checking(quiet: false)
        #expect(check.healthLooked(at: at(65_000), .running(position: 100_000)) == .stalled(for: .seconds(60), since: at(5_000)))
    }

    /// The quiet path (USB, a Raspberry Pi) looks every 15 s: a stall it finds lasted 15 s, and
    /// the downtime reported starts then, not 45 s earlier.
    @Test("a stall on the quiet path: reported as the 15 s it lasted")
    func stalledQuiet() {
        var check = checking(quiet: true)
        #expect(check.timedOut(at: at(20_000)) == .lookAtHealth)
        #expect(check.healthLooked(at: at(20_000), .running(position: 100_000)) == .stalled(for: .seconds(15), since: at(5_000)))
    }

    @Test("a timeout before any position was read is a caller's bug")
    func timedOutUnfilled() async {
        await #expect(processExitsWith: .failure) {
            var check = RingLoopHealthCheck(quiet: true, ringFrames: 96_000, ringDuration: .seconds(2), boundary: 0, rate: 48_000)
            _ = check.timedOut(at: .now)
        }
    }

    @Test("a health look while the replay is due, or a replay look with none due, is a caller's bug")
    func looksOutOfTurn() async {
        await #expect(processExitsWith: .failure) {
            var check = RingLoopHealthCheck(quiet: true, ringFrames: 96_000, ringDuration: .seconds(2), boundary: 0, rate: 48_000)
            check.filled(at: .now, position: 0)
            _ = check.healthLooked(at: .now, .running(position: 0))
        }
        await #expect(processExitsWith: .failure) {
            var check = RingLoopHealthCheck(quiet: true, ringFrames: 96_000, ringDuration: .seconds(2), boundary: 0, rate: 48_000)
            check.playing(position: 0)
            _ = check.replayLooked(at: .now, .underrun)
        }
    }
}
