import Glibc

/// A small /proc or /sys file (a process's status, a card's id, a substream's state); nil when
/// it cannot be read. One read of at most 4 KiB: such a file is made whole by the kernel at
/// each read, so a second read could see another state.
func readSmallFile(_ path: String) -> String? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes = [UInt8](repeating: 0, count: 4096)
    let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
    guard count >= 0 else { return nil }
    return String(decoding: bytes.prefix(count), as: UTF8.self)
}
