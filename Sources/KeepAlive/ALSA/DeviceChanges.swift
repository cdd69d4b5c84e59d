/// What the ``DeviceWatcher`` saw appear since it was last asked: the observations the
/// ``RecoveryStateMachine`` decides on, a value of its own so that the decisions can be tested
/// without the watcher's inotify descriptor.
package struct DeviceChanges: OptionSet, Sendable {
    package let rawValue: UInt8

    package init(rawValue: UInt8) { self.rawValue = rawValue }

    /// A sound card's device node (or events were lost: anything may have happened).
    package static let card = DeviceChanges(rawValue: 1)
    /// A sound server's socket: a server (re)started.
    package static let server = DeviceChanges(rawValue: 2)
}
