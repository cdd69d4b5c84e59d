@testable import KeepAlive

/// Any bytes as the text of a base64 clip (a command-line argument or a configuration value):
/// decoding either fails with a described error or its output, encoded again, decodes to itself;
/// what decodes is then read as a WAV like any clip.
// Also exported under libFuzzer's own name: -sanitize=fuzzer links libFuzzer's main, which
// references it, even though this target's main calls the driver directly.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzBase64Clip(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    let decoded: [UInt8]
    do {
        decoded = try Base64.decode(text)
    } catch {
        precondition(!error.description.isEmpty, "a base64 error without words")
        return 0
    }
    precondition(decoded.count <= text.utf8.count / 4 * 3, "more bytes out than base64 can carry")
    let again = try? Base64.decode(encode(decoded))
    precondition(again == decoded, "base64 round trip changed the bytes")
    do {
        let clip = try Clip(base64: text)
        precondition(clip.frameCount > 0)
    } catch {
        precondition(!error.description.isEmpty)
    }
    return 0
}

/// A plain RFC 4648 encoder, written independently of the decoder under test.
private func encode(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
        let b0 = UInt32(bytes[index])
        let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
        let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
        let quantum = b0 << 16 | b1 << 8 | b2
        out.append(alphabet[Int(quantum >> 18 & 63)])
        out.append(alphabet[Int(quantum >> 12 & 63)])
        out.append(index + 1 < bytes.count ? alphabet[Int(quantum >> 6 & 63)] : UInt8(ascii: "="))
        out.append(index + 2 < bytes.count ? alphabet[Int(quantum & 63)] : UInt8(ascii: "="))
        index += 3
    }
    return String(decoding: out, as: UTF8.self)
}
