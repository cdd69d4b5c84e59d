import ArgumentParser
import Glibc
import Testing

@testable import KeepAliveDaemon

/// `--mqtt`'s URL and companions: what is taken, and the error for what is not (naming the
/// option and the value, never echoing a password).
@Suite("MQTT options")
struct MQTTOptionsTests {
    static func settings(_ arguments: [String], credentials: String? = nil) throws -> MQTTSettings? {
        try MQTTOptions.parse(arguments).settings(host: "living", credentials: credentials)
    }

    static func refusal(_ arguments: [String]) -> String {
        do {
            _ = try MQTTOptions.parse(arguments).settings(host: "box", credentials: nil)
            return "accepted"
        } catch {
            return MQTTOptions.message(for: error)
        }
    }

    @Test("a broker's URL: scheme, user, host, port, defaults from the host name")
    func urls() throws {
        let plain = try #require(try Self.settings(["--mqtt", "mqtt://broker.lan"]))
        #expect(plain.host == "broker.lan" && plain.port == 1883 && !plain.tls && plain.user == nil)
        #expect(plain.clientID == "keepalived-living" && plain.prefix == "keepalived/living")
        #expect(plain.stateTopic == "keepalived/living/state" && plain.availabilityTopic == "keepalived/living/availability")
        #expect(plain.discoveryPrefix == "homeassistant" && plain.passwordSource == .none)
        let secure = try #require(try Self.settings(["--mqtt", "mqtts://ha%40box@10.0.0.2:8884/"]))
        #expect(secure.host == "10.0.0.2" && secure.port == 8884 && secure.tls && secure.user == "ha@box")
        #expect(secure.brokerDescription == "mqtts://ha@box@10.0.0.2:8884")
        let six = try #require(try Self.settings(["--mqtt", "mqtts://[fd00::1]"]))
        #expect(six.host == "fd00::1" && six.port == 8883 && six.brokerDescription == "mqtts://[fd00::1]:8883")
        let named = try #require(try Self.settings(["--mqtt", "mqtt://b", "--mqtt-prefix", "home/audio/box", "--mqtt-client-id", "box-1",
                                                    "--mqtt-discovery-prefix", "ha"]))
        #expect(named.prefix == "home/audio/box" && named.clientID == "box-1" && named.discoveryPrefix == "ha")
        #expect(try Self.settings([]) == nil)
    }

    @Test("the password: a file given, else the unit's credential, never the URL")
    func password() throws {
        let file = try #require(try Self.settings(["--mqtt", "mqtt://u@b", "--mqtt-password-file", "/etc/keepalived/mqtt"]))
        #expect(file.passwordSource == .file("/etc/keepalived/mqtt"))
        let directory = "/tmp/ka-credentials-\(getpid())"
        mkdir(directory, 0o700)
        defer { _ = unlink("\(directory)/mqtt-password"); rmdir(directory) }
        #expect(try Self.settings(["--mqtt", "mqtt://u@b"], credentials: directory)?.passwordSource == MQTTSettings.PasswordSource.none)
        let fd = open("\(directory)/mqtt-password", O_CREAT | O_WRONLY, 0o600)
        _ = write(fd, "s3cret\nignored\n", 15)
        close(fd)
        let credential = try #require(try Self.settings(["--mqtt", "mqtt://u@b"], credentials: directory))
        #expect(credential.passwordSource == .credential("\(directory)/mqtt-password"))
        #expect(try credential.readPassword() == "s3cret")
        // No user: no password is sent, whatever the unit holds.
        #expect(try Self.settings(["--mqtt", "mqtt://b"], credentials: directory)?.passwordSource == MQTTSettings.PasswordSource.none)
        let missing = MQTTSettings.PasswordSource.file("/nonexistent/mqtt")
        var settings = try #require(try Self.settings(["--mqtt", "mqtt://u@b"]))
        settings.passwordSource = missing
        #expect(throws: MQTTSettings.Invalid(description: "cannot read the MQTT password from /nonexistent/mqtt: No such file or directory")) {
            try settings.readPassword()
        }
    }

    @Test("what is refused, and why", arguments: [
        (["--mqtt", "http://b"], "--mqtt takes mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"),
        (["--mqtt", "mqtt://u:hunter2@b"], "the URL holds a password; give it in --mqtt-password-file"),
        (["--mqtt", "mqtt://b:0"], "the port in 'mqtt://b:0' is not a number from 1 to 65535"),
        (["--mqtt", "mqtt://b:70000"], "not a number from 1 to 65535"),
        (["--mqtt", "mqtt://"], "has no valid host name"),
        (["--mqtt", "mqtt://b/topic"], "has a path"),
        (["--mqtt", "mqtt://b?x=1"], "has a query or fragment"),
        (["--mqtt", "mqtt://[fd00::1"], "unclosed IPv6 address"),
        (["--mqtt", "mqtt://b", "--mqtt-password-file", "/p"], "--mqtt-password-file needs a user"),
        (["--mqtt", "mqtt://b", "--mqtt-ca", "/ca.pem"], "go with an mqtts:// broker"),
        (["--mqtt", "mqtts://b", "--mqtt-cert", "/c.pem"], "--mqtt-cert and --mqtt-key go together"),
        (["--mqtt", "mqtt://b", "--mqtt-prefix", "a/+/b"], "--mqtt-prefix takes topic levels"),
        (["--mqtt", "mqtt://b", "--mqtt-prefix", "/a"], "--mqtt-prefix takes topic levels"),
        (["--mqtt", "mqtt://b", "--mqtt-client-id", "a b"], "--mqtt-client-id takes printable ASCII"),
        (["--mqtt-prefix", "x"], "--mqtt-prefix goes with --mqtt URL"),
    ])
    func refused(_ arguments: [String], _ expected: String) {
        let message = Self.refusal(arguments)
        #expect(message.contains(expected), "\(arguments): \(message)")
        #expect(!message.contains("hunter2"), "\(message)")
    }

    @Test("a host name becomes one topic level and a client id")
    func topicWord() {
        #expect(MQTTSettings.topicWord("living-room_2") == "living-room_2")
        #expect(MQTTSettings.topicWord("a/b+c#d e") == "a_b_c_d_e")
        #expect(MQTTSettings.topicWord("") == "box")
    }

    @Test("libmosquitto's reasons read as a clause in the journal line")
    func sentence() {
        #expect(MQTTConnectionStateMachine.sentence("The connection was lost.") == "the connection was lost")
        #expect(MQTTConnectionStateMachine.sentence("Connection refused") == "connection refused")
        #expect(MQTTConnectionStateMachine.sentence("TLS error.") == "TLS error")
        #expect(MQTTConnectionStateMachine.sentence("") == "no reason given")
    }
}
