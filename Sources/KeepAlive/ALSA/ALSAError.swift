import CALSA

/// A failure reported by ALSA: the negative `errno` value it returned and what was being done.
///
/// Internal: it reaches callers only as text (``OutputStatus/lastError``, the events' messages),
/// together with the ``InterruptionReason`` it was classified as.
///
/// ```swift
/// let error = ALSAError(code: -16, operation: "open")
/// print(error)  // open: Device or resource busy (EBUSY)
/// ```
struct ALSAError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The negative errno value returned by alsa-lib.
    let code: Int32
    /// The ALSA operation that failed.
    let operation: String

    /// An error for `code`, the negative errno value alsa-lib returned from `operation`.
    init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// alsa-lib's text for the code, or keepalived's where alsa-lib has none.
    var message: String {
        // The kernel's own ENOTSUPP, which userspace has no name for ("Unknown error 524"): a
        // Raspberry Pi's HDMI (vc4-hdmi) refuses to start its audio while no display is there to
        // take it.
        if code == -kernelENOTSUPP {
            return "the driver cannot play now: an HDMI output with no display (nothing plugged in, a display that is off, or DVI, which carries no sound)"
        }
        return String(cString: snd_strerror(code))
    }

    /// The operation, alsa-lib's text and the errno name: `open: Device or resource busy (EBUSY)`.
    var description: String {
        if let name = errnoName(-code) { return "\(operation): \(message) (\(name))" }
        return "\(operation): \(message)"
    }
}

/// The kernel's ENOTSUPP (`include/linux/errno.h`), which reaches userspace unnamed.
let kernelENOTSUPP: Int32 = 524

/// The symbolic names of the errno values a PCM reports; logs and tests read them better than
/// numbers.
func errnoName(_ value: Int32) -> String? {
    switch value {
    case kernelENOTSUPP: "ENOTSUPP"
    case EPIPE: "EPIPE"
    case ESTRPIPE: "ESTRPIPE"
    case EIO: "EIO"
    case ENODEV: "ENODEV"
    case ENOENT: "ENOENT"
    case EBUSY: "EBUSY"
    case EAGAIN: "EAGAIN"
    case EBADFD: "EBADFD"
    case ENOTCONN: "ENOTCONN"
    case ECONNREFUSED: "ECONNREFUSED"
    case ENXIO: "ENXIO"
    case EINVAL: "EINVAL"
    case EACCES: "EACCES"
    case EPERM: "EPERM"
    case ENOSYS: "ENOSYS"
    case ESHUTDOWN: "ESHUTDOWN"
    case EHOSTDOWN: "EHOSTDOWN"
    case ECONNRESET: "ECONNRESET"
    default: nil
    }
}
