import ArgumentParser
import Glibc

/// `--mqtt` and its companions: the box's state published to an MQTT broker, found by Home
/// Assistant's discovery (``MQTTPublisher``). Part of the playback options, so the options file
/// carries them; read at the daemon's start.
///
/// ```swift
/// let options = try MQTTOptions.parse(["--mqtt", "mqtts://box@broker.lan", "--mqtt-password-file", "/etc/keepalived/mqtt"])
/// try options.settings(host: "livingroom")?.prefix   // "keepalived/livingroom"
/// ```
struct MQTTOptions: ParsableArguments {
    @Option(name: .customLong("mqtt"), help: ArgumentHelp(
        "Publish the box's audio state to this MQTT broker, for Home Assistant (found by its MQTT discovery) and other home automation: mqtt://HOST[:PORT] or mqtts://HOST[:PORT] (TLS), with USER@ before HOST to log in. Needs libmosquitto1.",
        valueName: "url"))
    var url: String?

    @Option(name: .customLong("mqtt-password-file"), help: ArgumentHelp(
        "With --mqtt USER@…: read the password from this file's first line, at the daemon's start. Without it, a systemd credential named mqtt-password (LoadCredential=) is used when there is one. Never give the password on the command line.",
        valueName: "file"), completion: .file())
    var passwordFile: String?

    @Option(name: .customLong("mqtt-ca"), help: ArgumentHelp(
        "With mqtts://: trust the broker's certificate only when this CA file (PEM) signed it, instead of the system's CAs.", valueName: "file"),
            completion: .file())
    var caFile: String?

    @Option(name: .customLong("mqtt-cert"), help: ArgumentHelp(
        "With mqtts://: log in with this client certificate (PEM), with --mqtt-key.", valueName: "file"), completion: .file())
    var certificateFile: String?

    @Option(name: .customLong("mqtt-key"), help: ArgumentHelp(
        "With --mqtt-cert: the client certificate's private key (PEM, unencrypted).", valueName: "file"), completion: .file())
    var keyFile: String?

    @Option(name: .customLong("mqtt-client-id"), help: ArgumentHelp(
        "The MQTT client id (default keepalived-HOST, HOST the host name).", valueName: "id"))
    var clientID: String?

    @Option(name: .customLong("mqtt-prefix"), help: ArgumentHelp(
        "The topics' prefix: PREFIX/availability and PREFIX/state (default keepalived/HOST).", valueName: "topic"))
    var prefix: String?

    @Option(name: .customLong("mqtt-discovery-prefix"), help: ArgumentHelp(
        "Home Assistant's MQTT discovery prefix (default homeassistant, Home Assistant's own).", valueName: "topic"))
    var discoveryPrefix: String?

    @Flag(name: .customLong("mqtt-commands"), help: ArgumentHelp(
        "With --mqtt: also take commands from home automation: a switch for the keep-alive (off rests every output, the daemon staying up), buttons for power on now and standby now (the --on-active/--on-idle hooks and --cec's steps) and a test tone button (keepalived test's tone for 1 s on the outputs playing the keep-alive). Without it keepalived only publishes."))
    var commands = false

    mutating func validate() throws {
        do { _ = try settings(host: "box", credentials: nil) } catch {
            throw ValidationError(error.description)
        }
    }

    /// The checked settings; nil without `--mqtt`.
    /// - Parameters:
    ///   - host: this box's name, in the default client id and prefix.
    ///   - credentials: `$CREDENTIALS_DIRECTORY`, where systemd put the unit's credentials.
    /// - Throws: ``MQTTSettings/Invalid`` naming the option and what was wrong.
    func settings(host: String = MQTTSettings.hostName(),
                  credentials: String? = MQTTOptions.credentialsDirectory()) throws(MQTTSettings.Invalid) -> MQTTSettings? {
        guard let url else {
            let given: [(String, Bool)] = [
                ("--mqtt-password-file", passwordFile != nil), ("--mqtt-ca", caFile != nil), ("--mqtt-cert", certificateFile != nil),
                ("--mqtt-key", keyFile != nil), ("--mqtt-client-id", clientID != nil), ("--mqtt-prefix", prefix != nil),
                ("--mqtt-discovery-prefix", discoveryPrefix != nil), ("--mqtt-commands", commands),
            ]
            if let (option, _) = given.first(where: \.1) {
                throw MQTTSettings.Invalid(description: "\(option) goes with --mqtt URL (the broker, like mqtt://broker.lan)")
            }
            return nil
        }
        var settings = try MQTTSettings(url: url, host: host)
        if let passwordFile {
            guard settings.user != nil else {
                throw MQTTSettings.Invalid(description: "--mqtt-password-file needs a user in --mqtt's URL (mqtt://USER@HOST)")
            }
            settings.passwordSource = .file(passwordFile)
        } else if settings.user != nil, let credentials, !credentials.isEmpty {
            let path = "\(credentials)/\(MQTTSettings.credentialName)"
            // Only a credential that is not there is no password: one that cannot be looked at
            // is read anyway, and its error names it.
            if access(path, F_OK) == 0 || errno != ENOENT { settings.passwordSource = .credential(path) }
        }
        if !settings.tls, caFile != nil || certificateFile != nil || keyFile != nil {
            throw MQTTSettings.Invalid(description: "--mqtt-ca, --mqtt-cert and --mqtt-key go with an mqtts:// broker (TLS), not '\(url)'")
        }
        guard (certificateFile == nil) == (keyFile == nil) else {
            throw MQTTSettings.Invalid(description: "--mqtt-cert and --mqtt-key go together (the client certificate and its key)")
        }
        settings.commands = commands
        settings.caFile = caFile
        settings.certificateFile = certificateFile
        settings.keyFile = keyFile
        if let clientID {
            guard !clientID.isEmpty, clientID.utf8.count <= 65535, clientID.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "\0" }) else {
                throw MQTTSettings.Invalid(description: "--mqtt-client-id takes printable ASCII without spaces, not '\(clientID)'")
            }
            settings.clientID = clientID
        }
        if let prefix {
            try MQTTSettings.checkPrefix(prefix)
            settings.prefix = prefix
        }
        if let discoveryPrefix {
            try MQTTSettings.checkPrefix(discoveryPrefix)
            settings.discoveryPrefix = discoveryPrefix
        }
        return settings
    }

    static func credentialsDirectory() -> String? {
        getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) }
    }

    /// The settings in force with their password read now (at start, and again at each reload):
    /// nil without `--mqtt`.
    /// - Throws: ``MQTTSettings/Invalid`` naming the option or the password's file.
    func configuration() throws -> MQTTController.Configuration? {
        guard let settings = try settings() else { return nil }
        return (settings, try settings.readPassword())
    }
}
