import KeepAlive

/// Lets the control socket's `stop` request end the main loop the same way SIGTERM does.
final class StopRequest: Sendable {
    private let runtime = Locked<DaemonRuntime?>(nil)

    func arm(_ runtime: DaemonRuntime) { self.runtime.withLock { $0 = runtime } }

    func disarm() { runtime.withLock { $0 = nil } }

    func trigger() { runtime.withLock { $0 }?.requestStop() }
}
