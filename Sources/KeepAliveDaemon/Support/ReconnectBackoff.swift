/// When to try a D-Bus connection again after it was lost (its daemon restarted or crashed): 1 s
/// after the loss, then after waits doubling up to a minute, so a bus that keeps going away is
/// not hammered; a connection that lasted a minute starts the waits afresh. Times are
/// CLOCK_MONOTONIC readings (`monotonicNow()`).
///
/// ```swift
/// let now = monotonicNow()
/// var backoff = ReconnectBackoff(connectedAt: now)
/// backoff.lost(at: now)                      // the bus went away
/// let later = monotonicNow()
/// if backoff.isDue(at: later) {
///     if let bus = Bus.system.open(toFollow: "logind", logger: logger) { backoff.connected(at: later) } else { backoff.failed(at: later) }
/// }
/// ```
struct ReconnectBackoff: Equatable {
    static let first: Duration = .seconds(1)
    static let longest: Duration = .seconds(60)

    /// When to try next; `nil` while connected.
    private(set) var due: Duration?
    private var delay = ReconnectBackoff.first
    private var connectedAt: Duration

    init(connectedAt: Duration) {
        self.connectedAt = connectedAt
    }

    /// The connection went away at `now`.
    mutating func lost(at now: Duration) {
        if now - connectedAt >= Self.longest { delay = Self.first }
        schedule(after: now)
    }

    /// A try at `now` found no bus.
    mutating func failed(at now: Duration) {
        schedule(after: now)
    }

    /// A try at `now` connected.
    mutating func connected(at now: Duration) {
        due = nil
        connectedAt = now
    }

    func isDue(at now: Duration) -> Bool {
        due.map { now >= $0 } ?? false
    }

    private mutating func schedule(after now: Duration) {
        due = now + delay
        delay = min(delay * 2, Self.longest)
    }
}
