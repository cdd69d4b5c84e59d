import _KeepalivedControlProtocol
import CKeepAliveLinux
import KeepAlive
import Glibc

/// The changes waiting for the main loop, oldest first. Every reload (SIGHUP, the control
/// socket's `reload`) is applied on the main loop, one at a time and in the order asked, like
/// the rescans (a player's `release` never waits here: ``PlayerLoans`` answers it on the control
/// socket's thread): a reload on another thread could land between a
/// rescan's plan and its `reconfigure` and be overwritten by a plan made from the old options,
/// after it had reported success. Its descriptor (an eventfd) is readable while requests wait.
///
/// ```swift
/// // The control socket's thread:
/// let reply = queue.reload(trigger: "control socket")
/// // The main loop, once `queue.descriptor` polled readable:
/// for request in queue.take() { request.fulfil(reloader.reload(trigger: request.trigger, on: runtime.mainLoop)) }
/// ```
final class MainLoopQueue: Sendable {
    /// How long the control socket waits for its reload: a reload may wait for the sound
    /// server's first answer (2 s) and join playback threads, but a client is not held for ever.
    static let replyTimeout: Duration = .seconds(10)

    let descriptor: Int32
    /// Taken in turn by the socket's thread and the main loop.
    private let state = Locked(State())

    private struct State: Sendable {
        var pending: [MainLoopRequest] = []
        /// Set once the daemon stops: what every request left or to come is answered.
        var closed: ControlReply?
    }

    /// - Throws: `Errno` when the system refuses an eventfd.
    init() throws(Errno) {
        descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard descriptor >= 0 else { throw Errno(errno) }
    }

    deinit { Glibc.close(descriptor) }

    /// Queues `request` behind the others and wakes the main loop; once the queue is closed the
    /// request is failed at once instead.
    func submit(_ request: MainLoopRequest) {
        let closed = state.withLock { state in
            if state.closed == nil { state.pending.append(request) }
            return state.closed
        }
        if let closed {
            request.fulfil(closed)
            return
        }
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    /// The requests queued since the last call, oldest first (main loop only).
    func take() -> [MainLoopRequest] {
        var count: UInt64 = 0
        _ = read(descriptor, &count, 8)
        return state.withLock { state in
            defer { state.pending.removeAll() }
            return state.pending
        }
    }

    /// Fails every queued request with `reply`, and every later one: the daemon is stopping and
    /// no main loop will apply them.
    func close(failing reply: ControlReply) {
        let left = state.withLock { state in
            state.closed = reply
            defer { state.pending.removeAll() }
            return state.pending
        }
        for request in left { request.fulfil(reply) }
    }

    /// Asks for a reload and waits up to `timeout` for its outcome (the control socket's
    /// `reload`): the reply the main loop's reload gave, or a failure saying why there is none.
    func reload(trigger: String, timeout: Duration = MainLoopQueue.replyTimeout) -> ControlReply {
        let request: MainLoopRequest
        do { request = try MainLoopRequest.awaited(trigger: trigger) } catch {
            return .failure("reload not queued: \(error)")
        }
        submit(request)
        return request.wait(timeout: timeout)
            ?? .failure("reload still waiting after \(timeout.components.seconds) s; it will be applied when the daemon gets to it")
    }

    /// Queues a reload whose outcome the caller collects once the request's
    /// ``MainLoopRequest/readyDescriptor`` polls readable (the control socket's thread, which
    /// serves its other clients meanwhile); a failure when it cannot be queued.
    func queueReload(trigger: String) -> Result<MainLoopRequest, QueueFailure> {
        let request: MainLoopRequest
        do { request = try MainLoopRequest.awaited(trigger: trigger) } catch {
            return .failure(QueueFailure(reply: .failure("reload not queued: \(error)")))
        }
        submit(request)
        return .success(request)
    }

    /// Why a request was not queued, as its asker is told.
    struct QueueFailure: Error {
        var reply: ControlReply
    }

    /// What a request left waiting when the daemon stops is told.
    static let stopping = ControlReply.failure("not applied: keepalived is stopping")
}
