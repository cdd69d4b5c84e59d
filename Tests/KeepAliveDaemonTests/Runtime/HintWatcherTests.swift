import Foundation
import Glibc
import Testing
@testable import KeepAliveDaemon

/// The inotify watch behind `--all`'s rescans, on a real temporary directory: only ALSA's own
/// files in a busy directory (a home, `/dev`) call for a rescan.
@Suite("HintWatcher: what calls for a rescan")
struct HintWatcherTests {
    @Test("in a home directory, ~/.asoundrc does and any other file does not; in a conf.d directory every file does")
    func names() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("hints-\(UUID().uuidString.prefix(8))")
        let confd = home.appendingPathComponent("conf.d")
        try FileManager.default.createDirectory(at: confd, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        let watcher = HintWatcher(directories: [(home.path, .names([".asoundrc"])), (confd.path, .everything)])
        #expect(watcher.descriptor >= 0)
        #expect(!watcher.drain(), "nothing happened yet")

        try Data("history".utf8).write(to: home.appendingPathComponent(".bash_history"))
        try Data("log".utf8).write(to: home.appendingPathComponent(".xsession-errors"))
        #expect(!watcher.drain(), "a home directory's other files are no reason to rescan")

        try Data("pcm.!default { type hw card 1 }".utf8).write(to: home.appendingPathComponent(".asoundrc"))
        #expect(watcher.drain())
        #expect(!watcher.drain(), "drained")

        try Data("".utf8).write(to: confd.appendingPathComponent("50-anything.conf"))
        #expect(watcher.drain())
    }

    @Test("in /dev/snd a node made or removed does, a PCM closed after writing does, a control node closed after writing does not (alsa-lib's own hint scan closes every card's)")
    func cards() throws {
        let snd = FileManager.default.temporaryDirectory.appendingPathComponent("snd-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: snd, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: snd) }
        for node in ["controlC0", "pcmC0D0p"] {
            #expect(FileManager.default.createFile(atPath: snd.appendingPathComponent(node).path, contents: nil))
        }
        let watcher = HintWatcher(directories: [(snd.path, .cards)])
        #expect(watcher.descriptor >= 0)
        /// Opens a node for reading and writing and closes it, as snd_ctl_open and snd_pcm_open do.
        func openAndClose(_ node: String) {
            let fd = open(snd.appendingPathComponent(node).path, O_RDWR)
            #expect(fd >= 0)
            close(fd)
        }
        openAndClose("controlC0")
        #expect(!watcher.drain(), "a hint scan's own close of a control node")
        openAndClose("pcmC0D0p")
        #expect(watcher.drain(), "a PCM another program held is free")
        #expect(FileManager.default.createFile(atPath: snd.appendingPathComponent("controlC1").path, contents: nil))
        #expect(watcher.drain(), "a card's node appeared")
        #expect(chmod(snd.appendingPathComponent("controlC1").path, 0o660) == 0)
        #expect(watcher.drain(), "a node's permissions changed (udev's ACL for a login)")
        #expect(!watcher.drain(), "drained")
    }

    @Test("one watch per directory, what each wants of it merged")
    func merged() {
        #expect(HintWatcher.Interest.everything.concerns("anything", mask: UInt32(IN_CLOSE_WRITE)))
        #expect(HintWatcher.Interest.names([".asoundrc"]).concerns(".asoundrc", mask: UInt32(IN_CLOSE_WRITE)))
        #expect(!HintWatcher.Interest.names([".asoundrc"]).concerns(".bash_history", mask: UInt32(IN_CLOSE_WRITE)))
        #expect(HintWatcher.Interest.names(["a"]).merged(with: .names(["b"])) == .names(["a", "b"]))
        #expect(HintWatcher.Interest.names(["a"]).merged(with: .everything) == .everything)
        let directories = HintWatcher.directories()
        #expect(Set(directories.map(\.0)).count == directories.count)
        #expect(directories.contains { $0.0 == "/etc" && $0.1 == .names(["asound.conf"]) })
    }
}
