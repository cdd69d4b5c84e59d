import CKeepAliveLinux
import Glibc

/// A thread could not be created: `pthread_create` refused (`EAGAIN` when the process or the
/// system ran out of threads or memory for a stack).
///
/// ```swift
/// do { _ = try startThread(named: "keepalive-ctl") { serve() } } catch { logger.error("\(error)") }
/// ```
package struct ThreadStartError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The name the thread would have had.
    package let name: String
    /// `pthread_create`'s result, an `errno` value.
    package let code: Int32

    package var description: String { "cannot start thread '\(name)': \(String(cString: strerror(code))) (errno \(code))" }
}

/// A running thread from ``startThread(named:_:)``, joined exactly once.
///
/// Not copyable, so that a thread cannot be joined twice, nor a handle that never started be
/// joined at all.
///
/// ```swift
/// let stopped = try Doorbell()
/// let thread = try startThread(named: "keepalive-play") { _ = stopped.wait(.seconds(60)) }   // a playback thread's wait
/// stopped.ring()
/// thread.join()
/// ```
package struct JoinableThread: ~Copyable, Sendable {
    private let handle: pthread_t

    fileprivate init(_ handle: pthread_t) { self.handle = handle }

    /// Waits for the thread's body to return.
    package consuming func join() {
        pthread_join(handle, nil)
    }
}

/// Starts `body` on a new thread named `name`, with every signal blocked, and returns a handle to
/// join it with.
///
/// Signals belong to the process's own handlers (swift-service-lifecycle's, on the threads it
/// chose); a signal landing on one of the engine's threads would only turn its wait into `EINTR`.
/// Linux keeps 15 bytes of `name`.
///
/// ```swift
/// let thread = try startThread(named: "keepalive-ctl") { serve() }
/// // … once serve() was told to return:
/// thread.join()
/// ```
/// - Throws: ``ThreadStartError`` when the thread cannot be created; `body` never runs then.
package func startThread(named name: String, _ body: @escaping @Sendable () -> Void) throws(ThreadStartError) -> JoinableThread {
    JoinableThread(try spawnThread(named: name, body, create: { pthread_create($0, nil, $1, $2) }))
}

/// Starts `body` on a new detached thread named `name`, with every signal blocked: for work
/// that may block and that nobody joins (it reports its end itself).
///
/// ```swift
/// try startDetachedThread(named: "keepalive-stop") { manager.stop(); continuation.resume() }
/// ```
/// - Throws: ``ThreadStartError`` when the thread cannot be created; `body` never runs then.
package func startDetachedThread(named name: String, _ body: @escaping @Sendable () -> Void) throws(ThreadStartError) {
    pthread_detach(try spawnThread(named: name, body, create: { pthread_create($0, nil, $1, $2) }))
}

/// `pthread_create`'s shape, so that the tests can make it fail.
typealias ThreadCreator = (
    UnsafeMutablePointer<pthread_t>, @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer?, UnsafeMutableRawPointer?
) -> Int32

/// Creates the thread through `create`; on failure, releases what the thread would have owned.
func spawnThread(named name: String, _ body: @escaping @Sendable () -> Void, create: ThreadCreator) throws(ThreadStartError) -> pthread_t {
    let job = Unmanaged.passRetained(ThreadJob(name: name, body: body)).toOpaque()
    var handle = pthread_t()
    let result = create(&handle, { context in
        let job = Unmanaged<ThreadJob>.fromOpaque(context!).takeRetainedValue()
        var all = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_BLOCK, &all, nil)
        csystem_name_current_thread(job.name)
        job.body()
        return nil
    }, job)
    guard result == 0 else {
        Unmanaged<ThreadJob>.fromOpaque(job).release()
        throw ThreadStartError(name: name, code: result)
    }
    return handle
}

/// What a new thread runs, boxed to cross `pthread_create`'s context pointer.
private final class ThreadJob: Sendable {
    let name: String
    let body: @Sendable () -> Void

    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}
