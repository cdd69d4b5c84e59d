import CKeepAliveLinux
import Glibc
import Testing
import TestSupport

@testable import KeepAliveDaemon

@Suite("The control socket thread's poll set: its sources by name, then its clients in order")
struct ControlPollSetTests {
    @Test("the named sources come first, each in its own place, and a turn's clients replace the last turn's")
    func mapping() {
        var set = ControlPollSet()
        #expect(set.descriptors.count == ControlPollSet.Source.allCases.count && set.clientCount == 0)
        set.watch(.stop, 3)
        set.watch(.events, 5)
        set.watchClients([10, 11, 12])
        #expect(set.descriptors.map(\.fd) == [3, -1, 5, 10, 11, 12])
        set.watch(.listener, 4)
        set.watchClients([11])
        #expect(set.descriptors.map(\.fd) == [3, 4, 5, 11] && set.clientCount == 1)
        set.watchClients([])
        #expect(set.descriptors.map(\.fd) == [3, 4, 5])
    }

    @Test("a wait names the sources and the clients that are ready; a source without a descriptor never is")
    func ready() throws {
        let (stop, events, first, second) = (TestEventSource(), TestEventSource(), TestEventSource(), TestEventSource())
        var set = ControlPollSet()
        set.watch(.stop, stop.descriptor)
        set.watch(.events, events.descriptor)
        set.watchClients([first.descriptor, second.descriptor])
        #expect(try set.wait(timeout: 0))
        #expect(!set.isReady(.stop) && !set.isReady(.listener) && !set.isReady(.events) && !set.isClientReady(0) && !set.isClientReady(1))
        events.ring()
        second.ring()
        #expect(try set.wait(timeout: 1000))
        #expect(set.isReady(.events) && !set.isReady(.stop) && !set.isReady(.listener))
        #expect(!set.isClientReady(0) && set.isClientReady(1))
        events.drain()
        second.drain()
        stop.ring()
        #expect(try set.wait(timeout: 0))
        #expect(set.isReady(.stop) && !set.isReady(.events) && !set.isClientReady(1), "the last wait's readiness is cleared")
    }
}
