import Logging
import ServiceLifecycle

/// The keep-alive as a swift-service-lifecycle `Service`: it plays while the service group runs
/// and stops within 100 ms of graceful shutdown or cancellation.
///
/// Transient device faults never end ``run()``: the outputs ride them out and recover.
///
/// ```swift
/// let keepAlive = try KeepAliveService(configuration: KeepAliveConfiguration(devices: ["default"]), logger: logger)
/// let group = ServiceGroup(services: [keepAlive, myAnnouncer], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
public struct KeepAliveService: Service, Sendable {
    /// The manager the service starts and stops; read its ``KeepAliveManager/state`` and
    /// ``KeepAliveManager/events`` while the service runs.
    public let manager: KeepAliveManager

    /// A service around a new manager.
    /// - Throws: ``KeepAliveConfigurationError`` when the configuration breaks a rule.
    public init(configuration: KeepAliveConfiguration, logger: Logger = Logger(label: "KeepAlive")) throws(KeepAliveConfigurationError) {
        self.manager = try KeepAliveManager(configuration: configuration, logger: logger)
    }

    /// A service around an existing manager.
    public init(manager: KeepAliveManager) {
        self.manager = manager
    }

    public func run() async throws {
        manager.start()
        // Returns on graceful shutdown, throws CancellationError on cancellation: stop either way.
        try? await gracefulShutdown()
        manager.stop()
    }
}
