import ArgumentParser
import Testing

@testable import KeepAliveDaemon

/// `run`'s assembly reads options the parse has checked; one that fails there anyway must stop
/// the command with a usage error, never run the daemon on a default (issue 59: `--pause-when`
/// and `--cec` had been replaced by their defaults without a word).
@Suite("DaemonAssembly: an option that fails after the parse is a fault, not a default")
struct DaemonAssemblyTests {
    @Test("a checked option's value passes through; its failure exits with EX_USAGE or the code it names")
    func checkedOption() throws {
        #expect(try DaemonAssembly.checkedOption { 3 } == 3)
        #expect(throws: SysExit.usage) {
            try DaemonAssembly.checkedOption { () throws -> Int in throw ValidationError("--pause-when takes 'locked' or 'idle', not 'never'") }
        }
        #expect(throws: SysExit.noInput) {
            try DaemonAssembly.checkedOption { () throws -> Int in throw CleanExit.failure("no file", code: SysExit.noInput) }
        }
    }
}
