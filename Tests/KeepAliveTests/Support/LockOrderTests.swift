import Testing
@testable import KeepAlive

@Suite("LockOrder: the one order locks nest in, checked by every Locked in debug builds")
struct LockOrderTests {
    @Test("the order written: each nesting the design needs comes before what it takes, leaves last")
    func orderWritten() {
        #expect(LockOrder.all == LockOrder.all.sorted(), "LockOrder.all lists the locks outermost first")
        #expect(Set(LockOrder.all.map(\.rank)).count == LockOrder.all.count, "two locks of one rank")
        #expect(LockOrder.playerLoans < .boxActivity && LockOrder.boxActivity < .activityTracker)
        #expect(LockOrder.managerLifecycle < .manager && LockOrder.manager < .outputRecord && LockOrder.outputRecord < .eventSubscribers)
        #expect(LockOrder.serverWatchers < .soundServerRegistry)
        #expect(LockOrder.all.last == .leaf, "a leaf comes after every lock that nests")
    }

    @Test("locks taken in the order pass, and a thread's ownership may be checked under any of them")
    func inOrder() {
        let loans = Locked(0, order: .playerLoans)
        let activity = Locked(0, order: .boxActivity)
        let leaf = Locked(0)
        let owner = ThreadOwner.claimed("the test's thread")
        let taken = loans.withLock { loans in
            activity.withLock { activity in
                leaf.withLock { leaf in
                    owner.preconditionOwned("under three locks")
                    loans += 1; activity += 1; leaf += 1
                    return loans + activity + leaf
                }
            }
        }
        #expect(taken == 3)
        // Let go of, they may be taken in any order again.
        leaf.withLock { _ in }
        loans.withLock { _ in }
    }

    #if DEBUG
    @Test("a lock taken out of the order stops a debug build")
    func outOfOrderStops() async {
        await #expect(processExitsWith: .failure) {
            let loans = Locked(0, order: .playerLoans)
            let activity = Locked(0, order: .boxActivity)
            activity.withLock { _ in loans.withLock { _ in } }
        }
    }

    @Test("a leaf lock taken under another leaf stops a debug build: a nesting not written in LockOrder")
    func leafUnderLeafStops() async {
        await #expect(processExitsWith: .failure) {
            let first = Locked(0)
            let second = Locked(0)
            first.withLock { _ in second.withLock { _ in } }
        }
    }
    #endif
}
