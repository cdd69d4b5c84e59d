import Glibc

/// A linear amplitude as a fraction of full scale, in (0, 1].
///
/// Parsed from a plain number or from decibels relative to full scale:
///
/// ```swift
/// let quiet = try Level(parsing: "0.01")    // 0.01
/// let same = try Level(parsing: "-40dB")    // 0.01
/// let ceiling = Level.defaultCeiling        // 0.05
/// ```
public struct Level: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The fraction of full scale.
    public let linear: Double

    /// The seed's volume: 0.01, about -40 dBFS.
    public static let defaultVolume = Level(uncheckedLinear: 0.01)
    /// The default ceiling no output sample may exceed: 0.05 of full scale, about -26 dBFS.
    public static let defaultCeiling = Level(uncheckedLinear: 0.05)

    /// A level from a linear fraction of full scale.
    /// - Throws: ``LevelError`` when the value is not finite or not in (0, 1].
    public init(linear: Double) throws(LevelError) {
        guard linear.isFinite, linear > 0, linear <= 1 else { throw .outOfRange(text: "\(linear)") }
        self.linear = linear
    }

    /// A level from decibels relative to full scale (0 dB is full scale; must be ≤ 0).
    public init(decibels: Double) throws(LevelError) {
        guard decibels.isFinite, decibels <= 0 else { throw .outOfRange(text: "\(decibels)dB") }
        let linear = Self.power10(decibels / 20)
        guard linear > 0 else { throw .outOfRange(text: "\(decibels)dB") }
        self.linear = linear
    }

    /// Parses `0.01`, `1e-2`, `-40dB`, `-40 dBFS` (case-insensitive unit).
    public init(parsing text: String) throws(LevelError) {
        let trimmed = text.trimmingASCIISpaces()
        let lower = trimmed.lowercased()
        for unit in ["dbfs", "db"] where lower.hasSuffix(unit) {
            let number = String(lower.dropLast(unit.count)).trimmingASCIISpaces()
            guard let value = Double(number) else { throw .notANumber(text: text) }
            do { try self.init(decibels: value) } catch { throw .outOfRange(text: text) }
            return
        }
        guard let value = Double(trimmed) else { throw .notANumber(text: text) }
        do { try self.init(linear: value) } catch { throw .outOfRange(text: text) }
    }

    init(uncheckedLinear: Double) { self.linear = uncheckedLinear }

    /// The level in dB relative to full scale.
    public var decibels: Double { 20 * Self.log10(linear) }

    /// Whether `lhs` is quieter than `rhs`.
    public static func < (lhs: Level, rhs: Level) -> Bool { lhs.linear < rhs.linear }

    /// The linear value and its level in dBFS to one decimal: `0.01 (-40.0 dBFS)`.
    public var description: String {
        "\(linear) (\(Double(Int((decibels * 10).rounded())) / 10) dBFS)"
    }

    // Foundation-free pow/log10, precise enough for gain arithmetic.
    static func power10(_ x: Double) -> Double { exp(x * 2.302585092994046) }
    static func log10(_ x: Double) -> Double { log(x) / 2.302585092994046 }
}

/// Why a level could not be used.
///
/// A struct with a ``code``, not an enumeration, so that a new rule breaks no program's `switch`.
public struct LevelError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule the text breaks; match it with `==` or in a `switch` with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as `notANumber`.
        public let description: String
        private init(_ name: String) { description = name }

        /// The text is not a number, with or without a `dB` unit.
        public static let notANumber = Code("notANumber")
        /// The value is outside (0, 1], or above 0 dB.
        public static let outOfRange = Code("outOfRange")
    }

    /// Which rule the text breaks.
    public let code: Code
    /// What is wrong and what a level looks like, for a command line.
    public let description: String

    /// The text is not a number, with or without a `dB` unit.
    public static func notANumber(text: String) -> LevelError {
        LevelError(code: .notANumber, description: "'\(text)' is not a level: use a fraction of full scale like 0.01 or decibels like -40dB")
    }

    /// The value is outside (0, 1], or above 0 dB.
    public static func outOfRange(text: String) -> LevelError {
        LevelError(code: .outOfRange, description: "level '\(text)' is out of range: it must be above 0 and at most 1 (0 dB)")
    }
}

extension StringProtocol {
    func trimmingASCIISpaces() -> String {
        let bytes = Array(utf8)
        var start = 0
        var end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
