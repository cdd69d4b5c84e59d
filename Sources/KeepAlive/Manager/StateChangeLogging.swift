import Logging

/// How loudly one output's state changes are logged. A warning is for what a user should look
/// at; the states a healthy box passes through are info, so that `journalctl -p warning` stays
/// empty on a box where nothing is wrong:
///
/// - **busy**: another program holds the device. That is the box's normal state whenever a
///   player uses the card (real audio always wins), so it is info however long it lasts;
///   `status` says who holds the card.
/// - **no-display**: an HDMI port with no display to take its audio (a Pi's second port, a TV
///   in standby): a box's normal state too, info however long it lasts.
/// - **server-gone before the first play**: a sound server still starting (a login's
///   socket-activated PipeWire answers the socket before its ALSA sink can be configured).
///   Info, and one warning if the output still waits after ``quietWaitLimit``: a server that
///   never comes is a fault.
/// - Any other wait or recovery is a warning, as is a server lost after the output played.
///
/// ```swift
/// var logging = StateChangeLogging()
/// let level = logging.changed(from: .starting, to: .waitingForDevice(.busy), at: .now)  // .info
/// ```
struct StateChangeLogging: Sendable, Equatable {
    /// How long a wait for a sound server that is still starting stays at info.
    static let quietWaitLimit: Duration = .seconds(30)

    private enum State: Sendable, Equatable {
        /// Every change at its own level.
        case normal
        /// A wait logged at info; `until`: when it becomes worth a warning (nil: never).
        case quietWait(until: ContinuousClock.Instant?)
        /// That wait's warning was given; nothing more until the state changes.
        case warned
    }

    private var state = State.normal

    /// The level to log the change from `old` to `new` at.
    mutating func changed(from old: KeepAliveState, to new: KeepAliveState, at now: ContinuousClock.Instant) -> Logger.Level {
        switch new.storage {
        case .waitingForDevice(.busy), .waitingForDevice(.noDisplay):
            state = .quietWait(until: nil)
            return .info
        case .waitingForDevice(.serverGone) where old == .starting:
            state = .quietWait(until: now + Self.quietWaitLimit)
            return .info
        case .waitingForDevice(.serverGone) where isQuietlyWaiting, .waitingForDevice(.noDevice) where isQuietlyWaiting:
            // Still the same wait, seen under another symptom (a server's sink not made yet).
            return .info
        case .waitingForDevice, .recovering:
            state = .normal
            return .warning
        case .stopped, .starting, .playing, .paused:
            state = .normal
            return .info
        }
    }

    /// A fault was reported again while the output waits. True once, when a quiet wait has
    /// lasted long enough to be worth a warning.
    mutating func faultRepeated(at now: ContinuousClock.Instant) -> Bool {
        guard case .quietWait(let until?) = state, now >= until else { return false }
        state = .warned
        return true
    }

    private var isQuietlyWaiting: Bool {
        switch state {
        case .quietWait, .warned: true
        case .normal: false
        }
    }
}
