import CKeepAliveLinux
import KeepAlive
import Glibc

/// A player's open held until the amplifier is on (`--power-on-wait`): made when a release
/// through `keepalived:` makes an output active and `--on-active` runs, opened once every hook
/// run it waits for (``addRun()``) has ended (``runEnded(at:)``) and the settle time has
/// passed, and at ``deadline`` whatever the hooks do. The control socket's thread holds the
/// release's reply until then, serving its other clients meanwhile: it polls ``descriptor``,
/// then waits until ``opensAt``.
///
/// The player's open is all that waits: keepalived's own outputs, the hook's thread and the
/// main loop never do.
///
/// ```swift
/// let gate = try PowerOnGate(deadline: .now + .seconds(5), settle: .milliseconds(500))
/// gate.addRun()
/// hooks.enqueue { hook.run(environment: environment, logger: logger); gate.runEnded(at: .now) }
/// // the control socket's thread, once `gate.descriptor` is readable:
/// let opensAt = gate.opensAt   // the hook's end + 0.5 s, never after the deadline
/// ```
final class PowerOnGate: Sendable {
    /// When the open goes on even if a hook still runs: the release's arrival + `--power-on-wait`.
    let deadline: ContinuousClock.Instant
    /// How long after the last hook's end the open still waits (`--power-on-settle`): a receiver
    /// that is switched on may take a moment to take sound.
    let settle: Duration
    /// An eventfd, readable once every hook run has ended.
    let descriptor: Int32
    /// What is still under way if the deadline comes first, for the log: "--on-active still
    /// runs", or `--cec`'s unconfirmed wake.
    let waitingFor: String

    private struct Runs: Sendable {
        var running = 0
        var ended: ContinuousClock.Instant?
    }

    private let runs = Locked(Runs())

    /// - Throws: `Errno` when there is no eventfd (the process is out of descriptors): the open
    ///   is then not held.
    init(deadline: ContinuousClock.Instant, settle: Duration, waitingFor: String = "--on-active still runs") throws(Errno) {
        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else { throw Errno(errno) }
        self.deadline = deadline
        self.settle = settle
        self.waitingFor = waitingFor
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// One more hook run to wait for, queued now.
    func addRun() {
        runs.withLock { $0.running += 1 }
    }

    /// A hook run ended (or was never started); the last one opens the gate, after the settle.
    func runEnded(at now: ContinuousClock.Instant) {
        let last = runs.withLock { runs -> Bool in
            precondition(runs.running > 0, "PowerOnGate.runEnded without a run added")
            runs.running -= 1
            guard runs.running == 0 else { return false }
            runs.ended = now
            return true
        }
        guard last else { return }
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    /// When the held open may go on: the last hook's end plus the settle, at the latest the
    /// deadline; nil while a hook runs.
    var opensAt: ContinuousClock.Instant? {
        runs.withLock { $0.running == 0 ? $0.ended : nil }.map { min($0 + settle, deadline) }
    }

    /// Whether the held open may go on at `now`.
    func isOpen(at now: ContinuousClock.Instant) -> Bool {
        now >= deadline || opensAt.map { now >= $0 } == true
    }

    /// Reads the descriptor's count, so that it is readable again only when a later run ends:
    /// the control thread calls it each time the descriptor was readable (a run added after the
    /// signal, for another output of the same change, would otherwise leave it readable for good
    /// and the thread's poll would spin).
    func acknowledge() {
        var count: UInt64 = 0
        _ = read(descriptor, &count, 8)
    }

    /// Whether a hook still ran when the open went on (at the deadline).
    var hooksOutlasted: Bool { runs.withLock { $0.running > 0 || $0.ended == nil } }
}
