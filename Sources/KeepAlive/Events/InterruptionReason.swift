import Glibc

/// Why an output stopped playing for a while.
///
/// ```swift
/// for await event in manager.events {
///     if let device = event.device, let reason = event.reason, let downtime = event.downtime {
///         print("\(device) back after \(reason) in \(downtime)")
///     }
/// }
/// ```
///
/// A struct, not an enumeration: ALSA and the sound servers will show new ways to fail, and a new
/// reason must not break a program's `switch` (match the reasons you handle, then `default`).
public struct InterruptionReason: Sendable, Hashable, CustomStringConvertible {
    private enum Kind: String, Sendable, Hashable {
        case underrun, suspended, unplugged, busy, stalled, unknown
        case serverGone = "server-gone"
        case noDevice = "no-device"
        case noDisplay = "no-display"
        case permissionDenied = "permission-denied"
    }

    private let kind: Kind

    private init(_ kind: Kind) { self.kind = kind }

    /// The device ran dry (`-EPIPE`), e.g. after the process was stopped or starved.
    public static let underrun = InterruptionReason(.underrun)
    /// The system slept (`-ESTRPIPE`).
    public static let suspended = InterruptionReason(.suspended)
    /// The sound server under a plug-in device went away (`-EIO`, `-ENOTCONN`, `-EBADFD`, hang-up).
    public static let serverGone = InterruptionReason(.serverGone)
    /// The device was unplugged (`-ENODEV`).
    public static let unplugged = InterruptionReason(.unplugged)
    /// Another program holds the device exclusively (`-EBUSY`).
    public static let busy = InterruptionReason(.busy)
    /// The device does not exist (yet).
    public static let noDevice = InterruptionReason(.noDevice)
    /// The device cannot play while no display takes its audio (`-ENOTSUPP` from a Raspberry
    /// Pi's HDMI, vc4-hdmi: nothing plugged in, a display or receiver that is off, DVI): waited
    /// for as a device that is not there yet, and a box's normal state (the second port of a Pi
    /// with one display, a TV in standby), so it is never a warning.
    public static let noDisplay = InterruptionReason(.noDisplay)
    /// The device stopped consuming audio without reporting an error.
    public static let stalled = InterruptionReason(.stalled)
    /// The device's nodes exist but this process may not open them (`-EACCES`, or a card that
    /// alsa-lib cannot see for want of permission): the user is not in the `audio` group, the
    /// unit lacks `SupplementaryGroups=audio`, or udev's sound rules are missing.
    public static let permissionDenied = InterruptionReason(.permissionDenied)
    /// Anything else; the error text is in the event and the status.
    public static let unknown = InterruptionReason(.unknown)

    /// The name used in logs and the CLI: `underrun`, `server-gone`, `no-device`, ….
    public var description: String { kind.rawValue }

    /// How much the reason says about the cause. A fault seen on the stream (an underrun, a
    /// suspend, a stall) says less than what reopening then learns (the server is gone, the
    /// device unplugged, busy or missing), and anything says more than ``unknown``. An outage is
    /// reported under its most telling reason: a stall whose reopen is refused because PipeWire
    /// is down is `server-gone`.
    var specificity: Int {
        switch kind {
        case .unknown: 0
        case .underrun, .suspended, .stalled: 1
        case .serverGone, .unplugged, .busy, .noDevice, .noDisplay, .permissionDenied: 2
        }
    }

    /// Classifies a negative errno value from an operation on an open stream.
    init(streamError code: Int32) {
        switch -code {
        case EPIPE: self = .underrun
        case ESTRPIPE: self = .suspended
        case ENODEV, ENXIO: self = .unplugged
        case EIO, ENOTCONN, EBADFD, ECONNREFUSED, ECONNRESET, ESHUTDOWN, EHOSTDOWN: self = .serverGone
        case EBUSY: self = .busy
        case ENOENT: self = .noDevice
        case kernelENOTSUPP: self = .noDisplay
        default: self = .unknown
        }
    }

    /// Classifies a negative errno value from opening or configuring a device.
    init(openError code: Int32) {
        switch -code {
        case EBUSY: self = .busy
        case EACCES, EPERM: self = .permissionDenied
        case ENOENT, ENODEV, ENXIO: self = .noDevice
        case kernelENOTSUPP: self = .noDisplay
        case EIO, ENOTCONN, ECONNREFUSED, ECONNRESET, ESHUTDOWN, EHOSTDOWN, EPIPE: self = .serverGone
        default: self = .unknown
        }
    }
}
