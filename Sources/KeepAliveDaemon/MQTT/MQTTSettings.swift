import Glibc

/// Where `--mqtt` publishes and how it logs in: the broker from the URL, the secret's source
/// (never the secret itself: it is read at the daemon's start, ``MQTTSettings/readPassword()``), TLS,
/// the client id and the topics. Made from `--mqtt` and its companions; nothing here does I/O but the
/// password's read.
///
/// ```swift
/// let settings = try MQTTSettings(url: "mqtts://box@broker.lan", host: "livingroom")
/// settings.port          // 8883
/// settings.prefix        // "keepalived/livingroom"
/// settings.stateTopic    // "keepalived/livingroom/state"
/// ```
struct MQTTSettings: Equatable, Sendable {
    /// Where the secret comes from.
    enum PasswordSource: Equatable, Sendable {
        case none
        /// `--mqtt-password-file`.
        case file(String)
        /// A systemd credential: `$CREDENTIALS_DIRECTORY/mqtt-password` (`LoadCredential=`).
        case credential(String)

        /// Where the password came from, for the journal (never the password).
        var spoken: String {
            switch self {
            case .none: "none"
            case .file(let path): "from \(path)"
            case .credential: "the systemd credential \(MQTTSettings.credentialName)"
            }
        }
    }

    /// The credential's name in `$CREDENTIALS_DIRECTORY`.
    static let credentialName = "mqtt-password"
    /// The protocol's keep-alive: with nothing changing, a ping each this long is all MQTT costs.
    static let keepAlive = Duration.seconds(60)

    var host: String
    var port: Int
    var tls: Bool
    var user: String?
    var passwordSource: PasswordSource = .none
    var caFile: String?
    var certificateFile: String?
    var keyFile: String?
    var clientID: String
    /// The topics' root: `PREFIX/availability`, `PREFIX/state`.
    var prefix: String
    /// Home Assistant's discovery prefix (its default, `homeassistant`).
    var discoveryPrefix = "homeassistant"
    /// `--mqtt-commands`: the keep-alive switch and the power buttons are offered and obeyed.
    var commands = false

    var availabilityTopic: String { "\(prefix)/availability" }
    var stateTopic: String { "\(prefix)/state" }

    /// The broker as `status` and the journal name it: never with a secret.
    var brokerDescription: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "\(tls ? "mqtts" : "mqtt")://\(user.map { "\($0)@" } ?? "")\(host):\(port)"
    }

    /// A URL's problem, worded for `--mqtt`.
    struct Invalid: Error, Equatable, CustomStringConvertible {
        let description: String
    }

    /// Parses `mqtt://[user@]host[:port][/]` or `mqtts://…` (an IPv6 host in brackets); `host`
    /// names this box in the default client id and prefix.
    init(url: String, host boxName: String) throws(Invalid) {
        let scheme: String
        let rest: Substring
        if url.hasPrefix("mqtt://") {
            (scheme, rest) = ("mqtt", url.dropFirst("mqtt://".count))
        } else if url.hasPrefix("mqtts://") {
            (scheme, rest) = ("mqtts", url.dropFirst("mqtts://".count))
        } else {
            throw Invalid(description: "--mqtt takes mqtt://HOST[:PORT] or mqtts://HOST[:PORT] (user@ allowed), not '\(url)'")
        }
        var authority = rest
        if let slash = authority.firstIndex(of: "/") {
            guard authority[slash...] == "/" else {
                throw Invalid(description: "--mqtt: '\(url)' has a path; the topics are --mqtt-prefix's")
            }
            authority = authority[..<slash]
        }
        guard !authority.contains("?"), !authority.contains("#") else {
            throw Invalid(description: "--mqtt: '\(url)' has a query or fragment; give mqtt://HOST[:PORT]")
        }
        var user: String?
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            guard !userInfo.contains(":") else {
                throw Invalid(description: "--mqtt: the URL holds a password; give it in --mqtt-password-file or the systemd credential '\(Self.credentialName)', never on the command line")
            }
            guard let decoded = Self.percentDecoded(userInfo), !decoded.isEmpty else {
                throw Invalid(description: "--mqtt: the user in '\(url)' is empty or not valid percent-encoding")
            }
            user = decoded
            authority = authority[authority.index(after: at)...]
        }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw Invalid(description: "--mqtt: '\(url)' has an unclosed IPv6 address") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw Invalid(description: "--mqtt: '\(url)' has text after its IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-_:".contains($0)) }) else {
            throw Invalid(description: "--mqtt: '\(url)' has no valid host name")
        }
        let port: Int
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw Invalid(description: "--mqtt: the port in '\(url)' is not a number from 1 to 65535")
            }
            port = number
        } else {
            port = scheme == "mqtts" ? 8883 : 1883
        }
        self.host = String(host)
        self.port = port
        tls = scheme == "mqtts"
        self.user = user
        let box = Self.topicWord(boxName)
        clientID = "keepalived-\(box)"
        prefix = "keepalived/\(box)"
    }

    /// The secret, read now: a file's first line (its newline dropped). Nil for no password.
    /// - Throws: ``Invalid`` naming the file and the system's reason.
    func readPassword() throws(Invalid) -> String? {
        let path: String
        switch passwordSource {
        case .none: return nil
        case .file(let file): path = file
        case .credential(let file): path = file
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Invalid(description: "cannot read the MQTT password from \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while bytes.count <= 65536 {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw Invalid(description: "cannot read the MQTT password from \(path): \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        let line = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        guard let text = String(validating: line.filter { $0 != UInt8(ascii: "\r") }, as: UTF8.self), !text.isEmpty, bytes.count <= 65536 else {
            throw Invalid(description: "the MQTT password in \(path) is empty, too long or not UTF-8")
        }
        return text
    }

    /// This box's host name (its first label).
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "box" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(name.split(separator: ".").first ?? "box")
    }

    /// `text` fit for one topic level and a client id: letters, digits, `-` and `_` kept, the
    /// rest `_` (a host name's dots too, so `PREFIX` stays two levels).
    static func topicWord(_ text: String) -> String {
        let word = String(text.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") ? $0 : "_" })
        return word.isEmpty ? "box" : word
    }

    /// Checks a topic prefix given by `--mqtt-prefix`: levels of text, no wildcards.
    static func checkPrefix(_ prefix: String) throws(Invalid) {
        guard !prefix.isEmpty, !prefix.hasPrefix("/"), !prefix.hasSuffix("/"), !prefix.contains("//"),
              !prefix.contains("+"), !prefix.contains("#"), !prefix.contains("\0"), prefix.utf8.count <= 1024 else {
            throw Invalid(description: "--mqtt-prefix takes topic levels like keepalived/livingroom (no +, #, empty level or leading or trailing /), not '\(prefix)'")
        }
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next(), let low = iterator.next(),
                  let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(value)
        }
        guard let text = String(validating: bytes, as: UTF8.self), !text.contains("\0") else { return nil }
        return text
    }
}
