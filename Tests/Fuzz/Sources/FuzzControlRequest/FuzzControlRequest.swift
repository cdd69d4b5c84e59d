import _KeepalivedControlProtocol

/// Any bytes as what a client sends on the control socket, cut into reads of the sizes a real
/// socket could deliver: the reader never holds more than its limit plus one read, every line
/// gets exactly one outcome, and every refusal encodes as one line of JSON that reads back.
///
/// The first byte of the input picks the read size (1 to 256 bytes); the rest is the stream.
/// Two readers see the same stream: the daemon's (64 KiB per line) and a small one (64 bytes),
/// so the over-limit path is reached by short inputs too.
// Also exported under libFuzzer's own name: -sanitize=fuzzer links libFuzzer's main, which
// references it, even though this target's main calls the driver directly.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzControlRequest(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = UnsafeBufferPointer(start: start, count: count)
    guard let first = input.first else { return 0 }
    let readSize = Int(first) + 1
    let stream = input.dropFirst()
    for limit in [64 * 1024, 64] {
        var reader = ControlRequestReader(limit: limit)
        var offset = stream.startIndex
        var lines = 0
        var closed = false
        while offset < stream.endIndex && !closed {
            let end = min(offset + readSize, stream.endIndex)
            let read = stream[offset..<end]
            offset = end
            reader.append(contentsOf: read)
            precondition(reader.bufferedByteCount <= limit + read.count, "reader holds \(reader.bufferedByteCount) bytes")
            while let next = reader.next() {
                lines += 1
                switch next {
                case .request(let command):
                    if case .release(let release) = command {
                        // Whatever arrived, a release names one card device in ALSA's range and
                        // a short printable program name.
                        precondition(ReleaseRequest.cardRange.contains(release.card) && ReleaseRequest.deviceRange.contains(release.device))
                        precondition((release.program?.utf8.count ?? 0) <= ReleaseRequest.maximumProgramLength)
                        precondition(release.program?.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F } ?? true)
                    }
                case .invalid(let error):
                    checkRefusal(error)
                case .overLimit(let error):
                    checkRefusal(error)
                    closed = true
                }
                if closed { break }
            }
            precondition(closed || reader.bufferedByteCount <= limit, "kept \(reader.bufferedByteCount) bytes over the limit open")
        }
        let newlines = stream[..<offset].count(where: { $0 == UInt8(ascii: "\n") })
        precondition(closed || lines == newlines, "\(newlines) lines, \(lines) outcomes")
    }
    return 0
}

/// A refusal goes back to the client as one line: no raw newline, valid JSON, same words.
private func checkRefusal(_ error: ControlRequestError) {
    let encoded = ControlJSON.encode(ControlReply.failure("\(error)"))
    precondition(!encoded.utf8.contains(UInt8(ascii: "\n")), "refusal spans lines: \(encoded)")
    let decoded = try? ControlJSON.decode(ControlReply.self, from: Array(encoded.utf8))
    precondition(decoded?.ok == false && decoded?.error == "\(error)", "refusal does not read back: \(encoded)")
}
