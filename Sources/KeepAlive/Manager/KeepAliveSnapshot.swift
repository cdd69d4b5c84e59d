/// The manager's state, outputs and configuration, all read at one instant.
///
/// Read the three through one ``KeepAliveManager/snapshot`` when they must agree: between two
/// separate reads an output may vanish (a selection dropped it) or the configuration change.
///
/// ```swift
/// let snapshot = manager.snapshot
/// if snapshot.outputs.isEmpty {
///     print("\(snapshot.state): no output yet")
/// }
/// ```
public struct KeepAliveSnapshot: Sendable, Equatable {
    /// Whether the manager was started and not stopped since.
    public var isRunning: Bool
    /// The configuration in force.
    public var configuration: KeepAliveConfiguration
    /// One status per configured output, in configuration order; empty while the configuration
    /// names none.
    public var outputs: [OutputStatus]

    /// The overall state: ``KeepAliveState/playing`` when every output plays, otherwise the state
    /// of the first output that does not; ``KeepAliveState/waitingForDevice(_:)`` while it runs
    /// with no output.
    public var state: KeepAliveState {
        guard isRunning else { return .stopped }
        guard !outputs.isEmpty else { return .waitingForDevice(.noDevice) }
        if outputs.contains(where: { $0.state == .starting }) { return .starting }
        return outputs.first(where: { $0.state != .playing })?.state ?? .playing
    }
}
