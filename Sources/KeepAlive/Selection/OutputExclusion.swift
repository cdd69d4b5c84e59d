import Glibc

/// A shell-style pattern that keeps matching outputs out of an ``OutputSelection``
/// (keepalived's `--exclude`): a Bluetooth headset that must sleep to save its battery, a USB
/// DAC that has its own power management.
///
/// The pattern is matched, as the shell matches file names (`*`, `?`, `[…]`, case-sensitive),
/// against each PCM name ALSA's hints list and against its description, whole and part by part
/// (the card, the device, what it is).
/// A pattern that matches a card device's `hw:`, `plughw:` or `dmix:` name or description
/// (`*CARD=DAC,*`, `USB DAC*`, `*HDMI*`) excludes that card device in every form.
///
/// ```swift
/// let exclusions = try ["*bluez*", "USB*"].map { try OutputExclusion($0) }
/// let outputs = OutputSelection.all.pick(from: ALSADevice.playbackDevices(), excluding: exclusions)
/// ```
public struct OutputExclusion: Sendable, Hashable, CustomStringConvertible {
    /// The pattern as given.
    public let pattern: String

    /// A pattern; refused when empty or when it holds a NUL byte.
    ///
    /// ```swift
    /// let bluetooth = try OutputExclusion("*bluez*")
    /// ```
    public init(_ pattern: String) throws(OutputExclusionError) {
        guard !pattern.allSatisfy(\.isWhitespace) else { throw .empty }
        guard !pattern.utf8.contains(0) else { throw .nulByte(pattern) }
        self.pattern = pattern
    }

    public var description: String { pattern }

    /// Whether the pattern matches the device's name or its description.
    ///
    /// ```swift
    /// try OutputExclusion("USB*").matches(ALSADevice(name: "mybt", description: "USB Audio"))  // true
    /// ```
    public func matches(_ device: ALSADevice) -> Bool {
        // ALSA's descriptions come as lines (card, device, what it is) that ``ALSADevice`` joins
        // with ", ": each is a candidate of its own, so "USB*" finds "QEMU USB Audio, USB Audio".
        var candidates = [device.name, device.description]
        var parts: [String] = []
        for line in device.description.split(whereSeparator: \.isNewline) {
            parts += line.split(separator: ", ").map(String.init)
        }
        if parts.count > 1 { candidates += parts }
        return candidates.contains { fnmatch(pattern, $0, 0) == 0 }
    }
}

/// Why a pattern cannot be an ``OutputExclusion``.
///
/// ```swift
/// do { _ = try OutputExclusion("") } catch { print(error) }  // an empty pattern would exclude nothing
/// ```
///
/// A struct with a ``code``, not an enumeration, so that a new rule breaks no program's `switch`.
public struct OutputExclusionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule the pattern breaks; match it with `==` or in a `switch` with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as `empty`.
        public let description: String
        private init(_ name: String) { description = name }

        /// The pattern is empty or only white space.
        public static let empty = Code("empty")
        /// The pattern holds a NUL byte, which no name can.
        public static let nulByte = Code("nulByte")
    }

    /// Which rule the pattern breaks.
    public let code: Code
    /// What is wrong, in words a command-line tool can print as is.
    public let description: String

    /// The pattern is empty or only white space.
    public static let empty = OutputExclusionError(code: .empty, description: "an empty pattern would exclude nothing")

    /// The pattern (given) holds a NUL byte, which no name can.
    public static func nulByte(_ pattern: String) -> OutputExclusionError {
        OutputExclusionError(code: .nulByte, description: "a pattern cannot hold a NUL byte")
    }
}
