/// What ``KeepAliveManager/reconfigure(_:)`` changed.
///
/// ```swift
/// let outcome = try manager.reconfigure(newConfiguration)
/// if outcome.isUnchanged { print("nothing to do") }
/// print(outcome.added, outcome.removed, outcome.updatedInPlace)
/// ```
public struct Reconfiguration: Sendable, Equatable, CustomStringConvertible {
    /// Outputs that were opened because the new configuration names them.
    public var added: [String] = []
    /// Outputs that were closed because the new configuration no longer names them.
    public var removed: [String] = []
    /// Outputs that kept playing with a new clip or level, without a gap.
    public var updatedInPlace: [String] = []

    /// Nothing changed.
    public static let unchanged = Reconfiguration()

    public var isUnchanged: Bool { self == .unchanged }

    public var description: String {
        if isUnchanged { return "unchanged" }
        var parts: [String] = []
        if !added.isEmpty { parts.append("added \(added.joined(separator: ","))") }
        if !removed.isEmpty { parts.append("removed \(removed.joined(separator: ","))") }
        if !updatedInPlace.isEmpty { parts.append("updated in place \(updatedInPlace.joined(separator: ","))") }
        return parts.isEmpty ? "settings updated" : parts.joined(separator: "; ")
    }
}
