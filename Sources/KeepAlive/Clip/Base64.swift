/// Decodes standard base64 (RFC 4648, `+` and `/`), the form iOS apps embed clips in.
///
/// ASCII white space is skipped so that wrapped text from a configuration file decodes too;
/// anything else outside the alphabet, or misplaced padding, is an error naming its offset.
enum Base64 {
    static func decode(_ text: some StringProtocol) throws(ClipError) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count / 4 * 3)
        var quantum: UInt32 = 0
        var filled = 0
        var padding = 0
        var offset = 0
        for byte in text.utf8 {
            defer { offset += 1 }
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D:
                continue
            case UInt8(ascii: "="):
                guard filled >= 2 else { throw .notBase64(reason: "padding '=' too early at offset \(offset)") }
                padding += 1
                filled += 1
                quantum <<= 6
                if filled == 4 { try flush(&output, quantum, padding, offset) ; filled = 0; quantum = 0 }
                continue
            default:
                break
            }
            guard padding == 0 else { throw .notBase64(reason: "data after padding at offset \(offset)") }
            guard let value = sextet(byte) else {
                let shown = byte >= 0x21 && byte < 0x7F ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
                throw .notBase64(reason: "invalid character \(shown) at offset \(offset)")
            }
            quantum = quantum << 6 | UInt32(value)
            filled += 1
            if filled == 4 { try flush(&output, quantum, 0, offset); filled = 0; quantum = 0 }
        }
        guard filled == 0 else { throw .notBase64(reason: "length is not a multiple of 4 (missing padding)") }
        guard !output.isEmpty else { throw .notBase64(reason: "no data") }
        return output
    }

    private static func flush(_ output: inout [UInt8], _ quantum: UInt32, _ padding: Int, _ offset: Int) throws(ClipError) {
        guard padding <= 2 else { throw .notBase64(reason: "too much padding at offset \(offset)") }
        output.append(UInt8(truncatingIfNeeded: quantum >> 16))
        if padding < 2 { output.append(UInt8(truncatingIfNeeded: quantum >> 8)) }
        if padding < 1 { output.append(UInt8(truncatingIfNeeded: quantum)) }
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
