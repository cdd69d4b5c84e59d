import CKeepAliveLinux
import Glibc

/// The daemon's signals as a descriptor its main loop polls (signalfd): SIGTERM and SIGINT stop,
/// SIGHUP reloads. The signals are blocked in the process before any thread starts, so every
/// thread inherits the mask and none is ever interrupted by them.
///
/// ```swift
/// let signals = try SignalDescriptor(signals: [SIGTERM, SIGINT, SIGHUP])
/// if let received = signals.next() { print("got signal \(received)") }
/// ```
final class SignalDescriptor {
    let descriptor: Int32

    init(signals: [Int32]) throws(Errno) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        guard pthread_sigmask(SIG_BLOCK, &set, nil) == 0 else { throw Errno(errno) }
        descriptor = signalfd(-1, &set, Int32(SFD_CLOEXEC | SFD_NONBLOCK))
        guard descriptor >= 0 else { throw Errno(errno) }
    }

    deinit { close(descriptor) }

    /// The next pending signal, or nil when none is.
    func next() -> Int32? {
        var info = signalfd_siginfo()
        let count = read(descriptor, &info, MemoryLayout<signalfd_siginfo>.size)
        guard count == MemoryLayout<signalfd_siginfo>.size else { return nil }
        return Int32(info.ssi_signo)
    }
}
