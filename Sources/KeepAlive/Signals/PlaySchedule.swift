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
        let (seconds, attoseconds) = duration.components
        return KeepAliveSignal.format(Double(seconds) + Double(attoseconds) / 1e18)
    }
}

/// A rule that a ``PlaySchedule`` breaks.
///
/// ```swift
/// do { try PlaySchedule(playFor: .zero, pauseFor: .seconds(1)).validate() } catch { print(error) }
/// // play duration 0.0 seconds is out of range: it must be above 0 and at most a day
/// ```
public enum PlayScheduleError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The sound span is not positive or longer than a day.
    case playOutOfRange(Duration)
    /// The silence span is not positive or longer than a day.
    case pauseOutOfRange(Duration)
    /// The fade is negative, or fade-in and fade-out together do not fit in the sound span.
    case fadeTooLong(fade: Duration, playFor: Duration)

    /// The broken rule, in words a command-line tool can print as is.
    ///
    /// ```swift
    /// print(PlayScheduleError.playOutOfRange(.zero))
    /// ```
    public var description: String {
        switch self {
        case .playOutOfRange(let duration): "play duration \(duration) is out of range: it must be above 0 and at most a day"
        case .pauseOutOfRange(let duration): "pause duration \(duration) is out of range: it must be above 0 and at most a day"
        case .fadeTooLong(let fade, let playFor):
            "fade of \(fade) does not fit twice (in and out) in the play duration of \(playFor), or is negative"
        }
    }
}
