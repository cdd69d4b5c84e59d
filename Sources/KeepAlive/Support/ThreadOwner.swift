import Glibc
import Synchronization

/// The one thread a piece of state belongs to, claimed by that thread before it touches the
/// state and checked where the state is used, as swift-nio's `preconditionInEventLoop` checks an
/// event loop's: a call from any other thread, or before any thread claimed it, stops the
/// process with the owner's name.
///
/// ``preconditionOwned(_:file:line:)`` checks in every build: one atomic load and a compare,
/// nothing beside a handler's work (a request, a poll's wakeup, a timer). ``assertOwned(_:file:line:)``
/// checks in debug and test builds only, for a path that runs per period of audio.
///
/// ```swift
/// let mainLoop = ThreadOwner("the daemon's main loop")
/// mainLoop.claim()                                   // in run(), before the first turn
/// mainLoop.preconditionOwned("DaemonRuntime.handle") // in each handler: another thread is a bug
/// ```
package final class ThreadOwner: Sendable {
    /// What owns the state, for the failure's message.
    package let name: String
    /// The owner's `pthread_t` (an integer on Linux); 0 until claimed.
    private let owner = Atomic<UInt>(0)

    package init(_ name: String) {
        self.name = name
    }

    /// An owner already claimed by the calling thread (a test's, a loop made on its own thread).
    package static func claimed(_ name: String) -> ThreadOwner {
        let owner = ThreadOwner(name)
        owner.claim()
        return owner
    }

    /// Binds the calling thread as the owner (again, when a new thread takes over: a restarted
    /// loop). Release ordering: what the claiming thread set up before is visible to a later
    /// check's acquire.
    package func claim() {
        owner.store(UInt(pthread_self()), ordering: .releasing)
    }

    /// Whether the calling thread is the owner.
    package var isOwnedByCurrentThread: Bool {
        let bound = owner.load(ordering: .acquiring)
        return bound != 0 && pthread_equal(pthread_t(bound), pthread_self()) != 0
    }

    /// Stops the process, in every build, when called off the owner's thread or before a claim.
    package func preconditionOwned(_ what: @autoclosure () -> String = "", file: StaticString = #fileID, line: UInt = #line) {
        precondition(isOwnedByCurrentThread, "\(what()) called off \(name)'s thread (or before it claimed it)", file: file, line: line)
    }

    /// Stops a debug or test build when called off the owner's thread or before a claim; release
    /// builds check nothing.
    package func assertOwned(_ what: @autoclosure () -> String = "", file: StaticString = #fileID, line: UInt = #line) {
        assert(isOwnedByCurrentThread, "\(what()) called off \(name)'s thread (or before it claimed it)", file: file, line: line)
    }
}
