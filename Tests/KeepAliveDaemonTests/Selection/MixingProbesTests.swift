import Synchronization
import Testing
@testable import KeepAlive
@testable import KeepAliveDaemon

@Suite("Probing what dmix can mix, once per card device")
struct MixingProbesTests {
    static let hints: [ALSADevice] = [
        ALSADevice(name: "hw:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, Direct hardware device without any conversions"),
        ALSADevice(name: "hdmi:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, HDMI Audio Output"),
        ALSADevice(name: "dmix:CARD=vc4hdmi0,DEV=0", description: "vc4-hdmi-0, MAI PCM i2s-hifi-0, Direct sample mixing device"),
        ALSADevice(name: "dmix:CARD=Headphones,DEV=0", description: "bcm2835 Headphones, bcm2835 Headphones, Direct sample mixing device"),
        ALSADevice(name: "my-receiver", description: "Living room receiver"),
    ]

    /// A probe that answers from `answers` (nil: busy) and counts its calls.
    final class FakeProbe: Sendable {
        let answers: Mutex<[String: CardDeviceMixing?]>
        let calls = Mutex<[String]>([])
        init(_ answers: [String: CardDeviceMixing?]) { self.answers = Mutex(answers) }
        func callAsFunction(_ card: String, _ device: Int) -> CardDeviceMixing? {
            calls.withLock { $0.append("\(card),\(device)") }
            return answers.withLock { $0["\(card),\(device)"] ?? nil }
        }
    }

    @Test("each card device is probed once; a busy one again at the next plan, and its hdmi: configuration speaks meanwhile")
    func cacheAndRetry() {
        let probe = FakeProbe(["vc4hdmi0,0": nil, "Headphones,0": .mixable])
        let framed = Mutex<[String]>([])
        let probes = MixingProbes(probe: { probe($0, $1) }, framed: { alias in framed.withLock { $0.append(alias) }; return true })
        #expect(probes.mixing(for: Self.hints) { _ in true } == ["vc4hdmi0,0": .iec958Only, "Headphones,0": .mixable])
        #expect(framed.withLock { $0 } == ["hdmi:CARD=vc4hdmi0,DEV=0"], "busy (or nothing plugged in): the card's configuration tells")
        probe.answers.withLock { $0["vc4hdmi0,0"] = .iec958Only }
        _ = probes.mixing(for: Self.hints) { _ in true }
        _ = probes.mixing(for: Self.hints) { _ in true }
        #expect(probe.calls.withLock { $0 } == ["vc4hdmi0,0", "Headphones,0", "vc4hdmi0,0"], "cached once answered, not while busy")
    }

    @Test("a busy device whose configuration frames nothing is left out: taken as the hints say")
    func unknown() {
        let probes = MixingProbes(probe: { _, _ in nil }, framed: { _ in false })
        #expect(probes.mixing(for: Self.hints) { _ in true } == [:])
    }

    @Test("a card left to someone else is never opened")
    func refusedCardsUntouched() {
        let probe = FakeProbe(["vc4hdmi0,0": .iec958Only, "Headphones,0": .mixable])
        let probes = MixingProbes(probe: { probe($0, $1) }, framed: { _ in true })
        #expect(probes.mixing(for: Self.hints) { $0 != "dmix:CARD=Headphones,DEV=0" } == ["vc4hdmi0,0": .iec958Only])
        #expect(probe.calls.withLock { $0 } == ["vc4hdmi0,0"])
    }

    @Test("the planner: a Pi's HDMI through hdmi:, its analog jack through dmix; a server's cards still left to it")
    func planner() {
        var offer = OutputOffer(hints: Self.hints, server: .unreachable("none"), cardIndices: ["vc4hdmi0": 0, "Headphones": 1])
        offer.mixing = ["vc4hdmi0,0": .iec958Only, "Headphones,0": .mixable]
        #expect(OutputPlanner.pick(OutputChoice(selection: .digital), in: offer).map(\.pcm) == ["hdmi:CARD=vc4hdmi0,DEV=0"])
        #expect(OutputPlanner.pick(OutputChoice(selection: .all), in: offer).map(\.pcm)
            == ["hdmi:CARD=vc4hdmi0,DEV=0", "dmix:CARD=Headphones,DEV=0", "my-receiver"])
        offer.server = .unknown
        #expect(OutputPlanner.pick(OutputChoice(selection: .all), in: offer).map(\.pcm) == ["my-receiver"], "no card before the server's answer")
    }
}
