import Glibc

/// Why an output stopped playing for a while.
///
/// ```swift
/// for await event in manager.events {
///     if case .recovered(let device, let reason, let downtime) = event {
///         print("\(device) back after \(reason) in \(downtime)")
///     }
/// }
/// ```
public enum InterruptionReason: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The device ran dry (`-EPIPE`), e.g. after the process was stopped or starved.
    case underrun
    /// The system slept (`-ESTRPIPE`).
    case suspended
    /// The sound server under a plug-in device went away (`-EIO`, `-ENOTCONN`, `-EBADFD`, hang-up).
    case serverGone = "server-gone"
    /// The device was unplugged (`-ENODEV`).
    case unplugged
    /// Another program holds the device exclusively (`-EBUSY`).
    case busy
    /// The device does not exist (yet), or cannot play yet (an HDMI output with no display).
    case noDevice = "no-device"
    /// The device stopped consuming audio without reporting an error.
    case stalled
    /// Anything else; the error text is in the event and the status.
    /// The device's nodes exist but this process may not open them (`-EACCES`, or a card that
    /// alsa-lib cannot see for want of permission): the user is not in the `audio` group, the
    /// unit lacks `SupplementaryGroups=audio`, or udev's sound rules are missing.
    case permissionDenied = "permission-denied"
    case unknown

    /// The name used in logs and the CLI: `underrun`, `server-gone`, `no-device`, ….
    public var description: String { rawValue }

    /// How much the reason says about the cause. A fault seen on the stream (an underrun, a
    /// suspend, a stall) says less than what reopening then learns (the server is gone, the
    /// device unplugged, busy or missing), and anything says more than ``unknown``. An outage is
    /// reported under its most telling reason: a stall whose reopen is refused because PipeWire
    /// is down is `server-gone`.
    var specificity: Int {
        switch self {
        case .unknown: 0
        case .underrun, .suspended, .stalled: 1
        case .serverGone, .unplugged, .busy, .noDevice, .permissionDenied: 2
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
        case ENOENT, kernelENOTSUPP: self = .noDevice
        default: self = .unknown
        }
    }

    /// Classifies a negative errno value from opening or configuring a device.
    init(openError code: Int32) {
        switch -code {
        case EBUSY: self = .busy
        case EACCES, EPERM: self = .permissionDenied
        // ENOTSUPP: an HDMI output with no display (a Raspberry Pi's vc4-hdmi) is waited for
        // as a device that is not there yet.
        case ENOENT, ENODEV, ENXIO, kernelENOTSUPP: self = .noDevice
        case EIO, ENOTCONN, ECONNREFUSED, ECONNRESET, ESHUTDOWN, EHOSTDOWN, EPIPE: self = .serverGone
        default: self = .unknown
        }
    }
}
