import ArgumentParser
import KeepAlive
import Logging
import Synchronization
import TestSupport
import Testing

@testable import KeepAliveDaemon

/// The reloader's decisions with the options file and the daemon's own settings played by
/// closures, on a manager that was never started (nothing opens) and a scanner without a
/// selection (nothing is read from the machine).
@Suite("Reloader: a reload taken whole, or refused with the running options kept")
struct ReloaderTests {
    static let logger = Logger.quiet

    /// What the reloader under test works on, and what its closures saw.
    final class Rig: Sendable {
        let manager: KeepAliveManager
        let scanner: OutputScanner
        private let applied = Mutex(0)

        /// How many times a reload applied the daemon's own settings.
        var appliedCount: Int { applied.withLock { $0 } }

        init(_ arguments: [String]) throws {
            let options = try PlaybackOptions.parse(arguments)
            let base = try options.makeConfiguration()
            scanner = OutputScanner(logger: ReloaderTests.logger)
            scanner.use(base, choice: options.choice)
            manager = try KeepAliveManager(configuration: scanner.planned(), logger: ReloaderTests.logger)
            scanner.attach(manager)
        }

        func reloader(load: @escaping @Sendable () throws -> PlaybackOptions,
                      prepare: (@Sendable (PlaybackOptions, KeepAliveConfiguration) throws -> Void)? = nil) -> Reloader {
            Reloader(manager: manager, scanner: scanner, logger: ReloaderTests.logger, load: load) { [self] options, configuration in
                try prepare?(options, configuration)
                return { _ in self.applied.withLock { $0 += 1 } }
            }
        }
    }

    struct Refused: Error, CustomStringConvertible {
        var description: String { "--linger needs a sound server" }
    }

    @Test("taken: the manager and the scanner hold the new options, the daemon's settings applied once, the reply says it changed")
    func taken() throws {
        let rig = try Rig(["-d", "null", "--volume", "0.01"])
        let reply = rig.reloader(load: { try PlaybackOptions.parse(["-d", "null", "-d", "other", "--volume", "0.02"]) })
            .reload(trigger: "test", on: .claimed("the test's thread"))
        #expect(reply.ok && reply.changed == true)
        #expect(rig.manager.configuration.devices == ["null", "other"])
        #expect(rig.manager.configuration.defaults.volume == (try Level(parsing: "0.02")))
        #expect(rig.scanner.base.devices == ["null", "other"])
        #expect(rig.appliedCount == 1)

        let again = rig.reloader(load: { try PlaybackOptions.parse(["-d", "null", "-d", "other", "--volume", "0.02"]) })
            .reload(trigger: "test", on: .claimed("the test's thread"))
        #expect(again.ok && again.changed == false)
    }

    @Test("an options file that cannot be read or parsed: refused with its message, nothing changed")
    func unreadable() throws {
        let rig = try Rig(["-d", "null", "--volume", "0.01"])
        let before = rig.manager.configuration
        let reply = rig.reloader(load: { throw CleanExit.failure("/etc/keepalived: no such file", code: SysExit.noInput) })
            .reload(trigger: "test", on: .claimed("the test's thread"))
        #expect(!reply.ok)
        #expect(reply.error == "reload refused: /etc/keepalived: no such file")
        #expect(rig.manager.configuration == before)
        #expect(rig.scanner.base == before)
        #expect(rig.appliedCount == 0)
    }

    @Test("the daemon's own settings refused: the scanner's options rolled back, the manager untouched, nothing applied")
    func refusedSettings() throws {
        let rig = try Rig(["-d", "null", "--volume", "0.01"])
        let before = rig.manager.configuration
        let seen = Mutex<[String]?>(nil)
        let reply = rig.reloader(load: { try PlaybackOptions.parse(["-d", "other", "--volume", "0.02"]) }, prepare: { _, configuration in
            seen.withLock { $0 = configuration.devices }
            throw Refused()
        }).reload(trigger: "test", on: .claimed("the test's thread"))
        let prepared = seen.withLock { $0 }
        #expect(prepared == ["other"], "prepare sees the configuration the reload would apply")
        #expect(!reply.ok)
        #expect(reply.error == "reload refused: --linger needs a sound server")
        #expect(rig.scanner.base == before)
        #expect(rig.scanner.planned() == before)
        #expect(rig.manager.configuration == before)
        #expect(rig.appliedCount == 0)
    }
}
