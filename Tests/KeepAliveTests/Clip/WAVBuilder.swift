@testable import KeepAlive

/// Builds WAV files byte by byte, so each test states exactly which field is wrong.
struct WAVBuilder {
    var formatTag: UInt16 = 1
    var channels: UInt16 = 1
    var sampleRate: UInt32 = 44100
    var bitsPerSample: UInt16 = 16
    var blockAlign: UInt16?
    var extensible = false
    var extensibleSubformat: UInt16 = 1
    var extensionSize: UInt16 = 22
    var chunksBeforeFormat: [(String, [UInt8])] = []
    var chunksBeforeData: [(String, [UInt8])] = []
    var chunksAfterData: [(String, [UInt8])] = []
    var includeFormat = true
    var includeData = true
    var data: [UInt8] = [0xFC, 0xFF]
    var formatChunkOverride: [UInt8]?

    static func chunk(_ id: String, _ body: [UInt8], declaredSize: UInt32? = nil) -> [UInt8] {
        var bytes = Array(id.utf8)
        bytes += le32(declaredSize ?? UInt32(body.count))
        bytes += body
        if body.count % 2 == 1 { bytes.append(0) }
        return bytes
    }

    static func le16(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
    static func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8((value >> (8 * $0)) & 0xFF) } }

    var formatBody: [UInt8] {
        if let formatChunkOverride { return formatChunkOverride }
        let align = blockAlign ?? UInt16(Int(channels) * Int(bitsPerSample) / 8)
        var body = Self.le16(extensible ? 0xFFFE : formatTag) + Self.le16(channels) + Self.le32(sampleRate)
        body += Self.le32(sampleRate * UInt32(align)) + Self.le16(align) + Self.le16(bitsPerSample)
        if extensible {
            body += Self.le16(extensionSize) + Self.le16(bitsPerSample) + Self.le32(0x3)
            body += Self.le16(extensibleSubformat)
            body += [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]
        }
        return body
    }

    var bytes: [UInt8] {
        var payload = Array("WAVE".utf8)
        for (id, body) in chunksBeforeFormat { payload += Self.chunk(id, body) }
        if includeFormat { payload += Self.chunk("fmt ", formatBody) }
        for (id, body) in chunksBeforeData { payload += Self.chunk(id, body) }
        if includeData { payload += Self.chunk("data", data) }
        for (id, body) in chunksAfterData { payload += Self.chunk(id, body) }
        return Array("RIFF".utf8) + Self.le32(UInt32(payload.count)) + payload
    }

    /// Replaces the RIFF size with the size the payload really has after `bytes` was edited.
    static func fixRIFFSize(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        let size = le32(UInt32(bytes.count - 8))
        bytes.replaceSubrange(4..<8, with: size)
        return bytes
    }
}
