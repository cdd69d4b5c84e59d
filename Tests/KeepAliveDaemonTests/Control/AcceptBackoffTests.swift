import Glibc
import Testing

@testable import KeepAliveDaemon

@Suite("Accept backoff: the control socket's listener rests while accept fails")
struct AcceptBackoffTests {
    let start = ContinuousClock.now

    @Test("accepting: the listener is polled, and its ordinary ends (drained, a client gone) report nothing")
    func accepting() {
        var backoff = AcceptBackoff()
        #expect(backoff.listens(at: start))
        #expect(!backoff.retries(at: start), "accept is called only when a client waits")
        #expect(backoff.rest(at: start) == nil)
        let reports = [EAGAIN, EINTR, ECONNABORTED].map { backoff.failed($0, at: start) }
        #expect(reports == [nil, nil, nil])
        #expect(backoff == AcceptBackoff())
    }

    @Test("out of descriptors: rests of 100 ms doubling to 1 s, the listener left out until each ends; one warning")
    func doubling() throws {
        var backoff = AcceptBackoff()
        var now = start
        var rests: [Duration] = []
        var reports: [AcceptBackoff.Report?] = []
        for code in [EMFILE, EMFILE, ENFILE, ENOBUFS, ENOMEM, EMFILE, EPROTO] {
            reports.append(backoff.failed(code, at: now))
            let rest = try #require(backoff.rest(at: now))
            #expect(!backoff.listens(at: now + rest - .milliseconds(1)))
            #expect(!backoff.retries(at: now + rest - .milliseconds(1)))
            #expect(backoff.listens(at: now + rest))
            // Tried readable or not: with no descriptor free accept fails before it looks for a client.
            #expect(backoff.retries(at: now + rest))
            rests.append(rest)
            now += rest
        }
        #expect(rests == [100, 200, 400, 800, 1000, 1000, 1000].map { Duration.milliseconds($0) })
        #expect(reports == [.exhausted, nil, nil, nil, nil, nil, nil])
    }

    @Test("the episode ends once accept finds nobody left waiting (the info line), and the rests start afresh")
    func recovery() throws {
        var backoff = AcceptBackoff()
        let reports = [
            backoff.failed(EMFILE, at: start),
            backoff.failed(EMFILE, at: start + .milliseconds(100)),
            backoff.failed(EINTR, at: start + .milliseconds(300)),
            backoff.failed(EAGAIN, at: start + .milliseconds(300)),
            backoff.failed(EAGAIN, at: start + .milliseconds(400)),
        ]
        #expect(reports == [.exhausted, nil, nil, .recovered, nil])
        #expect(backoff.listens(at: start + .milliseconds(400)))
        #expect(!backoff.retries(at: start + .milliseconds(400)))
        let again = backoff.failed(EMFILE, at: start + .seconds(5))
        #expect(again == .exhausted, "a new episode is reported again")
        #expect(backoff.rest(at: start + .seconds(5)) == .milliseconds(100))
    }

    @Test("a client that closes frees a descriptor: the listener is polled at once; a refusal right after is the same episode")
    func descriptorFreed() throws {
        var backoff = AcceptBackoff()
        _ = backoff.failed(EMFILE, at: start)
        _ = backoff.failed(EMFILE, at: start + .milliseconds(100))
        backoff.descriptorFreed()
        #expect(backoff.listens(at: start + .milliseconds(101)))
        #expect(backoff.rest(at: start + .milliseconds(101)) == nil)
        // One client taken into the freed descriptor, the next refused again: nothing to report.
        let reported = backoff.failed(EMFILE, at: start + .milliseconds(101))
        #expect(reported == nil, "still the same episode")
        #expect(backoff.rest(at: start + .milliseconds(101)) == .milliseconds(400))
    }
}
