import Glibc

/// When the control socket's listener is polled again after `accept` failed with a client
/// waiting: the listener stays readable, so polling it at once would spin the server thread for
/// as long as the failure lasts (out of descriptors, EMFILE or ENFILE, or of memory, ENOBUFS or
/// ENOMEM). It is left out of the poll for 100 ms, then for waits doubling up to 1 s, or until a
/// client's connection closes (a descriptor came free). An episode is reported twice: a warning
/// at its first failure, and an info once `accept` has taken every client that was waiting
/// (it found none left); a connection taken in between, with others still refused, ends nothing.
/// With no descriptor free, `accept` fails before it looks for a client, so during an episode it
/// is tried at the end of each rest whether the listener polls readable or not
/// (``retries(at:)``): only that try can find the episode over.
///
/// ```swift
/// var backoff = AcceptBackoff()
/// switch backoff.failed(errno, at: now) {          // after accept returned -1
/// case .exhausted: logger.warning("cannot accept")
/// case .recovered: logger.info("accepting again")
/// case nil: break
/// }
/// if backoff.listens(at: later) { /* poll the listener */ }
/// ```
struct AcceptBackoff: Equatable {
    static let first: Duration = .milliseconds(100)
    static let longest: Duration = .seconds(1)

    /// What a failure says to report.
    enum Report: Equatable {
        /// The first failure of an episode.
        case exhausted
        /// Nobody is left waiting after an episode: every client that came was taken.
        case recovered
    }

    /// Until when the listener is left out of the poll; nil while it is polled.
    private(set) var pausedUntil: ContinuousClock.Instant?
    /// Whether an episode is on: `accept` failed and has not drained the listener since.
    private(set) var failing = false
    private var delay = AcceptBackoff.first

    /// `accept` failed at `now` with error `code`: EAGAIN is the listener drained, which ends an
    /// episode; EINTR and ECONNABORTED (a client gone before it was taken) are for the next turn;
    /// anything else rests the listener.
    mutating func failed(_ code: Int32, at now: ContinuousClock.Instant) -> Report? {
        switch code {
        case EAGAIN, EWOULDBLOCK:
            guard failing else { return nil }
            self = AcceptBackoff()
            return .recovered
        case EINTR, ECONNABORTED:
            return nil
        default:
            let first = !failing
            failing = true
            pausedUntil = now + delay
            delay = min(delay * 2, Self.longest)
            return first ? .exhausted : nil
        }
    }

    /// A client's connection closed: its descriptor is free, so the listener is tried again at
    /// once (the waits go on doubling if it still fails).
    mutating func descriptorFreed() {
        pausedUntil = nil
    }

    /// Whether to poll the listener at `now`.
    func listens(at now: ContinuousClock.Instant) -> Bool {
        pausedUntil.map { now >= $0 } ?? true
    }

    /// Whether to call `accept` at `now` though the listener did not poll readable: during an
    /// episode, once its rest is over.
    func retries(at now: ContinuousClock.Instant) -> Bool {
        failing && listens(at: now)
    }

    /// How long until the listener is polled again, nil while it is polled.
    func rest(at now: ContinuousClock.Instant) -> Duration? {
        guard let pausedUntil, now < pausedUntil else { return nil }
        return now.duration(to: pausedUntil)
    }
}
