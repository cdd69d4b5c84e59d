import CKeepAliveLinux
import Glibc

/// The memory a ``RenderedLoop`` lives in: one contiguous, readable run of bytes that repeats a
/// cycle.
///
/// A loop is long where one write must be one call (a sound server's stream: two of its two-second
/// periods, 345 kB of a mono 44.1 kHz signal, 750 kB of a stereo 48 kHz one), yet it holds one
/// short cycle over and over (keepalived's -1 LSB is one frame). So a long loop is one tile of
/// whole cycles and whole pages, rendered once and mapped again at every tile's place in a
/// reserved range (one memfd, `MAP_SHARED | MAP_FIXED`): a write still reads one contiguous run,
/// and the loop costs one tile of memory whatever its length. A loop too short to hold two
/// tiles, a cycle too long to tile pages with, or a system that refuses memfd_create or the
/// mappings (a seccomp filter, the map count) gets one plain allocation, which plays the same.
///
/// ```swift
/// let memory = LoopMemory(byteCount: 352_800, cycleBytes: 2)
/// // Render memory.distinctBytes from memory.base; the rest of byteCount repeats them.
/// memory.release()
/// ```
struct LoopMemory {
    /// The first byte; `byteCount` bytes from here are readable.
    let base: UnsafeMutableRawPointer
    /// Bytes from ``base`` a reader may read: at least the bytes asked for.
    let byteCount: Int
    /// The bytes to write: every later byte is the one `distinctBytes` before it. All of
    /// ``byteCount`` for a plain allocation.
    let distinctBytes: Int
    /// Whether the bytes are mapped tiles (released with munmap) rather than allocated.
    let isTiled: Bool

    /// The smallest tile worth mapping: fewer mappings per loop (each is a kernel VMA), at a
    /// few pages of memory.
    static let minimumTileBytes = 16 * 1024

    /// Memory for `byteCount` bytes that repeat every `cycleBytes`.
    init(byteCount: Int, cycleBytes: Int) {
        precondition(byteCount > 0 && cycleBytes > 0, "a loop holds at least one cycle")
        if let tiled = Self.tiled(byteCount: byteCount, cycleBytes: cycleBytes) {
            self = tiled
        } else {
            base = .allocate(byteCount: byteCount, alignment: 16)
            self.byteCount = byteCount
            distinctBytes = byteCount
            isTiled = false
        }
    }

    private init(base: UnsafeMutableRawPointer, byteCount: Int, tileBytes: Int) {
        self.base = base
        self.byteCount = byteCount
        distinctBytes = tileBytes
        isTiled = true
    }

    /// The tile for `cycleBytes`: whole cycles and whole pages, at least ``minimumTileBytes``;
    /// nil when `byteCount` does not hold two of them (nothing to save).
    static func tileBytes(byteCount: Int, cycleBytes: Int, pageBytes: Int) -> Int? {
        var a = pageBytes, b = cycleBytes
        while b != 0 { (a, b) = (b, a % b) }
        let (unit, overflow) = (pageBytes / a).multipliedReportingOverflow(by: cycleBytes)
        guard !overflow, unit <= byteCount / 2 else { return nil }
        let tile = (minimumTileBytes + unit - 1) / unit * unit
        return tile <= byteCount / 2 ? tile : unit
    }

    private static func tiled(byteCount: Int, cycleBytes: Int) -> LoopMemory? {
        let page = sysconf(Int32(_SC_PAGESIZE))
        guard page > 0, let tile = tileBytes(byteCount: byteCount, cycleBytes: cycleBytes, pageBytes: page) else { return nil }
        let tiles = (byteCount + tile - 1) / tile
        let length = tiles * tile
        let fd = csystem_memfd("keepalive-loop")
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard ftruncate(fd, off_t(tile)) == 0 else { return nil }
        // The whole range first, inaccessible, so that no other mapping lands between tiles.
        guard let reserved = mmap(nil, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), reserved != MAP_FAILED else {
            return nil
        }
        for index in 0..<tiles {
            let place = reserved + index * tile
            guard mmap(place, tile, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == place else {
                munmap(reserved, length)
                return nil
            }
        }
        return LoopMemory(base: reserved, byteCount: length, tileBytes: tile)
    }

    /// Gives the memory back; nothing may read it afterwards.
    func release() {
        if isTiled {
            munmap(base, byteCount)
        } else {
            base.deallocate()
        }
    }
}
