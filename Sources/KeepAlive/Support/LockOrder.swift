import Glibc

/// The one order in which the process's locks nest, outermost first: a thread that holds a
/// ``Locked`` takes only locks that come later here. Written in this one place, and asserted by
/// every ``Locked`` in debug and test builds (a lock taken out of order stops the build, naming
/// both); release builds keep no record and pay nothing.
///
/// Most locks are ``leaf``s (the default): nothing else is taken while one is held. The
/// nestings the design needs:
/// - a player's loan (``playerLoans``) tells the box's activity (``boxActivity``), which
///   feeds its tracker (``activityTracker``);
/// - the manager's lifecycle (``managerLifecycle``) decides (``manager``) and updates an
///   output's record (``outputRecord``), and both publish events to their subscribers
///   (``eventSubscribers``);
/// - a sound server watcher joins or leaves (``serverWatchers``) while the process's connection
///   is acquired or released (``soundServerRegistry``).
///
/// libpulse's main-loop lock (``SoundServerConnection``, recursive, not a ``Locked``) sits after
/// ``soundServerRegistry`` and before the leaves: a watcher joining or leaving takes it under
/// ``serverWatchers``, and what the loop's callbacks take is a leaf (the manager's pauses go
/// through `SerialCalls`, off the loop's thread).
///
/// ```swift
/// let loans = Locked([HardwareDevice: Int](), order: .playerLoans)
/// let activity = Locked([String: String](), order: .boxActivity)
/// loans.withLock { _ in activity.withLock { _ in } }   // in order
/// // activity.withLock { _ in loans.withLock { _ in } } would stop a debug build
/// ```
package struct LockOrder: Sendable, Comparable, CustomStringConvertible {
    /// Its place: a thread holding a lock of one rank takes only locks of a higher rank.
    package let rank: Int
    package let description: String

    private init(_ rank: Int, _ description: String) {
        self.rank = rank
        self.description = description
    }

    package static let playerLoans = LockOrder(10, "the player loans")
    package static let boxActivity = LockOrder(20, "the box's activity")
    package static let activityTracker = LockOrder(30, "the activity tracker")
    /// The manager's lifecycle: held across a start, stop or reconfiguration (it starts and
    /// joins playback threads), so that those run one at a time.
    package static let managerLifecycle = LockOrder(35, "the manager's lifecycle")
    package static let manager = LockOrder(40, "the manager")
    package static let outputRecord = LockOrder(50, "an output's record")
    package static let eventSubscribers = LockOrder(60, "the event subscribers")
    /// The daemon's watchers of the sound server joining or leaving (``ServerWatchers``): held
    /// while the process's connection is acquired or released and while a joining watcher
    /// hears the server's state.
    package static let serverWatchers = LockOrder(70, "the sound server watchers' membership")
    /// The process's one connection to the sound server, made or let go of
    /// (``SoundServerConnection``'s registry).
    package static let soundServerRegistry = LockOrder(80, "the sound server connection's registry")
    /// Takes no other lock while held: the default.
    package static let leaf = LockOrder(1000, "a leaf lock")

    static let all: [LockOrder] = [
        .playerLoans, .boxActivity, .activityTracker, .managerLifecycle, .manager, .outputRecord, .eventSubscribers,
        .serverWatchers, .soundServerRegistry, .leaf,
    ]

    package static func < (lhs: LockOrder, rhs: LockOrder) -> Bool { lhs.rank < rhs.rank }

    #if DEBUG
    /// One lock the calling thread holds: its rank and where it was taken.
    private struct Entry {
        var rank: Int
        var file: StaticString
        var line: UInt
    }

    /// The locks the calling thread holds, innermost last: a per-thread stack, made at the
    /// thread's first lock and freed with the thread.
    private struct Held {
        static let capacity = 16
        var count = 0
        let entries = UnsafeMutablePointer<Entry>.allocate(capacity: capacity)
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { stack in
            guard let stack = stack?.assumingMemoryBound(to: Held.self) else { return }
            stack.pointee.entries.deallocate()
            stack.deinitialize(count: 1)
            stack.deallocate()
        }
        return key
    }()

    private static func held() -> UnsafeMutablePointer<Held> {
        if let stack = pthread_getspecific(key) { return stack.assumingMemoryBound(to: Held.self) }
        let stack = UnsafeMutablePointer<Held>.allocate(capacity: 1)
        stack.initialize(to: Held())
        pthread_setspecific(key, stack)
        return stack
    }

    private static func name(ofRank rank: Int) -> String {
        all.first { $0.rank == rank }?.description ?? "rank \(rank)"
    }

    /// Records that the calling thread takes a lock of this order at `file`:`line`; stops a
    /// debug build when it already holds one that does not come before it.
    func entering(file: StaticString, line: UInt) {
        let stack = Self.held()
        let count = stack.pointee.count
        if count > 0 {
            let innermost = stack.pointee.entries[count - 1]
            assert(innermost.rank < rank,
                   "took \(description) while holding \(Self.name(ofRank: innermost.rank)) (taken at \(innermost.file):\(innermost.line)): out of LockOrder's order",
                   file: file, line: line)
        }
        precondition(count < Held.capacity, "more than \(Held.capacity) locks held at once")
        stack.pointee.entries[count] = Entry(rank: rank, file: file, line: line)
        stack.pointee.count = count + 1
    }

    /// Records that the calling thread let go of its innermost lock.
    func leaving() {
        Self.held().pointee.count -= 1
    }
    #endif
}
