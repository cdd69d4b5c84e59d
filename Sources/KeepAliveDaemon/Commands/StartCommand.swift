import ArgumentParser
import _KeepalivedControlProtocol
import CKeepAliveLinux
import Glibc

/// `keepalived start`: launch `keepalived run` as a detached daemon and return once it plays or
/// waits for its device.
package struct StartCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "start",
        abstract: "Start a background daemon with run's options; return once it plays or waits for its device.",
        discussion: """
            The daemon runs in its own session with stdin from /dev/null. Its log goes to the \
            journal under systemd, else to keepalived.log beside the control socket (shown by \
            'keepalived status'). On failure nothing is left behind and the daemon's own reason \
            and exit code are reported: 64 bad option, 65 bad WAV, 66 unreadable clip, 75 already running.
            """)

    @OptionGroup var playback: PlaybackOptions
    @OptionGroup var socket: SocketOption

    /// How long the daemon may take to open its outputs (or find them missing). A fast machine
    /// needs well under a second; a slow or busy one seconds (a hint scan, the first answer of a
    /// sound server, every output's open through it: 5 s were not always enough on an emulated
    /// CPU). A daemon still not ready after this is stuck, and killed.
    static let readinessTimeout: Duration = .seconds(15)

    package func run() throws {
        // Refuse bad options and clips here, so no daemon is ever started only to die.
        do {
            _ = try playback.lingerPlan(for: playback.makeConfiguration())
        } catch let exit as CleanExit {
            throw exit.exit()
        }
        let paths = socket.paths
        if case .success(let reply) = ControlClient.send("status", to: paths) {
            throw CleanExit.failure("already running (pid \(reply.status?.pid ?? reply.pid ?? 0)) on \(paths.socket)", code: SysExit.tempFail).exit()
        }
        do { try paths.prepareDirectory() } catch {
            throw CleanExit.failure("cannot use runtime directory \(paths.directory): \(error)", code: SysExit.cannotCreate).exit()
        }

        let underSystemd = RuntimePaths.environment("JOURNAL_STREAM") != nil
        let logFile = underSystemd ? nil : paths.logFile
        var arguments = ["run"] + Self.runArguments()
        if socket.path == nil { arguments += ["--socket", paths.socket] }
        if let logFile { arguments += ["--log-file", logFile] }
        let pid = try spawnDaemon(arguments: arguments, logFile: logFile)

        let clock = ContinuousClock()
        let deadline = clock.now + Self.readinessTimeout
        while true {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                let code = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
                let reason = logFile.flatMap(Self.lastError(in:)) ?? "exit status \(code)"
                throw CleanExit.failure("the daemon failed to start: \(reason)", code: ExitCode(code == 0 ? 70 : code)).exit()
            }
            if case .success(let reply) = ControlClient.send("status", to: paths, timeout: .milliseconds(500)),
               let daemon = reply.status, daemon.pid == pid, Self.isReady(daemon) {
                printOutput("keepalived started (pid \(pid)); \(Self.describeOutputs(daemon))" + (logFile.map { "; log: \($0)" } ?? ""))
                return
            }
            if clock.now >= deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                unlink(paths.socket)
                throw CleanExit.failure("the daemon did not become ready within \(Self.readinessTimeout); killed it", code: SysExit.software).exit()
            }
            sleep(for: .milliseconds(10))
        }
    }

    /// Ready once every output plays or waits for its device. A selection that found no output
    /// yet waits for one to appear: that is a ready daemon too, not one to kill.
    static func isReady(_ daemon: DaemonStatus) -> Bool {
        daemon.state != "starting" && daemon.state != "stopped"
            && daemon.outputs.allSatisfy { $0.state != "starting" && $0.state != "stopped" }
    }

    /// `hdmi:CARD=PCH,DEV=0: playing, default: waiting (no-device)`, or the overall state when
    /// there is no output yet.
    static func describeOutputs(_ daemon: DaemonStatus) -> String {
        func describe(_ state: String, _ reason: String?) -> String { state + (reason.map { " (\($0))" } ?? "") }
        guard !daemon.outputs.isEmpty else { return "no output yet: \(describe(daemon.state, daemon.reason))" }
        return daemon.outputs.map { "\($0.device): \(describe($0.state, $0.reason))" }.joined(separator: ", ")
    }

    /// The arguments after `start`, passed on to `run` unchanged.
    private static func runArguments() -> [String] {
        let all = Array(CommandLine.arguments.dropFirst())
        guard let index = all.firstIndex(of: "start") else { return [] }
        return Array(all[(index + 1)...])
    }

    private func spawnDaemon(arguments: [String], logFile: String?) throws -> pid_t {
        var executable = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &executable, executable.count - 1)
        let path = length > 0 ? String(decoding: executable[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]

        // Its own session, stdin from /dev/null, both outputs to the log file (or the journal's
        // stream, inherited, under systemd).
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = "/dev/null".withCString { devNull in
            logFile.withOptionalCString { log in
                var options = csystem_spawn_options(stdin_path: devNull, stdout_path: log, stderr_path: nil,
                                                    stderr_to_stdout: log == nil ? 0 : 1, append: 1, new_session: 1,
                                                    new_process_group: 0, output_fd: -1, search_path: 0)
                return csystem_spawn(&pid, path, argv, environ, &options)
            }
        }
        guard result == 0 else {
            throw CleanExit.failure("cannot start \(path): \(Errno(result))", code: SysExit.software).exit()
        }
        return pid
    }

    /// The daemon's own reason for failing: the last error line it logged.
    private static func lastError(in logFile: String) -> String? {
        guard let file = fopen(logFile, "re") else { return nil }
        defer { fclose(file) }
        var last: String?
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, Int32(buffer.count), file) != nil {
            let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if line.contains("error") { last = line.trimmingSuffixNewline() }
        }
        return last.map { $0.hasPrefix("keepalived: error: ") ? String($0.dropFirst("keepalived: error: ".count)) : $0 }
    }
}

extension Optional<String> {
    /// Calls `body` with the string as a C string, or with nil.
    func withOptionalCString<Result>(_ body: (UnsafePointer<CChar>?) -> Result) -> Result {
        guard let self else { return body(nil) }
        return self.withCString(body)
    }
}

extension String {
    func trimmingSuffixNewline() -> String {
        var text = self
        while text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
