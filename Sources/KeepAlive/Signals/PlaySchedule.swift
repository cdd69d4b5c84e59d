/// Periodic playing: sound for ``playFor``, then digital silence for ``pauseFor``, over and over,
/// the device staying open throughout. Each sound span fades in and out over ``fade``
/// (raised-cosine, inside the sound span), so the switch makes no click.
///
/// For devices that stay awake through a short burst now and then, where a continuous signal
/// is unwanted (a meter that should read silence most of the time, power use).
///
/// ```swift
/// let schedule = PlaySchedule(playFor: .seconds(5), pauseFor: .seconds(55))   // fade 0.1 s
/// try schedule.validate()
/// print(schedule)   // play 5 s, pause 55 s, fade 0.1 s
/// ```
public struct PlaySchedule: Sendable, Hashable, CustomStringConvertible {
    /// How long each burst of sound lasts, fades included (exact to the frame at the device rate).
    ///
    /// ```swift
    /// var schedule = PlaySchedule(playFor: .seconds(5), pauseFor: .seconds(55))
    /// schedule.playFor = .seconds(2)
    /// ```
    public var playFor: Duration
    /// How long the digital silence between bursts lasts (exact to the frame). The device stays
    /// open and keeps running: the silence is written as zeros.
    ///
    /// ```swift
    /// schedule.pauseFor = .seconds(30)
    /// ```
    public var pauseFor: Duration
    /// The length of the fade-in at the start and of the fade-out at the end of each burst.
    ///
    /// ```swift
    /// schedule.fade = .zero   // hard switch
    /// ```
    public var fade: Duration

    /// The fade used when none is given: 0.1 s.
    ///
    /// ```swift
    /// let schedule = PlaySchedule(playFor: .seconds(1), pauseFor: .seconds(9), fade: PlaySchedule.defaultFade)
    /// ```
    public static let defaultFade = Duration.milliseconds(100)
    /// The longest ``playFor`` or ``pauseFor`` accepted: one day.
    ///
    /// ```swift
    /// print(PlaySchedule.maximumSpan)  // 86400.0 seconds
    /// ```
    public static let maximumSpan = Duration.seconds(86_400)

    /// A schedule; nothing is checked until ``validate()``.
    ///
    /// ```swift
    /// let schedule = PlaySchedule(playFor: .milliseconds(500), pauseFor: .seconds(30), fade: .milliseconds(50))
    /// ```
    public init(playFor: Duration, pauseFor: Duration, fade: Duration = PlaySchedule.defaultFade) {
        self.playFor = playFor
        self.pauseFor = pauseFor
        self.fade = fade
    }

    /// Checks that both spans are positive and at most a day, and that the fades fit in the
    /// sound span (fade-in plus fade-out at most ``playFor``).
    ///
    /// ```swift
    /// try PlaySchedule(playFor: .seconds(1), pauseFor: .seconds(1), fade: .seconds(1)).validate()  // throws
    /// ```
    /// - Throws: ``PlayScheduleError``.
    public func validate() throws(PlayScheduleError) {
        guard playFor > .zero, playFor <= Self.maximumSpan else { throw .playOutOfRange(playFor) }
        guard pauseFor > .zero, pauseFor <= Self.maximumSpan else { throw .pauseOutOfRange(pauseFor) }
        guard fade >= .zero, fade * 2 <= playFor else { throw .fadeTooLong(fade: fade, playFor: playFor) }
    }

    /// The schedule in one line.
    ///
    /// ```swift
    /// print(PlaySchedule(playFor: .seconds(5), pauseFor: .seconds(55)))  // play 5 s, pause 55 s, fade 0.1 s
    /// ```
    public var description: String {
        "play \(Self.seconds(playFor)) s, pause \(Self.seconds(pauseFor)) s, fade \(Self.seconds(fade)) s"
    }

    /// Frames in `duration` at `rate`, rounded to the nearest frame.
    static func frames(_ duration: Duration, rate: Int) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * rate + Int((Double(attoseconds) * Double(rate) / 1e18).rounded())
    }

    private static func seconds(_ duration: Duration) -> String {
        KeepAliveSignal.format(duration.seconds)
    }
}

/// A rule that a ``PlaySchedule`` breaks.
///
/// ```swift
/// do { try PlaySchedule(playFor: .zero, pauseFor: .seconds(1)).validate() } catch { print(error) }
/// // play duration 0.0 seconds is out of range: it must be above 0 and at most a day
/// ```
///
/// A struct with a ``code``, not an enumeration, so that a new rule breaks no program's `switch`.
public struct PlayScheduleError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule the schedule breaks; match it with `==` or in a `switch` with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as `playOutOfRange`.
        public let description: String
        private init(_ name: String) { description = name }

        /// The sound span is not positive or longer than a day.
        public static let playOutOfRange = Code("playOutOfRange")
        /// The silence span is not positive or longer than a day.
        public static let pauseOutOfRange = Code("pauseOutOfRange")
        /// The fade is negative, or fade-in and fade-out together do not fit in the sound span.
        public static let fadeTooLong = Code("fadeTooLong")
    }

    /// Which rule the schedule breaks.
    public let code: Code
    /// The broken rule, in words a command-line tool can print as is.
    ///
    /// ```swift
    /// print(PlayScheduleError.playOutOfRange(.zero))
    /// ```
    public let description: String

    /// The sound span is not positive or longer than a day.
    public static func playOutOfRange(_ duration: Duration) -> PlayScheduleError {
        PlayScheduleError(code: .playOutOfRange, description: "play duration \(duration) is out of range: it must be above 0 and at most a day")
    }

    /// The silence span is not positive or longer than a day.
    public static func pauseOutOfRange(_ duration: Duration) -> PlayScheduleError {
        PlayScheduleError(code: .pauseOutOfRange, description: "pause duration \(duration) is out of range: it must be above 0 and at most a day")
    }

    /// The fade is negative, or fade-in and fade-out together do not fit in the sound span.
    public static func fadeTooLong(fade: Duration, playFor: Duration) -> PlayScheduleError {
        PlayScheduleError(code: .fadeTooLong, description: "fade of \(fade) does not fit twice (in and out) in the play duration of \(playFor), or is negative")
    }
}
