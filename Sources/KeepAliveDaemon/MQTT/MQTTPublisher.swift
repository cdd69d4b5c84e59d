import _KeepalivedControlProtocol
import Glibc
import KeepAlive
import Logging

/// `--mqtt`: the box's state on an MQTT broker, on a thread of its own (`keepalive-mqtt`), the
/// one owner of the broker's connection (``MosquittoClient``, checked at each call).
///
/// Nothing of the daemon waits on it: the manager's events and ``BoxActivity``'s changes only
/// ring its doorbell (``changed()``, ``record(_:)``), and the thread reads the box as `status`
/// does when it wakes, so a burst of changes is one publish of the newest state and a broker
/// that is slow or gone holds nothing up. What it publishes, retained at QoS 1:
/// `PREFIX/availability` (`online`; `offline` at a clean stop and, through the Last Will, when
/// the connection dies), `PREFIX/state` (``MQTTBoxState``, on change only) and Home Assistant's
/// discovery configs (``HomeAssistantDiscovery``), all again on every connect. The connection's
/// decisions (backoff, a broker that never answers, one journal line per change) are
/// ``MQTTConnectionStateMachine``'s; with nothing changing the thread wakes for the protocol's
/// keep-alive ping only.
///
/// ```swift
/// let publisher = try MQTTPublisher(settings: mqttSettings, password: try mqttSettings.readPassword(), version: "0.2.0",
///                                   read: { MQTTBoxState.Sources(status: daemonStatus()) }, logger: logger)
/// manager.observe { _ in publisher.changed() }
/// try publisher.start()
/// // … at the daemon's stop:
/// publisher.stop()   // publishes offline, disconnects
/// ```
final class MQTTPublisher: Sendable {
    /// Failed tries in a row (1 + 2 + 4 + 8 + 16 s of waiting: about half a minute) before a
    /// broker that does not answer is a warning rather than a notice.
    static let warnAfterFailures = 5
    /// How long the stop waits for `offline` to be written before it closes anyway.
    static let stopFlushLimit = Duration.seconds(1)

    let settings: MQTTSettings
    private let password: String?
    private let version: String
    private let discovery: HomeAssistantDiscovery
    /// The box now, read when something changed.
    private let read: @Sendable () -> MQTTBoxState.Sources
    /// Where `--mqtt-commands`' commands go: the main loop's queue.
    private let submit: @Sendable (RemoteCommand) -> Void
    private let logger: Logger
    private let doorbell: Doorbell
    private let owner = ThreadOwner("the MQTT publisher")
    /// Each output's last activity event: when its activity last changed.
    private let events = Locked<[String: ActivityEvent]>([:])
    private let thread = Locked<JoinableThread?>(nil)
    /// The connection as `status` tells it, updated by the thread.
    private let linkState = Locked<(connected: Bool, lastError: String?)>((false, nil))
    /// Set before the stop of a publisher whose entities go (`--mqtt` dropped or changed on a
    /// reload): their configs and the state are cleared on the broker before `offline`.
    private let removing = Locked(false)

    /// - Throws: ``DoorbellError`` when the system refuses the doorbell's descriptors.
    init(settings: MQTTSettings, password: String?, version: String, host: String = MQTTSettings.hostName(),
         read: @escaping @Sendable () -> MQTTBoxState.Sources, submit: @escaping @Sendable (RemoteCommand) -> Void = { _ in }, logger: Logger) throws(DoorbellError) {
        self.settings = settings
        self.password = password
        self.version = version
        discovery = HomeAssistantDiscovery(settings: settings, version: version, host: host, deviceID: HomeAssistantDiscovery.deviceID(host: host))
        self.read = read
        self.submit = submit
        self.logger = logger
        doorbell = try Doorbell()
    }

    /// What `status` says of MQTT.
    var report: MQTTReport {
        let now = linkState.withLock { $0 }
        return MQTTReport(broker: settings.brokerDescription, connected: now.connected, stateTopic: settings.stateTopic,
                          lastError: now.connected ? nil : now.lastError)
    }

    /// Starts the thread.
    /// - Throws: ``ThreadStartError`` when the system refuses a thread; nothing is published then.
    func start() throws(ThreadStartError) {
        var handle: JoinableThread? = try startThread(named: "keepalive-mqtt") { [self] in run() }
        thread.withLock { $0 = handle.take() }
    }

    /// Something the state is made of changed: the thread reads the box again. Any thread; never waits.
    func changed() { doorbell.ring() }

    /// An output's activity changed (`keepalived events`' line). Any thread; never waits.
    func record(_ event: ActivityEvent) {
        events.withLock { $0[event.output] = event }
        doorbell.ring()
    }

    /// Publishes `offline`, disconnects and ends the thread (at most ``stopFlushLimit`` for the
    /// broker to take `offline`). `removingEntities`: first clear Home Assistant's configs of
    /// this box (its entities go) and the retained state.
    func stop(removingEntities: Bool = false) {
        removing.withLock { $0 = removingEntities }
        doorbell.raise()
        guard let handle = thread.withLock({ $0.take() }) else { return }
        handle.join()
    }

    // MARK: - The publisher's thread

    /// What the thread carries from one turn to the next.
    private struct Connection {
        var machine = MQTTConnectionStateMachine()
        /// The machine's next deadline: a connect's answer, or the end of a wait.
        var deadline: ContinuousClock.Instant?
        /// When the client last wrote to the broker: the keep-alive ping is due a keep-alive later.
        /// Exact, so that the thread wakes for the ping and for nothing else: every write is one
        /// of ours (a publish, a subscribe, a connect, a writable socket serviced, the ping itself)
        /// or a PUBACK libmosquitto writes while reading a QoS 1 message, which its callback says.
        /// libmosquitto counts whole seconds: floor(t + 60) = floor(t) + 60, so a wake at
        /// `lastOut + keepAlive` is never before its deadline.
        var lastOut = ContinuousClock.now
        /// The state last published on this connection.
        var published: String?
        /// The commands' parsing, rate and what was logged: across reconnects.
        var commands: MQTTCommandFilter
    }

    private func run() {
        owner.claim()
        let inbox = Locked<[MosquittoClient.Event]>([])
        let client: MosquittoClient
        do {
            client = try MosquittoClient(id: settings.clientID, owner: owner) { event in inbox.withLock { $0.append(event) } }
            if let user = settings.user { try client.credentials(user: user, password: password) }
            if settings.tls { try client.tls(caFile: settings.caFile, certificateFile: settings.certificateFile, keyFile: settings.keyFile) }
            try client.will(topic: settings.availabilityTopic, payload: "offline")
        } catch {
            logger.error("MQTT is off: cannot set up libmosquitto's client: \(error) (is libmosquitto1 installed?)",
                         metadata: ["broker": "\(settings.brokerDescription)"])
            waitForStop()
            return
        }
        var connection = Connection(commands: MQTTCommandFilter(prefix: settings.prefix))
        carryOut(connection.machine.start(at: .now), &connection, client)
        while !doorbell.isRaised {
            let active = connection.machine.isConnected || connection.machine.isConnecting
            let socket = active ? client.socket : -1
            var fds = [pollfd(fd: doorbell.descriptor, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: socket, events: Int16(POLLIN) | (socket >= 0 && client.wantsWrite ? Int16(POLLOUT) : 0), revents: 0)]
            let ping = connection.machine.isConnected ? connection.lastOut + MQTTSettings.keepAlive : nil
            let wake = [connection.deadline, ping].compactMap { $0 }.min()
            guard (try? fds.waitForEvents(timeout: wake.map { ContinuousClock.now.duration(to: $0).pollTimeout } ?? -1)) != nil else {
                // poll itself failed (out of memory): look again in a second rather than spin.
                usleep(1_000_000)
                continue
            }
            if doorbell.isRaised { break }
            let rung = fds[0].revents != 0
            if rung { doorbell.drain() }
            let now = ContinuousClock.now
            var failure: MosquittoClient.Failure?
            if socket >= 0, fds[1].revents != 0 || (ping.map { now >= $0 } ?? false) {
                let writable = fds[1].revents & Int16(POLLOUT | POLLERR | POLLHUP) != 0
                do {
                    try client.serviceSocket(readable: fds[1].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0, writable: writable)
                    if writable || (ping.map { now >= $0 } ?? false) { connection.lastOut = now }
                } catch {
                    failure = error
                }
            }
            // The callbacks first: a refusal's CONNACK says more than the loop's error after it.
            handleDelivered(inbox.withLock { events in defer { events = [] }; return events }, &connection, client)
            if let failure { carryOut(connection.machine.lost(failure.description, at: now), &connection, client) }
            if let deadline = connection.deadline, now >= deadline {
                connection.deadline = nil
                carryOut(connection.machine.isConnecting ? connection.machine.answerTimedOut(at: now) : connection.machine.retryDue(at: now),
                          &connection, client)
            }
            if rung, connection.machine.isConnected { publishState(&connection, client) }
        }
        let wasConnected = connection.machine.isConnected
        if case .disconnect = connection.machine.stop(), wasConnected { disconnect(client, inbox: inbox) }
        self.linkState.withLock { $0 = (false, "stopped") }
    }

    /// Until ``stop()``: a thread with no client has nothing to do.
    private func waitForStop() {
        var fd = pollfd(fd: doorbell.descriptor, events: Int16(POLLIN), revents: 0)
        while !doorbell.isRaised {
            _ = poll(&fd, 1, -1)
            doorbell.drain()
        }
    }

    private func handleDelivered(_ events: [MosquittoClient.Event], _ connection: inout Connection, _ client: MosquittoClient) {
        for event in events {
            let now = ContinuousClock.now
            switch event {
            case .connected(code: 0) where connection.machine.isConnecting:
                carryOut(connection.machine.accepted(at: now), &connection, client)
            case .connected(let code) where connection.machine.isConnecting:
                carryOut(connection.machine.refused(Self.refusal(MosquittoClient.connackText(code)), at: now), &connection, client)
            case .connected:
                break
            case .disconnected(code: 0):
                break
            case .disconnected(let code):
                carryOut(connection.machine.lost(MosquittoClient.Failure(code).description, at: now), &connection, client)
            case .message(let topic, let payload, let retained, let acknowledged):
                if acknowledged { connection.lastOut = now }
                guard settings.commands else { break }
                switch connection.commands.received(topic: topic, payload: payload, retained: retained, at: now) {
                case .apply(let command):
                    logger.info("MQTT: command received", metadata: ["topic": "\(topic)", "command": "\(command)"])
                    submit(command)
                case .ignore(let log?):
                    logger.warning("\(log)")
                case .ignore(nil):
                    break
                }
            case .acknowledged:
                break
            }
        }
    }

    /// A CONNACK's refusal as the journal says it: "refused: not authorised".
    static func refusal(_ text: String) -> String {
        let reason = text.hasPrefix("Connection Refused: ") ? String(text.dropFirst("Connection Refused: ".count)) : text
        return "refused: \(MQTTConnectionStateMachine.sentence(reason))"
    }

    private func carryOut(_ action: MQTTConnectionStateMachine.Action, _ connection: inout Connection, _ client: MosquittoClient) {
        switch action {
        case .none:
            return
        case .connect(let deadline, let log):
            if let log { logger.notice("\(log)", metadata: ["broker": "\(settings.brokerDescription)"]) }
            connection.deadline = deadline
            connection.published = nil
            do {
                try client.connect(host: settings.host, port: settings.port, keepAlive: Int(MQTTSettings.keepAlive.components.seconds))
                connection.lastOut = .now
            } catch {
                carryOut(connection.machine.refused(error.description, at: .now), &connection, client)
            }
        case .publishEverything(let log):
            connection.deadline = nil
            self.linkState.withLock { $0 = (true, nil) }
            logger.notice("\(log)", metadata: ["broker": "\(settings.brokerDescription)", "topic": "\(settings.stateTopic)", "password": "\(settings.passwordSource.spoken)"])
            publish(settings.availabilityTopic, "online", client)
            for entity in discovery.entities { publish(entity.topic, entity.payload, client) }
            for topic in discovery.withdrawn { publish(topic, "", client) }
            publishState(&connection, client)
            if settings.commands {
                do {
                    try client.subscribe(connection.commands.subscription)
                    connection.lastOut = .now
                } catch {
                    logger.warning("MQTT: cannot subscribe to the commands' topic: \(error)", metadata: ["topic": "\(connection.commands.subscription)"])
                }
            }
        case .retry(let at, let log):
            let why = connection.machine.lastFailure
            linkState.withLock { $0 = (false, why) }
            // A broker that comes up after keepalived (at boot, after its own restart) is not a
            // fault: notice, until it has failed for half a minute (five tries), then a warning.
            let failures = connection.machine.failuresInARow
            let metadata: Logger.Metadata = ["broker": "\(settings.brokerDescription)", "password": "\(settings.passwordSource.spoken)"]
            if let log {
                logger.log(level: failures >= Self.warnAfterFailures ? .warning : .notice, "\(log)", metadata: metadata)
            } else if failures == Self.warnAfterFailures {
                logger.warning("MQTT: still cannot reach the broker after \(failures) tries: \(why ?? "no reason given"); trying again, waiting up to \(MQTTConnectionStateMachine.longestWait.components.seconds) s between tries",
                               metadata: metadata)
            }
            connection.deadline = at
        case .disconnect:
            preconditionFailure("MQTTPublisher: the machine disconnects only at the stop")
        }
    }

    /// The state now, published when it differs from what this connection last published.
    private func publishState(_ connection: inout Connection, _ client: MosquittoClient) {
        let state = MQTTBoxState(read(), version: version, events: events.withLock { $0 })
        let payload = ControlJSON.encode(state)
        guard payload != connection.published else { return }
        if publish(settings.stateTopic, payload, client) {
            connection.published = payload
            connection.lastOut = .now
        }
    }

    @discardableResult
    private func publish(_ topic: String, _ payload: String, _ client: MosquittoClient) -> Bool {
        do {
            try client.publish(topic: topic, payload: Array(payload.utf8), retain: true)
            return true
        } catch {
            // Not connected any more: the next connect publishes everything again.
            logger.debug("MQTT: cannot publish", metadata: ["topic": "\(topic)", "error": "\(error)"])
            return false
        }
    }

    /// `offline` (or, when removing, the configs, state and availability cleared), acknowledged by the broker
    /// within ``stopFlushLimit``, then the DISCONNECT (no Last Will after it). Waiting for the
    /// acknowledgements matters: a socket closed with the broker's PUBACKs unread is reset, and
    /// the broker drops what it had not read yet.
    private func disconnect(_ client: MosquittoClient, inbox: Locked<[MosquittoClient.Event]>) {
        // An empty retained message deletes the retained one: Home Assistant removes the entity,
        // and nothing of the box is left on the broker.
        let removing = removing.withLock { $0 }
        let messages = removing ? discovery.entities.map { ($0.topic, "") } + [(settings.stateTopic, ""), (settings.availabilityTopic, "")]
                                : [(settings.availabilityTopic, "offline")]
        var unacknowledged = Set<Int32>()
        for (topic, payload) in messages {
            guard let id = try? client.publish(topic: topic, payload: Array(payload.utf8), retain: true) else { continue }
            unacknowledged.insert(id)
        }
        let deadline = ContinuousClock.now + Self.stopFlushLimit
        while !unacknowledged.isEmpty, client.socket >= 0, ContinuousClock.now < deadline {
            var fd = pollfd(fd: client.socket, events: Int16(POLLIN) | (client.wantsWrite ? Int16(POLLOUT) : 0), revents: 0)
            _ = poll(&fd, 1, ContinuousClock.now.duration(to: deadline).pollTimeout)
            let ready = (readable: fd.revents & Int16(POLLIN | POLLERR | POLLHUP) != 0, writable: fd.revents & Int16(POLLOUT) != 0)
            guard (try? client.serviceSocket(readable: ready.readable, writable: ready.writable)) != nil else { break }
            for case .acknowledged(let id) in inbox.withLock({ events in defer { events = [] }; return events }) { unacknowledged.remove(id) }
        }
        client.disconnect()
        if unacknowledged.isEmpty {
            logger.notice(removing ? "MQTT: the box's entities and state removed, disconnected" : "MQTT: offline published, disconnected",
                          metadata: ["broker": "\(settings.brokerDescription)"])
        } else {
            logger.warning("MQTT: disconnected without the broker's acknowledgement of offline", metadata: ["broker": "\(settings.brokerDescription)"])
        }
    }
}
