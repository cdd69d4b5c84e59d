import _KeepalivedControlProtocol
import CKeepAliveLinux
import KeepAlive
import Glibc

/// A change asked of the main loop (a reload, or home automation's command), and the hand-over
/// of its outcome to whoever asked: the main loop applies it and calls ``fulfil(_:)``; the asker
/// polls ``readyDescriptor`` (the control socket's thread, which goes on serving other clients
/// meanwhile) or blocks in ``wait(timeout:)``. A SIGHUP's request and a command have nobody
/// waiting for them.
///
/// ```swift
/// let request = try MainLoopRequest.awaited(trigger: "control socket")
/// queue.submit(request)
/// let reply = request.wait(timeout: .seconds(10)) ?? .failure("…")
/// ```
final class MainLoopRequest: Sendable {
    /// What asked for it, for the log: `SIGHUP`, `control socket`, `MQTT`.
    let trigger: String
    /// What is asked.
    let change: Change

    enum Change: Equatable, Sendable {
        case reload
        case remote(RemoteCommand)
    }
    /// Taken in turn by the main loop and the asker.
    private let outcome = Locked<ControlReply?>(nil)
    /// An eventfd, readable once the outcome is in, so the asker can wait with a bound; -1 when
    /// nobody waits.
    private let ready: Int32

    /// A reload nobody waits for (SIGHUP's).
    convenience init(trigger: String) {
        self.init(trigger: trigger, change: .reload, ready: -1)
    }

    /// Home automation's command, which nobody waits for: its outcome is the journal's.
    convenience init(_ command: RemoteCommand, trigger: String) {
        self.init(trigger: trigger, change: .remote(command), ready: -1)
    }

    /// A request whose asker waits for it in ``wait(timeout:)``.
    /// - Throws: `Errno` when there is no eventfd to wait on (the process is out of
    ///   descriptors); nothing was queued then.
    static func awaited(trigger: String) throws(Errno) -> MainLoopRequest {
        let ready = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard ready >= 0 else { throw Errno(errno) }
        return MainLoopRequest(trigger: trigger, change: .reload, ready: ready)
    }

    private init(trigger: String, change: Change, ready: Int32) {
        self.trigger = trigger
        self.change = change
        self.ready = ready
    }

    deinit { if ready >= 0 { close(ready) } }

    /// An eventfd readable once the outcome is in; -1 when nobody waits.
    var readyDescriptor: Int32 { ready }

    /// The outcome so far, nil while the request waits.
    var reply: ControlReply? { outcome.withLock { $0 } }

    /// Settles the request; the first outcome stands (a request closed as the daemon stops is
    /// not applied afterwards, and one applied is not failed afterwards).
    func fulfil(_ reply: ControlReply) {
        let first = outcome.withLock { outcome in
            guard outcome == nil else { return false }
            outcome = reply
            return true
        }
        guard first, ready >= 0 else { return }
        var one: UInt64 = 1
        _ = write(ready, &one, 8)
    }

    /// Blocks until the request is settled or `timeout` has passed; nil on the timeout (the
    /// request stays queued and is still applied).
    func wait(timeout: Duration) -> ControlReply? {
        precondition(ready >= 0, "wait(timeout:) on a request nobody awaits")
        let deadline = ContinuousClock.now + timeout
        while true {
            if let reply { return reply }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return nil }
            var descriptor = pollfd(fd: ready, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, left.pollTimeout)
        }
    }
}
