import Glibc

/// The main loop's `poll` set: one `pollfd` per ``Wakeup``, addressed by name. A source without
/// a descriptor (-1) is skipped by `poll` and never ready.
///
/// ```swift
/// var set = PollSet()
/// set.watch(.signals, signals.descriptor)
/// if try set.wait(timeout: -1), set.isReady(.signals) { /* read the signals */ }
/// ```
struct PollSet {
    private(set) var descriptors = [pollfd](repeating: pollfd(fd: -1, events: 0, revents: 0), count: Wakeup.allCases.count)

    /// Polls `source` on `descriptor` for `events` from the next wait on; -1 stops polling it.
    mutating func watch(_ source: Wakeup, _ descriptor: Int32, events: Int16 = Int16(POLLIN)) {
        descriptors[source.rawValue].fd = descriptor
        descriptors[source.rawValue].events = events
    }

    /// The descriptor polled for `source`, -1 for none.
    func descriptor(of source: Wakeup) -> Int32 { descriptors[source.rawValue].fd }

    /// Whether the last wait found `source` ready (readable, writable, or in error).
    func isReady(_ source: Wakeup) -> Bool { descriptors[source.rawValue].revents != 0 }

    /// The sources the last wait found ready, in the order a turn handles them.
    var ready: [Wakeup] { Wakeup.allCases.filter(isReady) }

    /// Waits until a source is ready or `timeout` ms pass (-1: no limit); false when a signal
    /// interrupted the wait, with nothing ready.
    /// - Throws: `Errno` when `poll` itself fails.
    mutating func wait(timeout: Int32) throws(Errno) -> Bool {
        try descriptors.waitForEvents(timeout: timeout)
    }
}
