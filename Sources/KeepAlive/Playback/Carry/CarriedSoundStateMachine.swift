/// Whether a carried player sends sound or only silence, for the box's activity: a player that
/// holds the device open and sends digital zero (shairport-sync with `disable_standby_mode`,
/// squeezelite between tracks) is silence, so the power hooks and CEC follow the music, not the
/// open. Sound is heard at once; silence only after ``hold`` without sound (a pause, a gap
/// between tracks, a player that writes nothing): the box's own idle time (`--on-idle-after`)
/// then runs from there, and a quiet bar of music does not toggle anything.
///
/// ```swift
/// var sound = CarriedSoundStateMachine(startingAt: 0)
/// if case .silent = sound.looked(at: 2_000_000_000) { print("silence for a second") }
/// if case .sounding = sound.copied(sound: true, at: 2_500_000_000) { print("music again") }
/// ```
struct CarriedSoundStateMachine {
    /// What the owner tells the box.
    enum Action: Equatable {
        case none
        /// The player sends sound again, after silence.
        case sounding
        /// Nothing but silence came for ``hold``.
        case silent
    }

    private enum State {
        /// At `lastSound` (monotonic nanoseconds) the player's frames were last heard, or its
        /// carrying began.
        case sounding(lastSound: Int64)
        case silent
    }

    /// How long without sound counts as silence, in nanoseconds.
    let hold: Int64
    private var state: State

    /// A player's stream that begins now: counted as sound, as its open is (a player opens to play).
    init(startingAt now: Int64, hold: Int64 = 1_000_000_000) {
        self.hold = hold
        state = .sounding(lastSound: now)
    }

    /// The loop copied the player's frames: `sound` when some sample among them is above silence.
    mutating func copied(sound: Bool, at now: Int64) -> Action {
        guard sound else { return .none }
        switch state {
        case .sounding:
            state = .sounding(lastSound: now)
            return .none
        case .silent:
            state = .sounding(lastSound: now)
            return .sounding
        }
    }

    /// A look at the time, at least every hundred milliseconds while carrying.
    mutating func looked(at now: Int64) -> Action {
        switch state {
        case .sounding(let lastSound) where now - lastSound >= hold:
            state = .silent
            return .silent
        case .sounding, .silent:
            return .none
        }
    }
}
