import Glibc
import Testing
@testable import KeepAlive

@Suite("ThreadOwner: the thread a piece of state belongs to")
struct ThreadOwnerTests {
    @Test("a claim binds the calling thread; checks from it pass; a claim from another thread moves it there")
    func bindsAndMoves() throws {
        let owner = ThreadOwner("a test loop")
        #expect(!owner.isOwnedByCurrentThread, "owned before any claim")
        owner.claim()
        owner.preconditionOwned("first")
        owner.assertOwned("again")
        // Another thread claims it (a loop restarted on a new thread) and checks there.
        let other = try startThread(named: "owner-test") {
            #expect(!owner.isOwnedByCurrentThread)
            owner.claim()
            owner.preconditionOwned("on the new thread")
        }
        other.join()
        #expect(!owner.isOwnedByCurrentThread, "still owned by the thread that gave it up")
        #expect(owner.name == "a test loop")
    }

    @Test("a check off the owner's thread stops the process, in every build")
    func checkOffTheOwnerStops() async {
        await #expect(processExitsWith: .failure) {
            let owner = ThreadOwner("a test loop")
            let other = try startThread(named: "owner-test") { owner.claim() }
            other.join()
            owner.preconditionOwned("off the owner")
        }
    }

    @Test("a check before any claim stops the process: owners are claimed explicitly")
    func checkBeforeClaimStops() async {
        await #expect(processExitsWith: .failure) {
            ThreadOwner("a test loop").preconditionOwned("unclaimed")
        }
    }
}
