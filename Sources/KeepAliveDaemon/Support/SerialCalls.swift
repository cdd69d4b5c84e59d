import Glibc
import KeepAlive

/// Calls carried out one after another, in the order they were queued, off the thread that
/// queues them: on a thread of their own that starts when a call comes and ends once none is
/// left, so an idle daemon keeps no thread for them.
///
/// For ``LingerWatcher``, which decides on libpulse's thread with the main loop locked: the
/// manager's pause and resume join the output's playback thread, and a sink output's stream
/// takes that same lock to close (one connection per process, ``SoundServerConnection``), so
/// calling them there would deadlock.
///
/// ```swift
/// let calls = SerialCalls(threadName: "keepalive-lngr")
/// calls.enqueue { manager.pause(.linger, output: "pulse") }
/// calls.waitUntilDone()   // every queued call ran
/// ```
///
/// Concurrency: any thread. ``waitUntilDone()`` never from a call, nor holding a lock a call takes.
final class SerialCalls: @unchecked Sendable {
    let threadName: String
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let idle: UnsafeMutablePointer<pthread_cond_t>
    // Under the mutex.
    private var queue: [@Sendable () -> Void] = []
    private var running = false
    private var warned = false
    /// Told once when no thread could be started (the calls then wait for the next one, or for
    /// ``waitUntilDone()``, which runs them itself).
    private let onThreadFailure: @Sendable (ThreadStartError) -> Void

    init(threadName: String, onThreadFailure: @escaping @Sendable (ThreadStartError) -> Void = { _ in }) {
        self.threadName = threadName
        self.onThreadFailure = onThreadFailure
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        idle = .allocate(capacity: 1)
        // Timed waits (``waitUntilDone(within:)``) count on the monotonic clock: a clock step at
        // a stop must not stretch or cut them.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(idle, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(idle)
        idle.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Queues `call`; it runs after every call queued before it.
    func enqueue(_ call: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        queue.append(call)
        let start = !running
        running = true
        pthread_mutex_unlock(mutex)
        guard start else { return }
        do {
            try startDetachedThread(named: threadName) { [self] in drain() }
        } catch {
            pthread_mutex_lock(mutex)
            running = false
            let first = !warned
            warned = true
            pthread_cond_broadcast(idle)
            pthread_mutex_unlock(mutex)
            if first { onThreadFailure(error) }
        }
    }

    /// Returns once every call queued so far ran; runs itself those no thread could take.
    func waitUntilDone() {
        pthread_mutex_lock(mutex)
        while running { pthread_cond_wait(idle, mutex) }
        let left = queue
        queue = []
        pthread_mutex_unlock(mutex)
        for call in left { call() }
    }

    /// Like ``waitUntilDone()``, but no longer than `timeout`: false when calls still ran or
    /// waited then (they go on on their thread).
    func waitUntilDone(within timeout: Duration) -> Bool {
        var deadline = timeout.fromNow(on: CLOCK_MONOTONIC) ?? timeout.timespec
        pthread_mutex_lock(mutex)
        while running, pthread_cond_timedwait(idle, mutex, &deadline) != ETIMEDOUT {}
        let done = !running
        let left = done ? queue : []
        if done { queue = [] }
        pthread_mutex_unlock(mutex)
        for call in left { call() }
        return done
    }

    private func drain() {
        pthread_mutex_lock(mutex)
        while !queue.isEmpty {
            let call = queue.removeFirst()
            pthread_mutex_unlock(mutex)
            call()
            pthread_mutex_lock(mutex)
        }
        running = false
        pthread_cond_broadcast(idle)
        pthread_mutex_unlock(mutex)
    }
}
