import Synchronization

/// Fans events out to every subscriber, each through its own bounded buffer.
///
/// Policy: a subscriber that does not keep up loses its oldest undelivered events once it has
/// ``capacity`` waiting; it never slows the publisher (a playback thread) and never makes the
/// others miss anything.
final class EventBroadcaster: Sendable {
    static let capacity = 256

    private struct Subscribers {
        var nextID = 0
        var continuations: [Int: AsyncStream<KeepAliveEvent>.Continuation] = [:]
    }

    private let subscribers = Mutex(Subscribers())

    func subscribe() -> AsyncStream<KeepAliveEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: KeepAliveEvent.self, bufferingPolicy: .bufferingNewest(Self.capacity))
        let id = subscribers.withLock { state in
            defer { state.nextID += 1 }
            state.continuations[state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ event: KeepAliveEvent) {
        // Yield outside the lock: a termination handler runs synchronously and takes it.
        let targets = subscribers.withLock { Array($0.continuations.values) }
        for continuation in targets { continuation.yield(event) }
    }

    var subscriberCount: Int { subscribers.withLock { $0.continuations.count } }
}
