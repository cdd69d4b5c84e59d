import CALSA
import Glibc

/// The ring loop's one sleep: on the PCM's own descriptors, for errors only, or on the card's PCM
/// node (``PCMNodeWatch``) where it does not sleep on the PCM; and on its doorbell, until the
/// check's next look. What woke it is the answer; the descriptors are fetched once, at the open,
/// so a sleep allocates nothing.
///
/// ```swift
/// var sleep = try RingLoopSleep(pcm: pcm, node: nil, doorbell: loop.doorbell)
/// if case .timedOut = sleep.wait(.seconds(60), pcm: pcm) { /* look at the stream */ }
/// ```
struct RingLoopSleep {
    /// What ended a sleep.
    enum Wake {
        /// A signal (EINTR): sleep again.
        case interrupted
        /// The poll failed with this errno.
        case failed(Int32)
        /// The doorbell rang (it is drained): look at what was asked.
        case rung
        /// The card's PCM node changed (its events are drained): the stream's state and the node
        /// say whether it went away.
        case nodeChanged(PCMNodeWatch)
        /// The PCM's descriptors reported these events.
        case events(Int32)
        /// Nothing happened: the check's look is due.
        case timedOut

    }

    /// The node watched instead of the PCM's descriptors, if any.
    let node: PCMNodeWatch?
    private let doorbell: Doorbell
    private var descriptors: [pollfd]
    /// How many of ``descriptors`` are the PCM's (or the node's); the doorbell's is last.
    private let pcmCount: Int

    init(pcm: PCMDevice, node: PCMNodeWatch?, doorbell: Doorbell) throws(ALSAError) {
        if let node {
            descriptors = [pollfd(fd: node.descriptor, events: Int16(POLLIN), revents: 0)]
        } else {
            descriptors = try pcm.pollDescriptors()
            // Errors only: with period interrupts off nothing else could wake the thread.
            for index in descriptors.indices { descriptors[index].events = 0 }
        }
        descriptors.append(pollfd(fd: doorbell.descriptor, events: Int16(POLLIN), revents: 0))
        pcmCount = descriptors.count - 1
        self.node = node
        self.doorbell = doorbell
    }

    /// Sleeps for `timeout` at most.
    mutating func wait(_ timeout: Duration, pcm: PCMDevice) -> Wake {
        let ready = descriptors.withUnsafeMutableBufferPointer { fds -> Int32 in
            for index in fds.indices { fds[index].revents = 0 }
            return poll(fds.baseAddress, nfds_t(fds.count), timeout.pollTimeout)
        }
        if ready < 0 {
            let code = errno
            return code == EINTR ? .interrupted : .failed(code)
        }
        if descriptors[pcmCount].revents != 0 {
            doorbell.drain()
            return .rung
        }
        guard ready > 0 else { return .timedOut }
        if let node {
            node.drain()
            return .nodeChanged(node)
        }
        let count = pcmCount
        return .events(descriptors.withUnsafeMutableBufferPointer { pcm.revents($0.baseAddress!, count: count) })
    }
}
