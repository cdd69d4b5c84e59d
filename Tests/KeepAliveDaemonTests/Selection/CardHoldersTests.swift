import Foundation
@testable import KeepAliveDaemon
import Testing

@Suite("CardHolders: who has a card's playback device open, from /proc")
struct CardHoldersTests {
    @Test("a substream's owner and a thread's process, as the kernel prints them")
    func fields() {
        #expect(CardHolders.ownerPID(status: "state: RUNNING\nowner_pid   : 812\ntrigger_time: 12.5\n") == 812)
        #expect(CardHolders.ownerPID(status: "closed\n") == nil)
        #expect(CardHolders.tgid(status: "Name:\talsa-sink-ALC\nUmask:\t0022\nState:\tS\nTgid:\t812\nPid:\t830\n") == 812)
    }

    @Test("a /proc tree: the holder of card 2's open substream, by its process; closed ones and this process are not holders")
    func scan() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("holders-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: root) }
        func write(_ path: String, _ text: String) throws {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        try write("asound/card2/pcm0p/sub0/status", "state: RUNNING\nowner_pid   : 4331\n")
        try write("asound/card2/pcm0p/sub1/status", "closed\n")
        try write("asound/card2/pcm0c/sub0/status", "state: RUNNING\nowner_pid   : 4400\n")
        try write("asound/card3/pcm1p/sub0/status", "state: RUNNING\nowner_pid   : \(getpid())\n")
        try write("4331/status", "Name:\talsa-sink\nTgid:\t4330\n")
        try write("4330/comm", "pulseaudio\n")
        try write("\(getpid())/status", "Tgid:\t\(getpid())\n")
        let holders = CardHolders.scan(proc: root.path)
        #expect(holders.keys.sorted() == [2])
        #expect(holders[2] == [CardHolder(pid: 4330, uid: getuid(), command: "pulseaudio")])
        #expect(holders[2]?.first?.isSoundServer == true)
        // For status: the same holder named, and a holder whose process this one cannot see
        // (the system service's ProtectProc=invisible) named by its thread, by card.
        try write("asound/card1/pcm0p/sub0/status", "state: RUNNING\nowner_pid   : 815\n")
        #expect(CardHolders.descriptions(proc: root.path) == [
            "thread 815 of a process hidden from keepalived on card 1",
            "pulseaudio (pid 4330, uid \(getuid())) on card 2",
        ])
    }
}
