import FoundationEssentials
import KeepAlive

/// The control socket speaks one JSON object per line each way.
///
///     → {"request":"status"}
///     ← {"ok":true,"status":{"state":"playing","pid":4242,…,"outputs":[…]}}
///     → {"request":"stop"}
///     ← {"ok":true,"pid":4242}
///     → {"request":"reload"}
///     ← {"ok":true,"changed":false}
struct ControlRequest: Codable {
    var request: String
}

struct ControlReply: Codable {
    var ok: Bool
    var error: String?
    var pid: Int32?
    var status: DaemonStatus?
    var changed: Bool?

    static func failure(_ message: String) -> ControlReply { ControlReply(ok: false, error: message) }
}

/// What `keepalived status` shows.
struct DaemonStatus: Codable, Equatable {
    var state: String
    var reason: String?
    var pid: Int32
    var uptimeSeconds: Double
    var socket: String
    var logFile: String?
    var outputs: [OutputReport]
}

struct OutputReport: Codable, Equatable {
    var device: String
    var state: String
    var reason: String?
    var format: String?
    var rate: Int?
    var channels: Int?
    var bufferFrames: Int?
    var periodFrames: Int?
    var volume: Double
    var ceiling: Double
    var framesPlayed: Int
    /// All recoveries together.
    var recoveries: Int
    var recoveriesByReason: [String: Int]
    var lastError: String?

    init(_ output: OutputStatus, ceiling: Level) {
        device = output.device
        state = output.state.name
        reason = output.state.reason?.rawValue
        format = output.format?.sampleFormat.rawValue
        rate = output.format?.sampleRate
        channels = output.format?.channels
        bufferFrames = output.format?.bufferFrames
        periodFrames = output.format?.periodFrames
        volume = output.volume.linear
        self.ceiling = ceiling.linear
        framesPlayed = output.framesPlayed
        recoveries = output.totalRecoveries
        recoveriesByReason = Dictionary(uniqueKeysWithValues: output.recoveries.map { ($0.key.rawValue, $0.value) })
        lastError = output.lastError
    }
}

enum ControlJSON {
    static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return #"{"ok":false,"error":"cannot encode reply"}"# }
        return String(decoding: data, as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}
