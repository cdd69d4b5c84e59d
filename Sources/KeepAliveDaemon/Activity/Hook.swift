import CKeepAliveLinux
import KeepAlive
import Logging
import Glibc

/// A command `--on-active` or `--on-idle` runs: its words split as a shell would split plain and
/// quoted words, and run without a shell (no expansion, no redirection, no `;`): `--on-active
/// 'gpioset gpiochip0 17=1'` runs `gpioset` with two arguments, found in `PATH`.
///
/// It runs with keepalived's environment and `KEEPALIVED_EVENT` (`active`, `idle`),
/// `KEEPALIVED_OUTPUT`, `KEEPALIVED_PROGRAM`, and `KEEPALIVED_CARD`/`KEEPALIVED_DEVICE` or
/// `KEEPALIVED_SINK` where they apply; stdin is `/dev/null`, and what it prints goes to the log,
/// a line each. It may take ``timeout``: then its process group gets SIGTERM, and SIGKILL a
/// second later; a process that SIGKILL does not end either (asleep in the kernel) is given up
/// after ``abandonAfter`` and said so. What it prints is read only while it runs: a child it
/// leaves in the background holding its output (`relay on; sleep 600 &` in a script) delays
/// nothing. A failure is logged, never fatal.
///
/// ```swift
/// let hook = try Hook(option: "--on-active", command: "mosquitto_pub -t amp/power -m on")
/// hook.run(environment: ["KEEPALIVED_EVENT": "active"], logger: logger)   // blocks until it ends
/// ```
struct Hook: Equatable, Sendable {
    let arguments: [String]
    var timeout: Duration = .seconds(30)
    /// How long after SIGKILL a process that has not ended is given up (its exit is collected
    /// by a later run).
    static let abandonAfter: Duration = .seconds(5)

    /// - Throws: `CleanExit` (64) naming `option` when the words do not split or name nothing.
    init(option: String, command: String) throws {
        guard let words = ShellWords.split(command), let first = words.first, !first.isEmpty else {
            throw CleanExit.failure("\(option) '\(command)': give a command and its arguments, as in \(option) 'gpioset gpiochip0 17=1' (no shell: quote words, nothing else)", code: SysExit.usage)
        }
        arguments = words
    }

    /// How it ended, for the log.
    enum Outcome: Equatable, Sendable {
        case exited(Int32)
        case signaled(Int32)
        case timedOut
        case notStarted(Errno)
        /// It outlived SIGKILL (asleep in the kernel, state D): no longer waited for.
        case abandoned(pid_t)
    }

    /// A hook past its timeout: SIGTERM to its group, SIGKILL a second later, given up
    /// ``Hook/abandonAfter`` after that. The wait loop's decisions, without a process, so that
    /// each step is tested without waiting for one.
    ///
    /// ```swift
    /// var escalation = Hook.Escalation(started: .now, timeout: .seconds(30))
    /// let action = escalation.next(at: .now + .seconds(31))   // .terminate
    /// ```
    struct Escalation: Equatable, Sendable {
        /// How long SIGTERM has to end the group before SIGKILL.
        static let killAfter: Duration = .seconds(1)

        enum State: Equatable, Sendable {
            /// Within its timeout.
            case running
            /// Overran: its group has had SIGTERM, at `since`.
            case terminated(since: ContinuousClock.Instant)
            /// SIGTERM did not end it: SIGKILL too (SIGTERM's time kept: the wait for it to
            /// end is counted from there).
            case killed(terminatedSince: ContinuousClock.Instant)
        }

        /// What the wait loop does now.
        enum Action: Equatable, Sendable {
            /// Waits on.
            case wait
            /// SIGTERM to the group.
            case terminate
            /// SIGKILL to the group.
            case kill
            /// Stops waiting (``Outcome/abandoned(_:)``).
            case abandon
        }

        let started: ContinuousClock.Instant
        let timeout: Duration
        private(set) var state = State.running

        init(started: ContinuousClock.Instant, timeout: Duration) {
            self.started = started
            self.timeout = timeout
        }

        /// Whether it was ever signalled: an exit after that is a timeout, whatever its status.
        var timedOut: Bool { state != .running }

        /// The step due at `now`, taken.
        mutating func next(at now: ContinuousClock.Instant) -> Action {
            switch state {
            case .running:
                guard started.duration(to: now) > timeout else { return .wait }
                state = .terminated(since: now)
                return .terminate
            case .terminated(let since):
                guard since.duration(to: now) > Self.killAfter else { return .wait }
                state = .killed(terminatedSince: since)
                return .kill
            case .killed(let since):
                return since.duration(to: now) > Self.killAfter + Hook.abandonAfter ? .abandon : .wait
            }
        }
    }

    /// Processes given up on (``Outcome/abandoned(_:)``), collected once they end so that none
    /// stays a zombie: each run looks.
    private static let abandoned = Locked<[pid_t]>([])

    /// Runs the command and waits for it (at most ``timeout``, and a second for SIGKILL's turn):
    /// on a thread that may block that long.
    @discardableResult
    func run(environment extra: [String: String], logger: Logger) -> Outcome {
        let started = ContinuousClock.now
        Self.abandoned.withLock { pids in pids.removeAll { waitpid($0, nil, WNOHANG) != 0 } }
        var ends: [Int32] = [0, 0]
        // Close-on-exec from the start, atomically: neither end for another child the daemon
        // starts meanwhile (the command's own copies, 1 and 2, are made by the spawn).
        guard csystem_pipe_cloexec(&ends) == 0 else { return report(.notStarted(Errno(errno)), since: started, logger: logger) }
        // Only what is there is read: a background child holding the write end never blocks us.
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)
        defer { close(ends[0]) }
        var environment: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") { environment[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
            entry += 1
        }
        environment.merge(extra) { $1 }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        // No signal blocked and each at its default (the daemon blocks its own for its
        // signalfd); a process group of its own, so that a timeout ends what it started too.
        let spawned = "/dev/null".withCString { devNull in
            var options = csystem_spawn_options(stdin_path: devNull, stdout_path: nil, stderr_path: nil, stderr_to_stdout: 0, append: 0,
                                                new_session: 0, new_process_group: 1, output_fd: ends[1], search_path: 1)
            return csystem_spawn(&pid, arguments[0], argv, envp, &options)
        }
        close(ends[1])
        guard spawned == 0 else { return report(.notStarted(Errno(spawned)), since: started, logger: logger) }
        logger.info("hook started", metadata: ["hook": "\(arguments.joined(separator: " "))", "pid": "\(pid)", "event": "\(extra["KEEPALIVED_EVENT"] ?? "?")"])
        let outcome = wait(for: pid, reading: ends[0], since: started, logger: logger)
        return report(outcome, since: started, logger: logger)
    }

    /// Logs its output a line at a time until it exits; past the timeout, ends its group.
    private func wait(for pid: pid_t, reading output: Int32, since started: ContinuousClock.Instant, logger: Logger) -> Outcome {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var open = true
        var escalation = Escalation(started: started, timeout: timeout)
        func flush(_ all: Bool) {
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                log(Array(pending[..<newline]), logger: logger)
                pending.removeSubrange(...newline)
            }
            if all, !pending.isEmpty {
                log(pending, logger: logger)
                pending = []
            }
        }
        while true {
            var status: Int32 = 0
            let ended = waitpid(pid, &status, WNOHANG)
            if ended == pid {
                // What it printed before it ended, as far as it is there now: a child it left
                // running may hold the pipe open for as long as it likes.
                if open { while drain(output, into: &pending, buffer: &buffer) == .more {} }
                flush(true)
                if escalation.timedOut { return .timedOut }
                let signal = status & 0x7f
                return signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
            }
            switch escalation.next(at: .now) {
            case .wait: break
            case .terminate: kill(-pid, SIGTERM)
            case .kill: kill(-pid, SIGKILL)
            case .abandon:
                flush(true)
                Self.abandoned.withLock { $0.append(pid) }
                return .abandoned(pid)
            }
            var descriptor = pollfd(fd: open ? output : -1, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, 50)
            if open, descriptor.revents != 0 {
                open = drain(output, into: &pending, buffer: &buffer) != .ended
                flush(false)
            }
        }
    }

    private enum Drained { case more, empty, ended }

    /// Reads what is there without waiting: `more` when a read filled the buffer or was
    /// interrupted, `empty` when nothing more is there now, `ended` at the end of the output.
    private func drain(_ fd: Int32, into pending: inout [UInt8], buffer: inout [UInt8]) -> Drained {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count > 0 {
            pending += buffer[0..<count]
            // Bounded: a command that prints without newlines is logged in pieces.
            if pending.count > 4096, !pending.contains(UInt8(ascii: "\n")) { pending.append(UInt8(ascii: "\n")) }
            return .more
        }
        if count < 0, errno == EINTR { return .more }
        return count < 0 && errno == EAGAIN ? .empty : .ended
    }

    private func log(_ line: [UInt8], logger: Logger) {
        let text = String(decoding: line, as: UTF8.self)
        guard !text.isEmpty else { return }
        logger.info("hook output", metadata: ["hook": "\(arguments[0])", "line": "\(text)"])
    }

    private func report(_ outcome: Outcome, since started: ContinuousClock.Instant, logger: Logger) -> Outcome {
        let command = arguments.joined(separator: " ")
        let ms = "\(started.duration(to: .now).wholeMilliseconds)"
        switch outcome {
        case .exited(0):
            logger.info("hook finished", metadata: ["hook": "\(command)", "ms": "\(ms)"])
        case .exited(let code):
            logger.warning("hook failed", metadata: ["hook": "\(command)", "exit": "\(code)", "ms": "\(ms)"])
        case .signaled(let signal):
            logger.warning("hook killed by a signal", metadata: ["hook": "\(command)", "signal": "\(signal)", "ms": "\(ms)"])
        case .timedOut:
            logger.warning("hook timed out and was ended", metadata: ["hook": "\(command)", "timeout": "\(timeout)", "ms": "\(ms)"])
        case .notStarted(let error):
            logger.warning("hook could not be started", metadata: ["hook": "\(command)", "error": "\(error)"])
        case .abandoned(let pid):
            logger.error("hook did not end after SIGKILL (asleep in the kernel): no longer waited for; the next hooks run",
                         metadata: ["hook": "\(command)", "pid": "\(pid)", "ms": "\(ms)"])
        }
        return outcome
    }
}
