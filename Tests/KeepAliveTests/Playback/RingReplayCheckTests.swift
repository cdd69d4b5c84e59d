import Glibc
import Testing
@testable import KeepAlive

/// The ring loop's check that a ring written once goes round: every event in every state.
@Suite("Ring replay check")
struct RingReplayCheckTests {
    let start = ContinuousClock.now
    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    /// A 2 s ring at 48 kHz, positions wrapping at 2^20; filled at 0 from position 1000: the
    /// first look at 5 s.
    func filled(position: Int? = 1_000) -> RingReplayCheck {
        var check = RingReplayCheck(ringFrames: 96_000, ringDuration: .seconds(2), boundary: 1 << 20)
        check.filled(at: at(0), position: position)
        return check
    }

    /// At the first look, one ring and a bit played (the position moved 97 000 frames).
    func confirming() -> RingReplayCheck {
        var check = filled()
        #expect(check.looked(at: at(5_000), .running(position: 1_000 + 90_000)) == .lookAgain)
        #expect(check.deadline == at(6_000))
        return check
    }

    @Test("nothing filled: nothing to look at, and every stream error is the recovery's")
    func idle() {
        var check = RingReplayCheck(ringFrames: 96_000, ringDuration: .seconds(2), boundary: 1 << 20)
        #expect(check.deadline == nil)
        for code in [-EPIPE, -ESTRPIPE, -ENODEV, -EIO, -EBADFD] { #expect(check.streamFailed(code) == .recover) }
        #expect(check.deadline == nil)
    }

    @Test("a look with nothing to check is a caller's bug")
    func lookWhenIdle() async {
        await #expect(processExitsWith: .failure) {
            var check = RingReplayCheck(ringFrames: 96_000, ringDuration: .seconds(2), boundary: 1 << 20)
            _ = check.looked(at: .now, .underrun)
        }
    }

    @Test("the first look comes two rings and the margin after the fill; before it, a look changes nothing")
    func firstDeadline() {
        var check = filled()
        #expect(check.deadline == at(5_000))
        #expect(check.looked(at: at(4_999), .underrun) == .none)
        #expect(check.deadline == at(5_000), "an early look is no look")
    }

    @Test("the ring went round (more than one ring played): nothing more to check")
    func wentRound() {
        var check = filled()
        #expect(check.looked(at: at(5_000), .running(position: 1_000 + 96_001)) == .none)
        #expect(check.deadline == nil)
        // Across the boundary too.
        var wrapped = filled(position: (1 << 20) - 10)
        #expect(wrapped.looked(at: at(5_200), .running(position: 200_000)) == .none)
        #expect(wrapped.deadline == nil)
    }

    @Test("at most one ring played at the first look: looked at again a margin later")
    func slowOrStopped() {
        var check = filled()
        #expect(check.looked(at: at(5_300), .running(position: 1_000 + 96_000)) == .lookAgain)
        #expect(check.deadline == at(6_300))
    }

    @Test("the second look: a position that has not moved did not replay the ring; one that moves is a slow device")
    func secondLook() {
        var stopped = confirming()
        #expect(stopped.looked(at: at(6_000), .running(position: 91_000)) == .notReplayed(.positionStopped))
        #expect(stopped.deadline == nil)
        var slow = confirming()
        #expect(slow.looked(at: at(6_000), .running(position: 91_001)) == .none)
        #expect(slow.deadline == nil)
    }

    @Test("an underrun at either look, or as a stream error before the ring went round, is a device that stopped itself: stream instead")
    func underrun() {
        var atFirst = filled()
        #expect(atFirst.looked(at: at(5_000), .underrun) == .notReplayed(.underrun))
        #expect(atFirst.deadline == nil)
        var atSecond = confirming()
        #expect(atSecond.looked(at: at(6_000), .underrun) == .notReplayed(.underrun))
        var reported = filled()
        #expect(reported.streamFailed(-EPIPE) == .notReplayed(.underrun))
        #expect(reported.deadline == nil)
        var reportedLater = confirming()
        #expect(reportedLater.streamFailed(-EPIPE) == .notReplayed(.underrun))
        // Once the ring went round, an underrun is a fault like any other.
        var checked = filled()
        _ = checked.looked(at: at(5_000), .running(position: 200_000))
        #expect(checked.streamFailed(-EPIPE) == .recover)
    }

    @Test("other errors before the ring went round are the recovery's, and the check still waits")
    func otherErrors() {
        for code in [-ESTRPIPE, -ENODEV, -EIO, -EBADFD, -ENOTCONN] {
            var first = filled()
            #expect(first.streamFailed(code) == .recover, "\(code)")
            #expect(first.deadline == at(5_000))
            var second = confirming()
            #expect(second.streamFailed(code) == .recover, "\(code)")
            #expect(second.deadline == at(6_000))
        }
    }

    @Test("a state that is neither running nor an underrun, or a position the device cannot give, ends the check undecided")
    func undecided() {
        for stream in [RingReplayCheck.Stream.other, .running(position: nil)] {
            var first = filled()
            #expect(first.looked(at: at(5_000), stream) == .none, "\(stream)")
            #expect(first.deadline == nil)
            var second = confirming()
            #expect(second.looked(at: at(6_000), stream) == .none, "\(stream)")
            #expect(second.deadline == nil)
        }
        var unknownStart = filled(position: nil)
        #expect(unknownStart.looked(at: at(5_000), .running(position: 5)) == .none)
    }

    @Test("a refill starts the check again")
    func refill() {
        var check = confirming()
        check.filled(at: at(7_000), position: 3)
        #expect(check.deadline == at(12_000))
        #expect(check.looked(at: at(12_000), .running(position: 3 + 100)) == .lookAgain)
    }
}
