import Foundation

/// Reads whole files with read(2).
///
/// FoundationEssentials' `String(contentsOf:)` and `Data(contentsOf:)` (Swift 6.3.1) leak a
/// 4 KiB read buffer for every file whose size reads as zero: empty files (some fuzz seeds),
/// /proc files, a daemon's log before its first line. LeakSanitizer reports each one under
/// `swift test --sanitize=address`, so the tests read files through here instead.
public enum FileContents {
    public struct Unreadable: Error, CustomStringConvertible {
        public let path: String
        public let errno: Int32
        public var description: String { "cannot read \(path): \(String(cString: strerror(errno)))" }
    }

    public static func bytes(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Unreadable(path: path, errno: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Unreadable(path: path, errno: errno)
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
        }
    }

    public static func bytes(_ url: URL) throws -> [UInt8] { try bytes(url.path) }

    public static func data(_ url: URL) throws -> Data { Data(try bytes(url.path)) }

    public static func text(_ path: String) throws -> String { String(decoding: try bytes(path), as: UTF8.self) }

    public static func text(_ url: URL) throws -> String { try text(url.path) }
}
