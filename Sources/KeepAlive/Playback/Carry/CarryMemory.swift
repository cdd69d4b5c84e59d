import CKeepAliveLinux
import CKeepalivedCarry
import Glibc

/// The memory a carried player writes its frames into, and the eventfd it kicks after each
/// write: made by the playback thread for each format the player sets, sealed at its size (a
/// player cannot shrink it under keepalived's reads), mapped here once. Everything read from it
/// is the player's and is checked before use (``CarryStateMachine``).
final class CarryMemory {
    let shared: UnsafeMutablePointer<ckeepalived_carry_shared>
    let frames: UnsafeMutableRawPointer
    let bufferFrames: Int
    let frameBytes: Int
    let memory: Int32
    /// The player writes to it after each write and each change of state; the carrying loop polls it.
    let kick: Int32
    private let size: Int

    /// - Throws: ``CarryMemoryError`` naming the call that failed.
    init(format: CarriedFormat, frameBytes: Int) throws(CarryMemoryError) {
        self.bufferFrames = format.bufferFrames
        self.frameBytes = frameBytes
        size = Int(CKEEPALIVED_CARRY_DATA_OFFSET) + format.bufferFrames * frameBytes
        let fd = csystem_memfd_sealable("keepalived-carry")
        guard fd >= 0 else { throw CarryMemoryError(call: "memfd_create", code: errno) }
        guard ftruncate(fd, off_t(size)) == 0, csystem_memfd_seal_size(fd) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw CarryMemoryError(call: "ftruncate", code: code)
        }
        let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let mapped, mapped != MAP_FAILED else {
            let code = errno
            Glibc.close(fd)
            throw CarryMemoryError(call: "mmap", code: code)
        }
        let event = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard event >= 0 else {
            let code = errno
            munmap(mapped, size)
            Glibc.close(fd)
            throw CarryMemoryError(call: "eventfd", code: code)
        }
        memory = fd
        kick = event
        shared = mapped.assumingMemoryBound(to: ckeepalived_carry_shared.self)
        frames = mapped + Int(CKEEPALIVED_CARRY_DATA_OFFSET)
        ckeepalived_carry_init(shared, UInt32(format.bufferFrames), UInt32(frameBytes), UInt32(format.rate))
    }

    deinit {
        ckeepalived_carry_end(shared)
        munmap(UnsafeMutableRawPointer(shared), size)
        Glibc.close(memory)
        Glibc.close(kick)
    }

    /// The player's counters now; nil when it was mid-write through every try.
    func player() -> ckeepalived_carry_player? {
        var player = ckeepalived_carry_player()
        return ckeepalived_carry_player_read(shared, &player) == 0 ? player : nil
    }

    func publish(_ position: ckeepalived_carry_position) { ckeepalived_carry_publish(shared, position) }

    /// Empties the eventfd.
    func drainKick() {
        var value: UInt64 = 0
        _ = read(kick, &value, 8)
    }

    /// Where frame `index` of the stream is, and how many follow it before the buffer wraps.
    func slice(at index: UInt64) -> (UnsafeRawPointer, Int) {
        let slot = Int(index % UInt64(bufferFrames))
        return (UnsafeRawPointer(frames + slot * frameBytes), bufferFrames - slot)
    }
}

/// A system call that failed while the memory for a carried player was made.
struct CarryMemoryError: Error, CustomStringConvertible {
    let call: String
    let code: Int32
    var description: String { "\(call): \(String(cString: strerror(code)))" }
}
