import Glibc

extension Array where Element == pollfd {
    /// Waits until one of the descriptors is ready or `timeout` ms pass (-1: no limit), the last
    /// wait's results cleared first; false when a signal interrupted the wait, with nothing ready.
    /// The one `poll` of the daemon's poll sets (the main loop's ``PollSet``, the control
    /// socket's ``ControlPollSet``).
    /// - Throws: `Errno` when `poll` itself fails.
    mutating func waitForEvents(timeout: Int32) throws(Errno) -> Bool {
        for index in indices { self[index].revents = 0 }
        guard poll(&self, nfds_t(count), timeout) >= 0 else {
            if errno == EINTR { return false }
            throw Errno(errno)
        }
        return true
    }
}
