import CKeepAliveLinux
import Foundation

/// Debian's own MQTT broker (`mosquitto`), started by a test on 127.0.0.1 at a port of its own:
/// anonymous, or with a password file and an ACL, with or without TLS (a CA the test made).
/// Spawned with the daemon's own spawn setup (CKeepAliveLinux's `csystem_spawn`: nothing blocked,
/// every signal at its default; a broker started by Foundation's `Process` from a test's thread
/// inherits that thread's blocked SIGTERM and never ends), reaped with waitpid, killed on deinit.
///
/// ```swift
/// let broker = try MosquittoBroker(users: ["box": "secret"], acl: "user box\ntopic readwrite keepalived/#\n")
/// try await broker.start()
/// let retained = try broker.retained("keepalived/box/availability", user: "box", password: "secret")
/// broker.stop()
/// ```
public final class MosquittoBroker: @unchecked Sendable {
    public static let brokerPath = "/usr/sbin/mosquitto"
    public static var isInstalled: Bool {
        access(brokerPath, X_OK) == 0 && access("/usr/bin/mosquitto_sub", X_OK) == 0 && access("/usr/bin/mosquitto_passwd", X_OK) == 0
    }

    /// Where the broker's files are: its configuration, password file, log, and the test's CA.
    public let directory: URL
    public let port: Int
    /// The TLS files, when the broker listens with TLS: the CA that signed its certificate (for
    /// the client), issued for `localhost`.
    public let caFile: String?
    private var pid: pid_t?
    private let lock = NSLock()

    /// - Parameters:
    ///   - users: user names and passwords; empty: anonymous clients are allowed.
    ///   - acl: the broker's ACL file's text, with `users`.
    ///   - tls: listen with TLS, a certificate for `localhost` signed by a CA made here (openssl).
    public init(users: [String: String] = [:], acl: String? = nil, tls: Bool = false) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("mosquitto-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        port = try Self.freePort()
        var conf = "per_listener_settings false\npersistence false\nlog_dest file \(directory.path)/broker.log\n"
        // Started as root, mosquitto drops to its own user, which cannot write the test's files.
        if getuid() == 0 { conf += "user root\n" }
        conf += "log_type error\nlog_type warning\nlog_type notice\nlog_type information\nconnection_messages true\n"
        conf += "listener \(port) 127.0.0.1\n"
        if tls {
            try Self.makeCertificates(in: directory)
            conf += "cafile \(directory.path)/ca.crt\ncertfile \(directory.path)/server.crt\nkeyfile \(directory.path)/server.key\n"
            caFile = directory.appendingPathComponent("ca.crt").path
        } else {
            caFile = nil
        }
        if users.isEmpty {
            conf += "allow_anonymous true\n"
        } else {
            let passwords = directory.appendingPathComponent("passwords").path
            _ = FileManager.default.createFile(atPath: passwords, contents: Data())
            for (user, password) in users.sorted(by: { $0.key < $1.key }) {
                try runTool("/usr/bin/mosquitto_passwd", ["-b", passwords, user, password])
            }
            conf += "allow_anonymous false\npassword_file \(passwords)\n"
        }
        if let acl {
            let path = directory.appendingPathComponent("acl").path
            try acl.write(toFile: path, atomically: true, encoding: .utf8)
            conf += "acl_file \(path)\n"
        }
        try conf.write(to: directory.appendingPathComponent("mosquitto.conf"), atomically: true, encoding: .utf8)
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the broker and waits until it takes TCP connections (bounded: 10 s).
    public func start() async throws {
        let conf: String = directory.appendingPathComponent("mosquitto.conf").path
        let words: [String] = [Self.brokerPath, "-c", conf]
        let argv = words.map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        let output = directory.appendingPathComponent("broker.out").path
        var child: pid_t = 0
        let result = "/dev/null".withCString { input in
            output.withCString { out in
                var options = csystem_spawn_options(stdin_path: input, stdout_path: out, stderr_path: nil, stderr_to_stdout: 1, append: 1,
                                                    new_session: 0, new_process_group: 0, output_fd: -1, search_path: 0)
                return csystem_spawn(&child, Self.brokerPath, argv, envp, &options)
            }
        }
        guard result == 0 else { throw SpawnFailed(command: Self.brokerPath, code: result) }
        lock.withLock { pid = child }
        try await waitUntil("mosquitto to listen on port \(port)", timeout: .seconds(10)) { [port] in
            guard self.isRunning else { throw SpawnFailed(command: "mosquitto (it exited: \(self.log))", code: 0) }
            return Self.canConnect(port)
        }
    }

    public var isRunning: Bool {
        lock.withLock {
            guard let pid else { return false }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                self.pid = nil
                return false
            }
            return true
        }
    }

    /// SIGTERM, then SIGKILL after 5 s; reaped.
    public func stop() { end(first: SIGTERM) }

    /// SIGKILL at once, reaped: a broker that died.
    public func kill() { end(first: SIGKILL) }

    private func end(first signal: Int32) {
        lock.withLock {
            guard let pid else { return }
            Glibc.kill(pid, signal)
            var status: Int32 = 0
            let deadline = ContinuousClock.now + .seconds(5)
            while waitpid(pid, &status, WNOHANG) == 0 {
                if ContinuousClock.now > deadline {
                    Glibc.kill(pid, SIGKILL)
                    waitpid(pid, &status, 0)
                    break
                }
                usleep(10_000)
            }
            self.pid = nil
        }
    }

    /// The broker's own log (connections, refusals, errors).
    public var log: String { (try? FileContents.text(directory.appendingPathComponent("broker.log").path)) ?? "" }

    /// The retained message on `topic` now, read by `mosquitto_sub` (nil: none within 3 s).
    public func retained(_ topic: String, user: String? = nil, password: String? = nil) throws -> String? {
        let messages = try subscribe(topic, user: user, password: password, count: 1, seconds: 3, retainedOnly: true)
        return messages.first?.payload
    }

    /// The messages `mosquitto_sub` prints for `topic` (a filter: `+` and `#` allowed), at most
    /// `count`, waiting at most `seconds`: each with its topic.
    public func subscribe(_ topic: String, user: String? = nil, password: String? = nil, count: Int, seconds: Int,
                          retainedOnly: Bool = false) throws -> [(topic: String, payload: String)] {
        var arguments = ["-h", "127.0.0.1", "-p", "\(port)", "-t", topic, "-C", "\(count)", "-W", "\(seconds)", "-F", "%t %p"]
        if retainedOnly { arguments.append("--retained-only") }
        if let user { arguments += ["-u", user] }
        if let password { arguments += ["-P", password] }
        if let caFile { arguments += ["--cafile", caFile] }
        let output = (try? runTool("/usr/bin/mosquitto_sub", arguments, allowFailure: true)) ?? ""
        return output.split(separator: "\n", omittingEmptySubsequences: true).map { line in
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
    }

    /// Publishes `payload` on `topic` with `mosquitto_pub` (QoS 1; retained when asked).
    public func publish(_ topic: String, _ payload: String, retain: Bool = false, user: String? = nil, password: String? = nil) throws {
        var arguments = ["-h", "127.0.0.1", "-p", "\(port)", "-t", topic, "-m", payload, "-q", "1"]
        if retain { arguments.append("-r") }
        if let user { arguments += ["-u", user] }
        if let password { arguments += ["-P", password] }
        if let caFile { arguments += ["--cafile", caFile] }
        try runTool("/usr/bin/mosquitto_pub", arguments)
    }

    public static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// A port nothing listens on now: bound at 0 and let go (the kernel does not hand it out
    /// again at once).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SpawnFailed(command: "socket", code: errno) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw SpawnFailed(command: "bind", code: errno) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A CA and a server certificate for `localhost` (and 127.0.0.1) it signed.
    static func makeCertificates(in directory: URL) throws {
        let d = directory.path
        let openssl = "/usr/bin/openssl"
        try runTool(openssl, ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(d)/ca.key", "-out", "\(d)/ca.crt",
                              "-days", "2", "-subj", "/CN=keepalived test CA"])
        try runTool(openssl, ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(d)/server.key", "-out", "\(d)/server.csr",
                              "-subj", "/CN=localhost"])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: "\(d)/san.ext", atomically: true, encoding: .utf8)
        try runTool(openssl, ["x509", "-req", "-in", "\(d)/server.csr", "-CA", "\(d)/ca.crt", "-CAkey", "\(d)/ca.key", "-CAcreateserial",
                              "-out", "\(d)/server.crt", "-days", "2", "-extfile", "\(d)/san.ext"])
        chmod("\(d)/server.key", 0o644)
    }
}

/// A spawn the system refused, or a tool that failed.
public struct SpawnFailed: Error, CustomStringConvertible {
    public let command: String
    public let code: Int32
    public init(command: String, code: Int32) {
        self.command = command
        self.code = code
    }
    public var description: String { "\(command) failed (\(code))" }
}

/// Runs a tool to its end (spawned as the broker is) and returns what it printed on its
/// standard output; a nonzero exit throws (with its standard error) unless `allowFailure`.
@discardableResult
public func runTool(_ path: String, _ arguments: [String], allowFailure: Bool = false) throws -> String {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("tool-\(UUID().uuidString.prefix(8))").path
    let (outputPath, errorPath) = ("\(base).out", "\(base).err")
    defer {
        unlink(outputPath)
        unlink(errorPath)
    }
    let words: [String] = [path] + arguments
    let argv = words.map { strdup($0) } + [nil]
    let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var child: pid_t = 0
    let result = "/dev/null".withCString { input in
        outputPath.withCString { output in
            errorPath.withCString { errors in
                var options = csystem_spawn_options(stdin_path: input, stdout_path: output, stderr_path: errors, stderr_to_stdout: 0, append: 0,
                                                    new_session: 0, new_process_group: 0, output_fd: -1, search_path: 0)
                return csystem_spawn(&child, path, argv, envp, &options)
            }
        }
    }
    guard result == 0 else { throw SpawnFailed(command: path, code: result) }
    var status: Int32 = 0
    while waitpid(child, &status, 0) < 0, errno == EINTR {}
    let text = (try? FileContents.text(outputPath)) ?? ""
    let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    if exit != 0, !allowFailure {
        throw SpawnFailed(command: "\(path) \(arguments.joined(separator: " ")): \(text)\((try? FileContents.text(errorPath)) ?? "")", code: exit)
    }
    return text
}
