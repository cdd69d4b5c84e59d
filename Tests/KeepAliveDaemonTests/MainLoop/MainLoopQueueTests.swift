import _KeepalivedControlProtocol
import Glibc
import KeepAlive
import Synchronization
import TestSupport
import Testing

@testable import KeepAliveDaemon

@Suite("Reload queue: every reload applied on the main loop, in order, its outcome handed back")
struct MainLoopQueueTests {
    /// Stands in for the main loop: applies what is queued, as `DaemonRuntime` does, until told
    /// to stop; records the order it applied the requests in.
    final class MainLoop: Sendable {
        let queue: MainLoopQueue
        let applied = Locked<[String]>([])
        private let stopping = Atomic<Bool>(false)

        init(_ queue: MainLoopQueue) { self.queue = queue }

        func run() {
            while !stopping.load(ordering: .acquiring) {
                var descriptor = pollfd(fd: queue.descriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 10)
                for request in queue.take() {
                    applied.withLock { $0.append(request.trigger) }
                    request.fulfil(ControlReply(ok: true, changed: request.trigger.hasSuffix("changed")))
                }
            }
        }

        func stop() { stopping.store(true, ordering: .releasing) }
    }

    @Test("requests come out oldest first, each once; the descriptor is readable only while some wait")
    func order() throws {
        let queue = try MainLoopQueue()
        func readable() -> Bool {
            var descriptor = pollfd(fd: queue.descriptor, events: Int16(POLLIN), revents: 0)
            return poll(&descriptor, 1, 0) == 1
        }
        #expect(!readable())
        for name in ["SIGHUP", "control socket", "SIGHUP again"] { queue.submit(MainLoopRequest(trigger: name)) }
        #expect(readable())
        #expect(queue.take().map(\.trigger) == ["SIGHUP", "control socket", "SIGHUP again"])
        #expect(!readable())
        #expect(queue.take().isEmpty)
    }

    @Test("the asker gets the main loop's own reply; from several threads at once, each its own, each thread's in its order")
    func handOver() throws {
        let queue = try MainLoopQueue()
        let loop = MainLoop(queue)
        let main = try startThread(named: "test-main") { loop.run() }
        let replies = Locked<[String: ControlReply]>([:])
        let finished = Atomic(0)
        for thread in 0..<4 {
            try startDetachedThread(named: "test-ask-\(thread)") {
                for index in 0..<10 {
                    let trigger = "t\(thread)-\(index)" + (index % 2 == 0 ? " changed" : "")
                    let reply = queue.reload(trigger: trigger, timeout: .seconds(10))
                    replies.withLock { $0[trigger] = reply }
                }
                finished.add(1, ordering: .releasing)
            }
        }
        #expect(pollUntil(timeout: .seconds(20), every: .milliseconds(1)) { finished.load(ordering: .acquiring) == 4 })
        loop.stop()
        main.join()
        let all = replies.withLock { $0 }
        #expect(all.count == 40)
        for (trigger, reply) in all {
            #expect(reply.ok, "\(trigger)")
            #expect(reply.changed == trigger.hasSuffix("changed"), "\(trigger)")
        }
        let applied = loop.applied.withLock { $0 }
        #expect(applied.count == 40)
        for thread in 0..<4 {
            let own = applied.filter { $0.hasPrefix("t\(thread)-") }
            #expect(own == (0..<10).map { "t\(thread)-\($0)" + ($0 % 2 == 0 ? " changed" : "") })
        }
    }

    @Test("no main loop to apply it within the bound: the asker is told, the request stays queued")
    func timeout() throws {
        let queue = try MainLoopQueue()
        let started = ContinuousClock.now
        let reply = queue.reload(trigger: "control socket", timeout: .milliseconds(50))
        #expect(started.duration(to: .now) >= .milliseconds(50))
        #expect(!reply.ok)
        #expect(reply.error?.contains("still waiting") == true, "\(reply)")
        #expect(queue.take().map(\.trigger) == ["control socket"])
    }

    @Test("stopping: a request waiting is failed at once, and every later one, never left hanging")
    func closing() throws {
        let queue = try MainLoopQueue()
        let reply = Locked<ControlReply?>(nil)
        let asker = try startThread(named: "test-ask") {
            let answer = queue.reload(trigger: "control socket", timeout: .seconds(30))
            reply.withLock { $0 = answer }
        }
        // Once the request is in the queue, the daemon stops.
        #expect(pollUntil(timeout: .seconds(20), every: .milliseconds(1)) { queue.descriptorReadable })
        let started = ContinuousClock.now
        queue.close(failing: MainLoopQueue.stopping)
        asker.join()
        #expect(started.duration(to: .now) < .seconds(5))
        let answer = reply.withLock { $0 }
        #expect(answer?.error?.contains("stopping") == true, "\(String(describing: answer))")
        let later = queue.reload(trigger: "too late", timeout: .seconds(30))
        #expect(later.error?.contains("stopping") == true)
        #expect(queue.take().isEmpty)
    }

    @Test("a request's first outcome stands")
    func firstOutcome() throws {
        let request = try MainLoopRequest.awaited(trigger: "control socket")
        #expect(request.reply == nil)
        request.fulfil(ControlReply(ok: true, changed: true))
        request.fulfil(MainLoopQueue.stopping)
        #expect(request.wait(timeout: .zero)?.ok == true)
        #expect(request.reply?.changed == true)
    }
}

extension MainLoopQueue {
    /// Whether requests wait, without taking them.
    var descriptorReadable: Bool {
        var descriptor = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 1
    }
}
