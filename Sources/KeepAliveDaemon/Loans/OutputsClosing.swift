import CKeepAliveLinux
import KeepAlive
import Glibc

/// One release's closing of keepalived's outputs on a card device, which runs on a thread of its
/// own (each close waits for an output's playback thread, which may be inside an open: keepalived's
/// own through the front door asks the control socket, whose thread must answer it): the control
/// socket's thread polls ``descriptor`` and sends the player's reply once it is readable.
///
/// ```swift
/// let closing = try OutputsClosing()
/// closing.finish()            // the release's thread, once every output is closed
/// closing.isFinished          // true; `descriptor` polls readable from then on
/// ```
final class OutputsClosing: Sendable {
    /// An eventfd, readable once the outputs are closed (and from then on).
    let descriptor: Int32
    private let finished = Locked(false)

    /// - Throws: `Errno` when there is no eventfd (the process is out of descriptors).
    init() throws(Errno) {
        let descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard descriptor >= 0 else { throw Errno(errno) }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    var isFinished: Bool { finished.withLock { $0 } }

    /// The outputs are closed: every waiter's reply may go.
    func finish() {
        let first = finished.withLock { finished in
            defer { finished = true }
            return !finished
        }
        guard first else { return }
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }
}
