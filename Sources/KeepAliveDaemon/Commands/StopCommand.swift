import ArgumentParser
import Glibc

/// `keepalived stop`: ask the daemon to stop and wait until it is gone.
package struct StopCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "stop",
        abstract: "Stop the running daemon and wait until it has exited.",
        discussion: "Waits up to 2 s, then kills it with a warning. Nothing running is not an error (exit 0), like systemctl stop.")

    @OptionGroup var socket: SocketOption

    package func run() throws {
        let paths = socket.paths
        let pid: Int32
        switch ControlClient.send("stop", to: paths) {
        case .success(let reply):
            guard let replied = reply.pid else { throw CleanExit.failure("the daemon did not say its pid", code: ExitCode(1)).exit() }
            pid = replied
        case .failure(.notRunning):
            printOutput("keepalived is not running")
            return
        case .failure(let failure):
            printError("keepalived: error: \(failure)")
            throw ExitCode(1)
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(2)
        while processExists(pid) {
            if clock.now >= deadline {
                printError("keepalived: warning: pid \(pid) did not exit within 2 s; sending SIGKILL")
                kill(pid, SIGKILL)
                unlink(paths.socket)
                break
            }
            sleep(for: .milliseconds(5))
        }
        printOutput("keepalived stopped (pid \(pid))")
    }
}

/// Whether `pid` names a live process; a zombie waiting to be reaped has already exited.
func processExists(_ pid: Int32) -> Bool {
    guard kill(pid, 0) == 0 || errno == EPERM else { return false }
    guard let file = fopen("/proc/\(pid)/stat", "re") else { return false }
    defer { fclose(file) }
    var buffer = [CChar](repeating: 0, count: 512)
    guard fgets(&buffer, Int32(buffer.count), file) != nil else { return false }
    let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard let close = line.utf8.lastIndex(of: UInt8(ascii: ")")) else { return true }
    let state = line[line.index(after: close)...].trimmingPrefix(" ").first
    return state != "Z" && state != "X"
}
