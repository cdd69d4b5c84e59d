import Glibc
import Testing
@testable import KeepAlive

@Suite("ThreadOwner: the thread a piece of state belongs to")
struct ThreadOwnerTests {
    @Test("the first check binds the calling thread; checks from it pass; a claim from another thread moves it there")
    func bindsAndMoves() throws {
        let owner = ThreadOwner("a test loop")
        owner.check("first")
        owner.check("again")
        // Another thread claims it (a loop restarted on a new thread) and checks there.
        let other = try startThread(named: "owner-test") {
            owner.claim()
            owner.check("on the new thread")
        }
        other.join()
        #expect(owner.name == "a test loop")
    }
}
