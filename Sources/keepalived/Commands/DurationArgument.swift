import ArgumentParser

/// A length of time on the command line: a number with a unit (`90s`, `10min`, `1.5h`,
/// `500ms`), or a bare number of seconds.
///
/// ```swift
/// try DurationArgument(parsing: "10min").duration   // .seconds(600)
/// ```
struct DurationArgument: ExpressibleByArgument, Hashable, CustomStringConvertible {
    let duration: Duration
    /// As written, for messages and the help's default.
    let description: String

    private static let units: [(suffix: String, seconds: Double)] = [
        ("ms", 0.001), ("min", 60), ("m", 60), ("h", 3600), ("s", 1),
    ]

    init?(argument: String) {
        guard let duration = try? Self.parse(argument) else { return nil }
        self.duration = duration
        description = argument
    }

    /// - Throws: `ValidationError` naming what was wrong, for an option's `transform:`.
    init(parsing text: String) throws {
        duration = try Self.parse(text)
        description = text
    }

    /// - Throws: `ValidationError` naming what was wrong.
    static func parse(_ text: String) throws -> Duration {
        var number = Substring(text.trimmingCharacters(in: " "))
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
}

private extension String {
    func trimmingCharacters(in character: Character) -> Substring {
        var slice = Substring(self)
        while slice.first == character { slice = slice.dropFirst() }
        while slice.last == character { slice = slice.dropLast() }
        return slice
    }
}
