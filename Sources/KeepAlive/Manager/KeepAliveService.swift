import Glibc
import Logging
import ServiceLifecycle

/// The keep-alive as a swift-service-lifecycle `Service`: it plays while its service group runs
/// and stops within 100 ms of graceful shutdown or cancellation.
///
/// ``run()`` starts the ``manager``, waits for graceful shutdown or task cancellation, then stops
/// the manager (every stream is dropped, never drained) and returns. It does not throw:
/// configuration errors are thrown earlier, by the initializer, and device faults — a missing,
/// busy, unplugged or suspended device, a sound server that went away — never end it: the outputs
/// ride them out and recover on their own. Watch ``KeepAliveManager/state`` and
/// ``KeepAliveManager/events`` to see them.
///
/// ```swift
/// let logger = Logger(label: "announcer")
/// let keepAlive = try KeepAliveService(configuration: KeepAliveConfiguration(devices: ["default"]), logger: logger)
/// let group = ServiceGroup(services: [keepAlive, announcer], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
///
/// The service owns the playback for as long as it runs:
/// - If the manager is already running when ``run()`` begins (you called
///   ``KeepAliveManager/start()`` yourself), the service adopts it: it does not start a second
///   one, and it stops it when the service returns.
/// - If the manager's gate (``KeepAliveManager/isOn``) is off, nothing plays; the service logs
///   that once and idles until shutdown. Turning the gate on later and calling
///   ``KeepAliveManager/start()`` plays, and the service still stops it at shutdown.
/// - Stopping joins the playback threads. That normally takes well under a millisecond, but a
///   plug-in device (PulseAudio, PipeWire) may block while it disconnects, so the service stops the
///   manager on a thread of its own and only suspends on it: it never blocks a thread of Swift's
///   cooperative pool, which the other services of the group share.
public struct KeepAliveService: Service, Sendable {
    /// The manager the service starts and stops; read its ``KeepAliveManager/state`` and
    /// ``KeepAliveManager/events`` while the service runs.
    public let manager: KeepAliveManager
    private let logger: Logger

    /// A service around a new manager.
    ///
    /// ```swift
    /// var configuration = KeepAliveConfiguration(devices: ["hdmi:CARD=PCH,DEV=0"])
    /// configuration.defaults.volume = try Level(parsing: "-40dB")
    /// let keepAlive = try KeepAliveService(configuration: configuration, logger: logger)
    /// ```
    ///
    /// - Parameters:
    ///   - configuration: what to play where; validated here.
    ///   - isOn: the manager's initial gate (``KeepAliveManager/isOn``).
    ///   - logger: receives the manager's and the service's log lines.
    /// - Throws: ``KeepAliveConfigurationError`` when the configuration breaks a rule, or names no
    ///   device: a service never adds outputs on its own, so without devices it would run and
    ///   keep nothing awake.
    public init(
        configuration: KeepAliveConfiguration, isOn: Bool = true, logger: Logger
    ) throws(KeepAliveConfigurationError) {
        guard !configuration.devices.isEmpty else { throw .noDevices }
        self.manager = try KeepAliveManager(configuration: configuration, isOn: isOn, logger: logger)
        self.logger = logger
    }

    /// A service around an existing manager, for callers that also drive or observe it directly.
    /// The service logs through the manager's logger.
    ///
    /// ```swift
    /// let manager = try KeepAliveManager(configuration: KeepAliveConfiguration(), logger: logger)
    /// let keepAlive = KeepAliveService(manager: manager)
    /// ```
    ///
    /// - Parameter manager: the manager to start when the service runs and stop when it returns.
    public init(manager: KeepAliveManager) {
        self.manager = manager
        self.logger = manager.logger
    }

    /// Plays until graceful shutdown or cancellation, then stops and returns.
    ///
    /// Returns normally in both cases, once every stream is dropped and every playback thread has
    /// ended (within 100 ms of the request). Returns at once, without playing, if the task is
    /// already cancelled or shutting down when it begins.
    ///
    /// - Throws: Nothing in practice; it is `throws` because `Service` requires it. Configuration
    ///   errors are thrown by the initializers, and device faults are ridden out, never thrown.
    public func run() async throws {
        if !Task.isCancelled, !Task.isShuttingDownGracefully {
            // Starting waits for the manager's lifecycle lock, which a concurrent stop() or
            // reconfigure(_:) holds while it joins playback threads.
            let started = await onDedicatedThread(named: "keepalive-start") { [manager] in
                manager.start()
                return manager.isRunning
            }
            if !started {
                logger.notice("keep-alive is switched off (isOn is false); not playing until shutdown")
            }
            // Returns on graceful shutdown, throws CancellationError on cancellation: both mean stop.
            try? await gracefulShutdown()
        }
        await onDedicatedThread(named: "keepalive-stop") { [manager] in manager.stop() }
    }

    /// Runs `body`, which may block, on a thread of its own and suspends until it returns: a
    /// blocked thread of Swift's cooperative pool would stall the other services of the group.
    /// Runs it inline, as the lesser evil, when no thread can be created.
    private func onDedicatedThread<Result: Sendable>(named name: String, _ body: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result, Never>) in
            do {
                try startDetachedThread(named: name) { continuation.resume(returning: body()) }
            } catch {
                logger.warning("running on the caller's thread", metadata: ["error": "\(error)"])
                continuation.resume(returning: body())
            }
        }
    }
}
