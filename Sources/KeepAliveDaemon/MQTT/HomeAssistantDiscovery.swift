import CKeepAliveSDBus
import _KeepalivedControlProtocol

/// The box's entities as Home Assistant's MQTT discovery finds them: one device per box, its
/// entities reading `PREFIX/state` through value templates and going unavailable with
/// `PREFIX/availability`. Each config is retained on
/// `DISCOVERY/COMPONENT/NODE/OBJECT/config`; an empty retained config removes the entity.
///
/// ```swift
/// let discovery = HomeAssistantDiscovery(settings: mqttSettings, version: "0.2.0", host: "livingroom", deviceID: "3f2a…")
/// for entity in discovery.entities { publish(entity.topic, entity.payload) }
/// for topic in discovery.withdrawn { publish(topic, "") }
/// ```
struct HomeAssistantDiscovery: Sendable {
    /// One entity's retained config.
    struct Entity: Equatable, Sendable {
        var topic: String
        /// The config's JSON.
        var payload: String
    }

    /// The configs to publish.
    let entities: [Entity]
    /// Config topics to clear: the command entities, without `--mqtt-commands` (an earlier run
    /// with it may have left them).
    let withdrawn: [String]

    /// - Parameters:
    ///   - host: the box's name, in the device's name.
    ///   - deviceID: what tells this box from every other for good (``deviceID(host:)``).
    init(settings: MQTTSettings, version: String, host: String, deviceID: String) {
        let node = "keepalived_\(deviceID)"
        let device = Device(identifiers: [node], name: "keepalived on \(host)", manufacturer: "keepalived",
                            model: "Silent-audio keep-alive", swVersion: version)
        let origin = Origin(name: "keepalived", swVersion: version)
        func topic(_ component: String, _ object: String) -> String { "\(settings.discoveryPrefix)/\(component)/\(node)/\(object)/config" }
        func config(_ component: String, _ object: String, name: String, template: String?, extra: (inout Config) -> Void = { _ in }) -> Entity {
            var config = Config(name: name, uniqueID: "\(node)_\(object)", defaultEntityID: "\(component).\(Self.entityWord(host))_\(object)",
                                stateTopic: template == nil ? nil : settings.stateTopic, valueTemplate: template,
                                availabilityTopic: settings.availabilityTopic, device: device, origin: origin)
            extra(&config)
            return Entity(topic: topic(component, object), payload: ControlJSON.encode(config))
        }
        let filter = MQTTCommandFilter(prefix: settings.prefix)
        let commands = [
            config("switch", "keepalive_switch", name: "Keep-alive switch",
                   template: "{{ 'OFF' if value_json.keepAlive == 'off' else 'ON' }}") {
                $0.icon = "mdi:power"
                $0.commandTopic = filter.keepAliveTopic
                $0.payloadOn = "ON"
                $0.payloadOff = "OFF"
            },
            config("button", "power_on", name: "Power on now", template: nil) {
                $0.icon = "mdi:power-on"
                $0.commandTopic = filter.powerOnTopic
                $0.payloadPress = "PRESS"
            },
            config("button", "standby", name: "Standby now", template: nil) {
                $0.icon = "mdi:power-standby"
                $0.commandTopic = filter.standbyTopic
                $0.payloadPress = "PRESS"
            },
            config("button", "test_tone", name: "Test tone", template: nil) {
                // Home Assistant's class for a button that makes the device show itself.
                $0.deviceClass = "identify"
                $0.icon = "mdi:volume-high"
                $0.commandTopic = filter.testToneTopic
                $0.payloadPress = "PRESS"
            },
        ]
        withdrawn = settings.commands ? [] : commands.map(\.topic)
        entities = (settings.commands ? commands : []) + [
            config("binary_sensor", "playing", name: "Music playing",
                   template: "{{ 'ON' if value_json.activity.state == 'active' else 'OFF' }}") {
                $0.deviceClass = "sound"
                $0.payloadOn = "ON"
                $0.payloadOff = "OFF"
            },
            config("sensor", "player", name: "Player",
                   template: "{{ value_json.activity.programs | join(', ') if value_json.activity.programs else 'none' }}") {
                $0.icon = "mdi:music"
            },
            config("sensor", "keepalive", name: "Keep-alive",
                   template: "{{ value_json.state }}") {
                $0.icon = "mdi:speaker"
                $0.jsonAttributesTopic = settings.stateTopic
                // Absent keys (no reason while playing, no loans, no --cec) read as none, not as an
                // undefined that tojson refuses.
                $0.jsonAttributesTemplate = "{{ {'reason': value_json.get('reason'), 'outputs': value_json.get('outputs'), 'loans': value_json.get('loans'), 'cec': value_json.get('cec'), 'power': value_json.get('power'), 'version': value_json.get('version')} | tojson }}"
            },
        ]
    }

    /// `keepalived_HOST` as an entity id's object part: lowercase letters, digits and `_`.
    static func entityWord(_ host: String) -> String {
        "keepalived_" + String(MQTTSettings.topicWord(host).lowercased().map { $0 == "-" ? "_" : $0 })
    }

    /// This box's id for Home Assistant: the machine id hashed for keepalived
    /// (`sd_id128_get_machine_app_specific`: stable across reboots and renames, and never the
    /// machine id itself), or the host name where there is no machine id.
    static func deviceID(host: String) -> String {
        // keepalived's application id for sd_id128_get_machine_app_specific (fixed for good:
        // changing it would give every box new entities).
        var application = sd_id128_t()
        withUnsafeMutableBytes(of: &application.bytes) { bytes in
            let fixed: [UInt8] = [0x6b, 0x61, 0x2d, 0x6d, 0x71, 0x74, 0x74, 0x2e, 0x4a, 0x91, 0x3e, 0x07, 0xc2, 0x58, 0x1d, 0xa4]
            for index in 0..<16 { bytes[index] = fixed[index] }
        }
        var id = sd_id128_t()
        guard sd_id128_get_machine_app_specific(application, &id) == 0 else { return MQTTSettings.topicWord(host) }
        let bytes = withUnsafeBytes(of: id.bytes) { Array($0) }
        let hex = Array("0123456789abcdef")
        // 12 hex digits (48 bits): enough to tell a house's boxes apart, short in entity ids.
        return String(bytes.prefix(6).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] })
    }

    private struct Device: Encodable {
        var identifiers: [String]
        var name: String
        var manufacturer: String
        var model: String
        var swVersion: String
        enum CodingKeys: String, CodingKey {
            case identifiers, name, manufacturer, model
            case swVersion = "sw_version"
        }
    }

    private struct Origin: Encodable {
        var name: String
        var swVersion: String
        enum CodingKeys: String, CodingKey {
            case name
            case swVersion = "sw_version"
        }
    }

    private struct Config: Encodable {
        var name: String
        var uniqueID: String
        /// The entity id Home Assistant gives it (`binary_sensor.keepalived_living_playing`);
        /// `object_id`, which said it before, stops working in Home Assistant 2026.4.
        var defaultEntityID: String
        var stateTopic: String?
        var valueTemplate: String?
        var availabilityTopic: String
        var payloadAvailable = "online"
        var payloadNotAvailable = "offline"
        var device: Device
        var origin: Origin
        var deviceClass: String?
        var icon: String?
        var payloadOn: String?
        var payloadOff: String?
        var jsonAttributesTopic: String?
        var jsonAttributesTemplate: String?
        var commandTopic: String?
        var payloadPress: String?

        init(name: String, uniqueID: String, defaultEntityID: String, stateTopic: String?, valueTemplate: String?, availabilityTopic: String,
             device: Device, origin: Origin) {
            self.name = name
            self.uniqueID = uniqueID
            self.defaultEntityID = defaultEntityID
            self.stateTopic = stateTopic
            self.valueTemplate = valueTemplate
            self.availabilityTopic = availabilityTopic
            self.device = device
            self.origin = origin
        }

        enum CodingKeys: String, CodingKey {
            case name, device, origin, icon
            case uniqueID = "unique_id"
            case defaultEntityID = "default_entity_id"
            case stateTopic = "state_topic"
            case valueTemplate = "value_template"
            case availabilityTopic = "availability_topic"
            case payloadAvailable = "payload_available"
            case payloadNotAvailable = "payload_not_available"
            case deviceClass = "device_class"
            case payloadOn = "payload_on"
            case payloadOff = "payload_off"
            case jsonAttributesTopic = "json_attributes_topic"
            case jsonAttributesTemplate = "json_attributes_template"
            case commandTopic = "command_topic"
            case payloadPress = "payload_press"
        }
    }
}
