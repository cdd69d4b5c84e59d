import Glibc

/// An errno value with its text: how every part of the daemon carries a failed system call's
/// cause to its log line or reply.
///
/// Not swift-system's `Errno`, though the package mirror has it: the daemon's descriptors are
/// plain `Int32`s handed to `poll`, `timerfd`, `signalfd`, `inotify` and sd-bus, which
/// swift-system's `FileDescriptor` does not cover, so its `Errno` alone would bring a
/// dependency (and a module in the arm64 cross-build) for these four lines.
struct Errno: Error, CustomStringConvertible, Equatable {
    let code: Int32
    init(_ code: Int32) { self.code = code }
    var description: String { String(cString: strerror(code)) }
}
