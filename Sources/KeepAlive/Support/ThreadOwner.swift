import Glibc

/// The one thread a piece of state belongs to, checked where the state is used, as swift-nio's
/// `preconditionInEventLoop` checks an event loop's: the first ``check(_:)`` (or ``claim()``)
/// binds the thread, and every later one from another thread stops a debug or test build with
/// the owner's name. Release builds check nothing (`assert`): the claim costs nothing there.
///
/// ```swift
/// let mainLoop = ThreadOwner("the daemon's main loop")
/// mainLoop.claim()          // in run(), before the first turn
/// mainLoop.check()          // in each handler: a call from another thread is a bug
/// ```
package final class ThreadOwner: Sendable {
    /// What owns the state, for the failure's message.
    package let name: String
    private let owner = Locked<pthread_t?>(nil)

    package init(_ name: String) {
        self.name = name
    }

    /// Binds the calling thread as the owner (again, when a new thread takes over: a restarted
    /// loop).
    package func claim() {
        assert({ owner.withLock { $0 = pthread_self() }; return true }())
    }

    /// Stops a debug build when called off the owner's thread; the first call binds it.
    package func check(_ what: @autoclosure () -> String = "", file: StaticString = #fileID, line: UInt = #line) {
        assert({
            let me = pthread_self()
            let bound = owner.withLock { owner -> pthread_t in
                if owner == nil { owner = me }
                return owner!
            }
            return pthread_equal(bound, me) != 0
        }(), "\(what()) called off \(name)'s thread", file: file, line: line)
    }
}
