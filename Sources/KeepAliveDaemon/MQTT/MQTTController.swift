import _KeepalivedControlProtocol
import KeepAlive
import Logging

/// `--mqtt` across reloads: the one record of which ``MQTTPublisher`` runs, swapped only on the
/// main loop (a reload that changes the settings stops the old publisher and starts the new one;
/// one that drops `--mqtt` removes the box's entities from Home Assistant first). The daemon's
/// changes reach whichever publisher runs, from any thread, without waiting.
///
/// ```swift
/// let mqtt = MQTTController(initial: try options.playback.mqtt.configuration(),
///                           read: { MQTTBoxState.Sources(status: daemonStatus(), switchedOff: manager.pauses.contains(.switchedOff)) },
///                           submit: { queue.submit(MainLoopRequest($0, trigger: "MQTT")) }, logger: logger)
/// manager.observe { _ in mqtt.changed() }
/// mqtt.start(on: mainLoop)                          // the start's settings
/// mqtt.apply(try options.playback.mqtt.configuration(), on: mainLoop)   // each reload
/// mqtt.stop()                                       // at the daemon's stop: offline, entities kept
/// ```
final class MQTTController: Sendable {
    private let read: @Sendable () -> MQTTBoxState.Sources
    private let submit: @Sendable (RemoteCommand) -> Void
    private let logger: Logger
    private let version: String
    private let current = Locked<MQTTPublisher?>(nil)
    /// What a reload compares with: the settings and the password the running publisher has.
    private let applied = Locked<Configuration?>(nil)

    /// The start's settings, applied by ``start(on:)``.
    private let initial: Configuration?

    /// The settings with the password read for them (nil: none).
    typealias Configuration = (settings: MQTTSettings, password: String?)

    /// - Parameters:
    ///   - read: the box now, as the state is made of it.
    ///   - submit: where `--mqtt-commands`' commands go (the main loop's queue).
    init(initial: Configuration?, version: String = KeepalivedRelease.version, read: @escaping @Sendable () -> MQTTBoxState.Sources,
         submit: @escaping @Sendable (RemoteCommand) -> Void, logger: Logger) {
        self.initial = initial
        self.version = version
        self.read = read
        self.submit = submit
        self.logger = logger
    }

    /// Starts publishing with the start's settings, if any. On the main loop.
    func start(on mainLoop: ThreadOwner) { apply(initial, on: mainLoop) }

    func changed() { current.withLock { $0 }?.changed() }

    func record(_ event: ActivityEvent) { current.withLock { $0 }?.record(event) }

    var report: MQTTReport? { current.withLock { $0 }?.report }

    /// Runs a publisher for `configuration` (nil: none), replacing the one that runs when it
    /// differs. On the main loop; stopping the old one takes at most its flush of `offline`.
    func apply(_ configuration: Configuration?, on mainLoop: ThreadOwner) {
        mainLoop.preconditionOwned("MQTTController.apply")
        let before = applied.withLock { $0 }
        guard before?.settings != configuration?.settings || before?.password != configuration?.password else { return }
        if let old = current.withLock({ $0 }) {
            // Entities go when the box stops publishing, or publishes them under other ids or topics.
            let removing = configuration.map { Self.entitiesMove(from: old.settings, to: $0.settings) } ?? true
            old.stop(removingEntities: removing)
            current.withLock { $0 = nil }
        }
        applied.withLock { $0 = configuration }
        guard let configuration else { return }
        do {
            let publisher = try MQTTPublisher(settings: configuration.settings, password: configuration.password, version: version,
                                              read: read, submit: submit, logger: logger)
            try publisher.start()
            current.withLock { $0 = publisher }
        } catch {
            // The box plays on without it, as without --cec's thread.
            logger.error("MQTT is off: \(error)", metadata: ["broker": "\(configuration.settings.brokerDescription)"])
        }
    }

    /// The daemon stops: `offline`, the entities kept (they show unavailable until it is back).
    func stop() {
        let publisher = current.withLock { publisher in
            defer { publisher = nil }
            return publisher
        }
        publisher?.stop()
    }

    /// Whether Home Assistant's entities of a box publishing with `old` are gone or elsewhere
    /// with `new`: another broker, discovery prefix or state topic.
    static func entitiesMove(from old: MQTTSettings, to new: MQTTSettings) -> Bool {
        old.host != new.host || old.port != new.port || old.discoveryPrefix != new.discoveryPrefix || old.prefix != new.prefix
            || (old.commands && !new.commands)
    }
}
