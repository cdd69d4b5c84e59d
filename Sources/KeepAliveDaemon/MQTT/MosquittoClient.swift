import CKeepAliveMosquitto
import Glibc
import KeepAlive

/// One client of libmosquitto (``CKeepAliveMosquitto``), owned by one thread (the publisher's):
/// every call checks it, and the callbacks run inside ``serviceSocket(readable:writable:)`` or
/// ``disconnect()`` on that thread, delivered as ``Event``s to the closure given at creation.
/// libmosquitto is loaded at the first client's creation, never before (`--mqtt` not given: not
/// mapped at all).
///
/// ```swift
/// let owner = ThreadOwner.claimed("the MQTT publisher")
/// let client = try MosquittoClient(id: "keepalived-box", owner: owner) { event in print(event) }
/// try client.connect(host: "broker", port: 1883, keepAlive: 60)
/// ```
final class MosquittoClient {
    enum Event: Equatable {
        /// The broker's CONNACK; `code` 0 accepted, else its refusal (``MosquittoClient/connackText(_:)``).
        case connected(code: Int32)
        /// The connection ended; `code` 0 when asked for.
        case disconnected(code: Int32)
        /// A message on a subscribed topic; `retained`: the broker's stored copy, not one sent
        /// now; `acknowledged`: the client wrote its PUBACK (QoS 1), which counts as traffic for
        /// the keep-alive.
        case message(topic: String, payload: [UInt8], retained: Bool, acknowledged: Bool)
        /// The broker acknowledged the message ``MosquittoClient/publish(topic:payload:retain:)`` returned.
        case acknowledged(messageID: Int32)
    }

    /// A libmosquitto failure: its code and text.
    struct Failure: Error, Equatable, CustomStringConvertible {
        let code: Int32
        let description: String

        init(_ code: Int32) {
            self.code = code
            // MOSQ_ERR_ERRNO: the system's reason is in errno, read before anything else runs.
            description = code == 14 ? String(cString: strerror(errno)) : String(cString: cmosq_error_text(code))
        }

        init(loading text: String) {
            code = -1
            description = text
        }
    }

    private let owner: ThreadOwner
    private let deliver: (Event) -> Void
    private var client: OpaquePointer?

    /// - Throws: ``Failure`` when libmosquitto cannot be loaded (libmosquitto1 not installed) or
    ///   refuses the id.
    init(id: String, owner: ThreadOwner, deliver: @escaping (Event) -> Void) throws(Failure) {
        if let failure = cmosq_load() { throw Failure(loading: String(cString: failure)) }
        self.owner = owner
        self.deliver = deliver
        let callbacks = cmosq_callbacks(
            connected: { userdata, code in MosquittoClient.from(userdata).deliver(.connected(code: code)) },
            disconnected: { userdata, code in MosquittoClient.from(userdata).deliver(.disconnected(code: code)) },
            message: { userdata, topic, payload, length, retained, qos in
                guard let topic else { return }
                let bytes = payload.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
                MosquittoClient.from(userdata).deliver(.message(topic: String(cString: topic), payload: bytes, retained: retained, acknowledged: qos > 0))
            },
            published: { userdata, mid in MosquittoClient.from(userdata).deliver(.acknowledged(messageID: mid)) })
        // Unretained: the client is freed in deinit, before self is gone, so no callback outlives it.
        guard let made = cmosq_client_new(id, callbacks, Unmanaged.passUnretained(self).toOpaque()) else {
            throw Failure(1)  // MOSQ_ERR_NOMEM: mosquitto_new fails only for memory or an id it rejects
        }
        client = made
    }

    deinit {
        cmosq_client_free(client)
    }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> MosquittoClient {
        Unmanaged<MosquittoClient>.fromOpaque(userdata!).takeUnretainedValue()
    }

    /// The loaded library's version, "2.0.11".
    static var libraryVersion: String {
        let version = cmosq_version()
        return "\(version / 1_000_000).\(version / 1000 % 1000).\(version % 1000)"
    }

    func credentials(user: String, password: String?) throws(Failure) {
        try check(cmosq_credentials(client, user, password), "credentials")
    }

    func tls(caFile: String?, certificateFile: String?, keyFile: String?) throws(Failure) {
        try check(cmosq_tls(client, caFile, certificateFile, keyFile), "tls")
    }

    func will(topic: String, payload: String) throws(Failure) {
        try check(cmosq_will(client, topic, payload), "will")
    }

    func connect(host: String, port: Int, keepAlive: Int) throws(Failure) {
        try check(cmosq_connect(client, host, Int32(port), Int32(keepAlive)), "connect")
    }

    func disconnect() {
        owner.preconditionOwned("MosquittoClient.disconnect")
        _ = cmosq_disconnect(client)
    }

    /// The socket to poll, or -1 while there is none; and whether it waits to be written.
    var socket: Int32 {
        owner.preconditionOwned("MosquittoClient.socket")
        return cmosq_socket(client)
    }

    var wantsWrite: Bool {
        owner.preconditionOwned("MosquittoClient.wantsWrite")
        return cmosq_wants_write(client)
    }

    /// Reads and writes what poll said, then the protocol's housekeeping (its keep-alive ping).
    /// A failure here means the connection is lost (``Event/disconnected(code:)`` delivered).
    func serviceSocket(readable: Bool, writable: Bool) throws(Failure) {
        owner.preconditionOwned("MosquittoClient.serviceSocket")
        if readable { try checkLoop(cmosq_loop_read(client)) }
        if writable { try checkLoop(cmosq_loop_write(client)) }
        try checkLoop(cmosq_loop_misc(client))
    }

    /// Publishes at QoS 1; returns the message's id, which ``Event/acknowledged(messageID:)`` names.
    @discardableResult
    func publish(topic: String, payload: [UInt8], retain: Bool) throws(Failure) -> Int32 {
        owner.preconditionOwned("MosquittoClient.publish")
        var mid: Int32 = 0
        let code = payload.withUnsafeBytes { cmosq_publish(client, topic, $0.baseAddress, $0.count, retain, &mid) }
        if code != 0 { throw Failure(code) }
        return mid
    }

    func subscribe(_ pattern: String) throws(Failure) {
        owner.preconditionOwned("MosquittoClient.subscribe")
        let code = cmosq_subscribe(client, pattern)
        if code != 0 { throw Failure(code) }
    }

    static func connackText(_ code: Int32) -> String {
        String(cString: cmosq_connack_text(code))
    }

    private func check(_ code: Int32, _ what: String) throws(Failure) {
        owner.preconditionOwned("MosquittoClient.\(what)")
        if code != 0 { throw Failure(code) }
    }

    private func checkLoop(_ code: Int32) throws(Failure) {
        if code != 0 { throw Failure(code) }
    }
}
