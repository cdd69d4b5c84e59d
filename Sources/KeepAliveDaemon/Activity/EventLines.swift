import _KeepalivedControlProtocol
import CKeepAliveLinux
import KeepAlive
import Glibc

/// The `keepalived events` lines waiting for the control socket's thread: ``BoxActivity``
/// publishes each change here from whichever thread saw it, and the control socket's thread,
/// woken through ``descriptor``, takes them and sends each to every subscriber. Bounded: a
/// control thread that fell behind loses the oldest lines (``capacity``), never the daemon.
///
/// ```swift
/// let lines = try EventLines()
/// lines.publish(ActivityEvent(event: "active", output: "hw:0,0", program: "mpd", time: 0))
/// let waiting = lines.take()   // after `descriptor` polled readable: encoded lines, newline ended
/// ```
final class EventLines: Sendable {
    static let capacity = 256
    /// Readable while lines wait.
    let descriptor: Int32
    private let writer: Int32
    private let lines = Locked<[String]>([])
    /// Told each event as it is published (`--mqtt`'s publisher): they must not wait.
    private let observers = Locked<[@Sendable (ActivityEvent) -> Void]>([])

    /// - Throws: `Errno` when no pipe can be made.
    init() throws(Errno) {
        var ends: [Int32] = [0, 0]
        guard csystem_pipe_nonblocking(&ends) == 0 else { throw Errno(errno) }
        descriptor = ends[0]
        writer = ends[1]
    }

    deinit {
        close(descriptor)
        close(writer)
    }

    /// Calls `observer` with every event from now on, on the thread that publishes it.
    func observe(_ observer: @escaping @Sendable (ActivityEvent) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    func publish(_ event: ActivityEvent) {
        for observer in observers.withLock({ $0 }) { observer(event) }
        let line = ControlJSON.encode(event) + "\n"
        let first = lines.withLock { lines in
            if lines.count >= Self.capacity { lines.removeFirst() }
            lines.append(line)
            return lines.count == 1
        }
        guard first else { return }
        var byte: UInt8 = 1
        _ = write(writer, &byte, 1)
    }

    /// The lines waiting, oldest first; the descriptor is quiet again afterwards.
    func take() -> [String] {
        var drained = [UInt8](repeating: 0, count: 64)
        while read(descriptor, &drained, drained.count) > 0 {}
        return lines.withLock { lines in
            defer { lines = [] }
            return lines
        }
    }
}
