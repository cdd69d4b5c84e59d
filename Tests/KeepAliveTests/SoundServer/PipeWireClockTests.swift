import Glibc
import Testing

@testable import KeepAlive

@Suite("PipeWire's clock settings: read as PipeWire writes them, and the rate its scheduler gives an idle graph")
struct PipeWireClockTests {
    @Test("the metadata's values as PipeWire 0.3.65 to 1.4 write them")
    func parsing() {
        #expect(PipeWireClock(rate: "48000", allowedRates: "[ 44100, 48000 ]", forceRate: "0")
            == PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000], forcedRate: 0))
        #expect(PipeWireClock(rate: "48000", allowedRates: "[ 44100 48000 88200 96000 ]", forceRate: "")
            == PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000, 88200, 96000], forcedRate: 0))
        #expect(PipeWireClock(rate: "44100", allowedRates: "", forceRate: "48000")
            == PipeWireClock(defaultRate: 44100, allowedRates: [44100], forcedRate: 48000))
        #expect(PipeWireClock(rate: "48000", allowedRates: "[ ]", forceRate: "0")?.allowedRates == [48000])
    }

    @Test("a default rate that is not a rate is no clock", arguments: ["", "0", "fast", "-48000", "48000.5"])
    func badRate(_ rate: String) {
        #expect(PipeWireClock(rate: rate, allowedRates: "[ 44100, 48000 ]", forceRate: "0") == nil)
    }

    @Test("the graph follows its streams only with more than one allowed rate and none forced")
    func follows() {
        #expect(PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000]).followsStreams)
        #expect(!PipeWireClock(defaultRate: 48000, allowedRates: [48000]).followsStreams)
        #expect(!PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000], forcedRate: 44100).followsStreams)
    }

    @Test("the allowed rate nearest the largest stream's, the default on a tie or with no stream (find_best_rate)",
          arguments: [
              ([44100], 44100), ([48000], 48000), ([44100, 48000], 48000), ([96000], 96000), ([88200], 88200),
              ([192000], 96000), ([32000], 44100), ([22050], 44100), ([46050], 48000), ([46000], 44100), ([], 48000),
          ] as [([UInt32], UInt32)])
    func rule(_ streams: [UInt32], _ expected: UInt32) {
        let clock = PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000, 88200, 96000])
        #expect(clock.rate(forStreamsAt: streams) == expected)
    }

    @Test("a tie goes to the default rate, then to the earlier allowed rate")
    func ties() {
        // 46050 is 1950 from 44100 and from 48000.
        #expect(PipeWireClock(defaultRate: 48000, allowedRates: [44100, 48000]).rate(forStreamsAt: [46050]) == 48000)
        #expect(PipeWireClock(defaultRate: 44100, allowedRates: [44100, 48000]).rate(forStreamsAt: [46050]) == 44100)
        #expect(PipeWireClock(defaultRate: 96000, allowedRates: [44100, 48000]).rate(forStreamsAt: [46050]) == 44100)
    }

    @Test("no PipeWire to ask: a failure that names why, within the time given")
    func noServer() async {
        // In a child process: the remote's name is read from the environment.
        await #expect(processExitsWith: .success) {
            setenv("PIPEWIRE_REMOTE", "keepalived-test-no-such-remote", 1)
            let started = ContinuousClock.now
            let result = PipeWireClock.read(timeout: .milliseconds(500))
            guard ContinuousClock.now - started < .seconds(5) else { exit(2) }
            switch result {
            case .failure(.noServer(let detail)) where !detail.isEmpty: exit(0)
            case .failure(.libraryMissing): exit(0)
            default: exit(1)
            }
        }
    }
}
