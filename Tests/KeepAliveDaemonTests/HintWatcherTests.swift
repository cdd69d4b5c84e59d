import Foundation
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
        let watcher = HintWatcher(directories: [(home.path, [".asoundrc"]), (confd.path, nil)])
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

    @Test("one watch per directory, its names merged; any name wins over a list")
    func merged() {
        #expect(HintWatcher.concerns(nil, name: "anything"))
        #expect(HintWatcher.concerns([".asoundrc"], name: ".asoundrc"))
        #expect(!HintWatcher.concerns([".asoundrc"], name: ".bash_history"))
        let directories = HintWatcher.directories()
        #expect(Set(directories.map(\.0)).count == directories.count)
        #expect(directories.contains { $0.0 == "/etc" && $0.1 == ["asound.conf"] })
    }
}
