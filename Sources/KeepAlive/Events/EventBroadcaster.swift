
/// Fans events out to every subscriber, each through its own bounded buffer: the manager's
/// ``KeepAliveEvent``s, an ``OutputActivityTracker``'s changes.
///
/// Policy (documented for users on ``KeepAliveManager/events`` and in the catalog's "Observing
/// events" article):
/// - Every subscriber receives every event published after it subscribed, in publishing order
///   (events of one output come from one thread, so they are never reordered).
/// - Each subscriber has its own buffer of at most ``capacity`` undelivered events. When a
///   subscriber that does not keep up has ``capacity`` events waiting, the oldest one is dropped
///   to make room for the new one (`bufferingNewest`). Memory per subscriber is therefore bounded,
///   and the newest events, the ones that tell the current state, are the ones kept.
/// - Publishing never waits for a subscriber: it takes one short lock, copies the list, and
///   yields to each stream without blocking. A slow or idle subscriber never delays a playback
///   thread and never makes the others miss anything.
/// - A subscription ends when its consuming task is cancelled or its stream and iterators are
///   dropped; all streams finish when the broadcaster (its manager) is deallocated.
final class EventBroadcaster<Event: Sendable>: Sendable {
    /// The most undelivered events one subscriber may hold.
    static var capacity: Int { 256 }

    /// What publishing observed of one subscriber's buffer (a test hook; kept because it costs
    /// one lock per event, and events are rare: state changes, not frames).
    struct BufferStatistics: Sendable, Equatable {
        /// Events waiting in the buffer after the latest publish.
        var buffered = 0
        /// The most events that were ever waiting at once; never above ``EventBroadcaster/capacity``.
        var highWater = 0
        /// Events dropped because the buffer was full.
        var dropped = 0
        /// Events delivered or buffered.
        var published = 0
    }

    private struct Subscriber {
        var continuation: AsyncStream<Event>.Continuation
        var statistics = BufferStatistics()
    }

    private struct Subscribers {
        var nextID = 0
        var table: [Int: Subscriber] = [:]
        /// Plain callbacks, for an owner that waits in poll rather than in a task.
        var observers: [@Sendable (Event) -> Void] = []
    }

    /// The table lives in a box of its own so that a stream's termination handler can hold it
    /// strongly: a `[weak self]` there gave the broadcaster a weak-reference side table, which
    /// LeakSanitizer reported as leaked whenever a subscription ended before the broadcaster did.
    /// The handler keeps only the box (never the broadcaster) alive, and `deinit` finishes every
    /// stream, which runs and releases every handler.
    private final class Table: Sendable {
        let subscribers = Locked(Subscribers(), order: .eventSubscribers)
    }

    private let table = Table()

    init() {}

    deinit {
        // A consumer awaiting the next event would otherwise wait forever.
        let continuations = table.subscribers.withLock { state in
            defer { state.table.removeAll() }
            return state.table.values.map(\.continuation)
        }
        for continuation in continuations { continuation.finish() }
    }

    /// A new stream of every event published from now on.
    func subscribe() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: Event.self, bufferingPolicy: .bufferingNewest(Self.capacity))
        let id = table.subscribers.withLock { state in
            defer { state.nextID += 1 }
            state.table[state.nextID] = Subscriber(continuation: continuation)
            return state.nextID
        }
        // Runs when the consumer's task is cancelled, when the stream and all its iterators are
        // dropped, or on finish; never while this broadcaster holds its lock.
        continuation.onTermination = { [table] _ in
            _ = table.subscribers.withLock { $0.table.removeValue(forKey: id) }
        }
        return stream
    }

    /// Calls `observer` with every event from now on, on the thread that publishes it (a
    /// playback thread): it must not block. For a daemon that waits in `poll` and has no task to
    /// read a stream in.
    func observe(_ observer: @escaping @Sendable (Event) -> Void) {
        table.subscribers.withLock { $0.observers.append(observer) }
    }

    /// Delivers `event` to every subscriber without waiting for any of them.
    func publish(_ event: Event) {
        let observers = table.subscribers.withLock { $0.observers }
        for observer in observers { observer(event) }
        // Yield outside the lock: the lock stays short, and a termination handler (which takes
        // it) can never run under it.
        let targets = table.subscribers.withLock { state in state.table.map { ($0.key, $0.value.continuation) } }
        guard !targets.isEmpty else { return }
        var results: [(Int, AsyncStream<Event>.Continuation.YieldResult)] = []
        results.reserveCapacity(targets.count)
        for (id, continuation) in targets { results.append((id, continuation.yield(event))) }
        table.subscribers.withLock { state in
            for (id, result) in results {
                guard var statistics = state.table[id]?.statistics else { continue }
                switch result {
                case .enqueued(let remaining):
                    statistics.buffered = Self.capacity - remaining
                    statistics.published += 1
                case .dropped:
                    statistics.buffered = Self.capacity
                    statistics.dropped += 1
                    statistics.published += 1
                case .terminated:
                    statistics.buffered = 0
                @unknown default:
                    break
                }
                statistics.highWater = max(statistics.highWater, statistics.buffered)
                state.table[id]?.statistics = statistics
            }
        }
    }

    /// How many streams are subscribed.
    var subscriberCount: Int { table.subscribers.withLock { $0.table.count } }

    /// The buffer statistics of every live subscriber, oldest subscription first (test hook).
    var statistics: [BufferStatistics] {
        table.subscribers.withLock { state in state.table.sorted { $0.key < $1.key }.map(\.value.statistics) }
    }
}
