import ArgumentParser

/// Reads a length of time from the command line: a number with a unit (`90s`, `10min`, `1.5h`,
/// `500ms`), or a bare number of seconds.
///
/// ```swift
/// try DurationArgument.parse("10min")   // .seconds(600)
/// ```
enum DurationArgument {
    private static let units: [(suffix: String, seconds: Double)] = [
        ("ms", 0.001), ("min", 60), ("m", 60), ("h", 3600), ("s", 1),
    ]

    /// - Throws: `ValidationError` saying what was wrong.
    static func parse(_ text: String) throws -> Duration {
        var number = Substring(text)
        while number.first == " " { number = number.dropFirst() }
        while number.last == " " { number = number.dropLast() }
        var scale = 1.0
        if let unit = units.first(where: { number.hasSuffix($0.suffix) }) {
            number = number.dropLast(unit.suffix.count)
            scale = unit.seconds
        }
        guard let value = Double(number), value.isFinite, value >= 0 else {
            throw ValidationError("'\(text)' is not a duration (a number with ms, s, min or h, like 90s or 10min)")
        }
        let seconds = value * scale
        guard seconds <= 7 * 86_400 else { throw ValidationError("'\(text)' is longer than a week") }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }

    /// The duration `option` was given as `text`, at least `least` (written as `written` in the
    /// message).
    ///
    /// ```swift
    /// try DurationArgument.parse("90s", option: "--on-idle-after", atLeast: .seconds(1), written: "1s")   // .seconds(90)
    /// ```
    /// - Throws: `ValidationError` naming the option and what was wrong.
    static func parse(_ text: String, option: String, atLeast least: Duration, written: String) throws -> Duration {
        let duration: Duration
        do { duration = try parse(text) } catch { throw ValidationError("\(option): \(error)") }
        guard duration >= least else { throw ValidationError("\(option) must be at least \(written), not \(text)") }
        return duration
    }
}
