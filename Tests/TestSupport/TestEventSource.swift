import CKeepAliveLinux
import Glibc

/// An eventfd a test rings: readable from the first ``ring()`` until ``drain()``. A poll source
/// the test controls, for the daemon's poll sets and anything else that waits on descriptors.
public final class TestEventSource {
    public let descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))

    public init() {}

    deinit { close(descriptor) }

    public func ring() {
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    public func drain() {
        var count: UInt64 = 0
        _ = read(descriptor, &count, 8)
    }
}
