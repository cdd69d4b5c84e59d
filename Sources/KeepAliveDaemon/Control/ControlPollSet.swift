import Glibc

/// The control socket thread's `poll` set, as the main loop's ``PollSet`` is its own: the
/// thread's three sources addressed by name, then one descriptor per client, in the order of the
/// server's clients. A source without a descriptor (-1) is skipped by `poll` and never ready.
///
/// ```swift
/// var set = ControlPollSet()
/// set.watch(.listener, 3)        // the listening socket
/// set.watchClients([7, 9])       // each client's socket, or what its reply waits for
/// if try set.wait(timeout: -1), set.isClientReady(1) { /* the second client's request */ }
/// ```
struct ControlPollSet {
    /// What every turn polls, before the clients.
    enum Source: Int, CaseIterable, Sendable {
        /// The stop pipe: the daemon stops.
        case stop
        /// The listening socket: a client connects. -1 while accept rests (``AcceptBackoff``).
        case listener
        /// Event lines for the `events` subscribers (``EventLines``).
        case events
    }

    private(set) var descriptors = [pollfd](repeating: pollfd(fd: -1, events: 0, revents: 0), count: Source.allCases.count)

    /// Polls `source` on `descriptor` from the next wait on; -1 stops polling it.
    mutating func watch(_ source: Source, _ descriptor: Int32) {
        descriptors[source.rawValue] = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
    }

    /// Polls one descriptor per client from the next wait on, in the clients' order, in place of
    /// the last turn's (the array's room kept: a turn allocates nothing).
    mutating func watchClients(_ clients: some Sequence<Int32>) {
        descriptors.removeSubrange(Source.allCases.count...)
        for fd in clients { descriptors.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
    }

    /// How many clients are polled.
    var clientCount: Int { descriptors.count - Source.allCases.count }

    /// Whether the last wait found `source` ready.
    func isReady(_ source: Source) -> Bool { descriptors[source.rawValue].revents != 0 }

    /// Whether the last wait found the client at `index` (in ``watchClients(_:)``'s order) ready.
    func isClientReady(_ index: Int) -> Bool { descriptors[Source.allCases.count + index].revents != 0 }

    /// Waits until a descriptor is ready or `timeout` ms pass (-1: no limit); false when a signal
    /// interrupted the wait, with nothing ready.
    /// - Throws: `Errno` when `poll` itself fails.
    mutating func wait(timeout: Int32) throws(Errno) -> Bool {
        try descriptors.waitForEvents(timeout: timeout)
    }
}
