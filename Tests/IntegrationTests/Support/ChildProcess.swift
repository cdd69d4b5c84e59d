import CKeepAliveLinux
import Foundation
import TestSupport

/// A process the test launched: the built `keepalived`, a sound server, a recorder.
///
/// Spawned with the daemon's own posix_spawn setup (CKeepAliveLinux's `csystem_spawn`) and reaped with
/// waitpid, not Foundation's `Process`, whose exit detection depends on a run loop that async
/// tests do not spin. Output goes to files the test
/// reads while the process runs. Killed on deinit.
final class ChildProcess: @unchecked Sendable {
    let name: String
    let pid: pid_t
    let stdoutURL: URL
    let stderrURL: URL
    let launchedAt = ContinuousClock.now
    private var exitStatus: Int32?
    private let lock = NSLock()

    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
         directory: URL, label: String? = nil, stdin: String = "/dev/null") throws {
        name = label ?? URL(fileURLWithPath: executable).lastPathComponent
        let tag = "\(name)-\(UUID().uuidString.prefix(6))"
        stdoutURL = directory.appendingPathComponent("\(tag).out")
        stderrURL = directory.appendingPathComponent("\(tag).err")
        let path = executable.hasPrefix("/") ? executable : Self.which(executable)
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // The daemon's own spawn setup: children start with nothing blocked and every signal
        // at its default, whatever the test runner set for itself.
        var child: pid_t = 0
        let (outputPath, errorPath) = (stdoutURL.path, stderrURL.path)
        let result = stdin.withCString { input in
            outputPath.withCString { output in
                errorPath.withCString { errors in
                    var options = csystem_spawn_options(stdin_path: input, stdout_path: output, stderr_path: errors,
                                                        stderr_to_stdout: 0, append: 0, new_session: 0,
                                                        new_process_group: 0, output_fd: -1, search_path: 0)
                    return csystem_spawn(&child, path, argv, envp, &options)
                }
            }
        }
        guard result == 0 else { throw SpawnFailed(command: path, code: result) }
        pid = child
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// Reaps the child if it exited; true while it runs.
    var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        if exitStatus != nil { return false }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            exitStatus = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            return false
        }
        return result == 0
    }

    /// The exit status (128 + signal for a killed process), once it exited.
    var terminationStatus: Int32? {
        _ = isRunning
        lock.lock()
        defer { lock.unlock() }
        return exitStatus
    }

    var stderr: String { (try? FileContents.text(stderrURL)) ?? "" }
    var stdout: String { (try? FileContents.text(stdoutURL)) ?? "" }
    var stdoutBytes: Data { (try? FileContents.data(stdoutURL)) ?? Data() }

    func signal(_ number: Int32) { kill(pid, number) }

    /// Waits for the process to exit and returns its status, or throws if it does not in time.
    @discardableResult
    func waitForExit(timeout: Duration) async throws -> Int32 {
        try await waitUntil("\(name) (pid \(pid)) to exit", timeout: timeout, every: .milliseconds(5)) { !isRunning }
        return terminationStatus ?? -1
    }

    /// Sends SIGTERM, as systemd and `keepalived stop` do, and waits for the exit status.
    /// The deadline is at least the stop requirement, `keepalived stop`'s 2 s before SIGKILL
    /// (docs/usage.md), stretched under a sanitizer by `waitUntil`: a test's shorter `within`
    /// measured how fast a stop is on a quiet machine, which a busy one can stretch
    /// (CONTRIBUTING, "What a test may bound in time").
    @discardableResult
    func terminate(within timeout: Duration) async throws -> Int32 {
        signal(SIGTERM)
        return try await waitForExit(timeout: max(timeout, .seconds(2)))
    }

    /// Blocking form for short helper commands inside a synchronous condition.
    func waitForExitBlocking(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while isRunning {
            if ContinuousClock.now > deadline {
                kill(pid, SIGKILL)
                return nil
            }
            usleep(2000)
        }
        return terminationStatus
    }

    /// Waits until stderr contains `text`.
    func waitForLog(_ text: String, timeout: Duration = .seconds(5)) async throws {
        do {
            try await waitUntil("'\(text)' in the log of \(name)", timeout: timeout) { stderr.contains(text) }
        } catch {
            throw DeadlineExceeded(what: "'\(text)' in the log of \(name); log so far:\n\(stderr)", timeout: timeout)
        }
    }

    /// CPU time used so far by all threads (utime + stime from /proc/PID/stat), in seconds.
    func cpuSeconds() throws -> Double {
        let stat = try FileContents.text("/proc/\(pid)/stat")
        let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
        let ticks = Double(fields[11])! + Double(fields[12])!
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func which(_ command: String) -> String {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(command)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return "/usr/bin/\(command)"
    }

    struct SpawnFailed: Error, CustomStringConvertible {
        let command: String
        let code: Int32
        var description: String { "cannot start \(command): \(String(cString: strerror(code)))" }
    }
}

/// Runs a command to completion and returns its exit status and output.
@discardableResult
func runCommand(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                timeout: Duration = .seconds(20)) async throws -> (status: Int32, stdout: String, stderr: String) {
    let directory = FileManager.default.temporaryDirectory
    let child = try ChildProcess(executable, arguments, environment: environment, directory: directory)
    defer {
        try? FileManager.default.removeItem(at: child.stdoutURL)
        try? FileManager.default.removeItem(at: child.stderrURL)
    }
    let status = try await child.waitForExit(timeout: timeout)
    return (status, child.stdout, child.stderr)
}

/// Runs a short command synchronously (for use inside a polled condition); nil if it failed
/// to run, did not finish in `timeout`, or exited non-zero.
func commandOutput(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                   timeout: Duration = .seconds(5)) -> String? {
    let directory = FileManager.default.temporaryDirectory
    guard let child = try? ChildProcess(executable, arguments, environment: environment, directory: directory) else { return nil }
    defer {
        try? FileManager.default.removeItem(at: child.stdoutURL)
        try? FileManager.default.removeItem(at: child.stderrURL)
    }
    guard child.waitForExitBlocking(timeout: timeout) == 0 else { return nil }
    return child.stdout
}

/// Parses `key=value` fields from the first keepalived log line that contains `marker`.
func logFields(_ log: String, line marker: String) -> [String: String]? {
    guard let line = log.split(separator: "\n").first(where: { $0.contains(marker) }) else { return nil }
    var fields: [String: String] = [:]
    for word in line.split(separator: " ") {
        let parts = word.split(separator: "=", maxSplits: 1)
        if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
    }
    return fields
}

/// A helper process that failed or died, with what it wrote.
struct Failed: Error, CustomStringConvertible {
    let what: String
    let log: String
    var description: String { "\(what) failed:\n\(log)" }
}
