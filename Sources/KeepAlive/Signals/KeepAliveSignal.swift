/// What a keep-alive stream plays.
///
/// Devices differ in what they count as "signal": some wake on any open stream, some on any
/// non-zero sample, some only on a real waveform or broadband energy. Each signal is one answer,
/// from the most discreet to the most robust; all of them obey the level ceiling.
///
/// Parsed from a command-line word, `NAME` or `NAME:FREQUENCY` (an optional `Hz` suffix is
/// accepted; only `sine` and `fluctuate` take a frequency):
///
/// ```swift
/// let signal = try KeepAliveSignal(parsing: "sine:20")      // .sine(frequency: 20)
/// let pulses = try KeepAliveSignal(parsing: "fluctuate")    // .fluctuate(perSecond: 50)
/// print(KeepAliveSignal.pink, signal)                       // pink sine:20
/// ```
///
/// A struct, not an enumeration, so that the library can add a signal without breaking anyone's
/// `switch`: switch over ``kind`` with a `default`, and read a signal's parameter from
/// ``frequency``. Signals are made and compared as an enumeration's cases were
/// (`signal == .sine(frequency: 20)`).
public struct KeepAliveSignal: Sendable, Hashable, CustomStringConvertible {
    /// The library's own exhaustive view: its switches (the frame source factory's above all)
    /// must still handle every signal, and only an embedder's may end in `default`.
    enum Storage: Sendable, Hashable {
        case clip, zero, white, pink, brown, openOnly
        case fluctuate(perSecond: Double)
        case sine(frequency: Double)
    }

    let storage: Storage

    init(_ storage: Storage) { self.storage = storage }

    /// The embedded or given WAV clip, looped at the volume (the seed's behaviour, the default).
    ///
    /// ```swift
    /// let configuration = KeepAliveConfiguration(defaults: OutputConfiguration(clip: try Clip(contentsOfFile: "blip.wav")))  // played by .clip
    /// ```
    public static let clip = KeepAliveSignal(.clip)
    /// Digital zeros: a running stream with nothing in it, for devices that only need a stream.
    ///
    /// ```swift
    /// let signal = try KeepAliveSignal(parsing: "zero")   // .zero
    /// ```
    public static let zero = KeepAliveSignal(.zero)
    /// Digital zeros with one frame of the smallest non-zero sample the format has (one LSB; in
    /// float, the value of a 24-bit LSB) `perSecond` times a second, alternately +1 and -1 LSB.
    /// The volume does not apply (the pulse is always one LSB); the ceiling does.
    ///
    /// ```swift
    /// let signal = KeepAliveSignal.fluctuate(perSecond: 50)   // S16: +1, 0 × 959, -1, 0 × 959, … at 48 kHz
    /// ```
    public static func fluctuate(perSecond: Double) -> KeepAliveSignal { KeepAliveSignal(.fluctuate(perSecond: perSecond)) }
    /// A sine wave of `frequency` Hz whose peak is the volume (within one LSB). Must be under half
    /// the device rate.
    ///
    /// ```swift
    /// let signal = KeepAliveSignal.sine(frequency: 20)   // 20 Hz, at the edge of hearing
    /// ```
    public static func sine(frequency: Double) -> KeepAliveSignal { KeepAliveSignal(.sine(frequency: frequency)) }
    /// White noise (flat spectrum) whose peak is at most the volume.
    ///
    /// ```swift
    /// let signal = try KeepAliveSignal(parsing: "white")   // .white
    /// ```
    public static let white = KeepAliveSignal(.white)
    /// Pink noise (-3 dB per octave) whose peak is at most the volume.
    ///
    /// ```swift
    /// let signal = try KeepAliveSignal(parsing: "pink")   // .pink
    /// ```
    public static let pink = KeepAliveSignal(.pink)
    /// Brown noise (-6 dB per octave) whose peak is at most the volume.
    ///
    /// ```swift
    /// let signal = try KeepAliveSignal(parsing: "brown")   // .brown
    /// ```
    public static let brown = KeepAliveSignal(.brown)
    /// No audio at all: the device is only held open (opened, configured, never written).
    ///
    /// ```swift
    /// let signal = try KeepAliveSignal(parsing: "open-only")   // .openOnly
    /// ```
    public static let openOnly = KeepAliveSignal(.openOnly)

    /// The signal played when none is chosen: ``clip``.
    ///
    /// ```swift
    /// var signal = KeepAliveSignal.default   // .clip
    /// ```
    public static let `default` = KeepAliveSignal.clip
    /// Pulses per second of ``fluctuate(perSecond:)`` when the word gives none: 50.
    ///
    /// ```swift
    /// let pulses = KeepAliveSignal.fluctuate(perSecond: KeepAliveSignal.defaultPulsesPerSecond)
    /// ```
    public static let defaultPulsesPerSecond = 50.0
    /// Frequency of ``sine(frequency:)`` when the word gives none: 1 Hz, below hearing.
    ///
    /// ```swift
    /// let sine = KeepAliveSignal.sine(frequency: KeepAliveSignal.defaultSineFrequency)
    /// ```
    public static let defaultSineFrequency = 1.0
    /// The highest frequency or pulse rate any word may ask for: half the highest device rate
    /// (384 kHz). A given device may refuse less (see ``validate(sampleRate:)``).
    ///
    /// ```swift
    /// print(KeepAliveSignal.maximumFrequency)  // 192000.0
    /// ```
    public static let maximumFrequency = 192_000.0

    /// The command-line words, in the order a help text lists them.
    ///
    /// ```swift
    /// print(KeepAliveSignal.names.joined(separator: ", "))  // clip, zero, fluctuate, sine, white, pink, brown, open-only
    /// ```
    public static let names = ["clip", "zero", "fluctuate", "sine", "white", "pink", "brown", "open-only"]

    /// Parses a command-line word: `clip`, `zero`, `fluctuate[:PER_SECOND]`, `sine[:HZ]`,
    /// `white`, `pink`, `brown` or `open-only` (case-insensitive; `_` for `-` and `openonly` are
    /// accepted too).
    ///
    /// ```swift
    /// let sine = try KeepAliveSignal(parsing: "sine:440Hz")   // .sine(frequency: 440)
    /// ```
    ///
    /// - Throws: ``KeepAliveSignalError`` for an unknown word, a frequency that is not a positive
    ///   number up to ``maximumFrequency``, or a frequency given to a signal that takes none.
    public init(parsing text: String) throws(KeepAliveSignalError) {
        let trimmed = text.trimmingASCIISpaces()
        let parts = trimmed.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let word = String(parts[0]).trimmingASCIISpaces().lowercased()
        let parameter = parts.count > 1 ? String(parts[1]).trimmingASCIISpaces() : nil
        let signal: KeepAliveSignal
        switch word.replacingUnderscores() {
        case "clip": signal = .clip
        case "zero", "zeros": signal = .zero
        case "fluctuate": signal = .fluctuate(perSecond: Self.defaultPulsesPerSecond)
        case "sine": signal = .sine(frequency: Self.defaultSineFrequency)
        case "white": signal = .white
        case "pink": signal = .pink
        case "brown": signal = .brown
        case "open-only", "openonly": signal = .openOnly
        default: throw .unknownSignal(text)
        }
        guard let parameter else {
            self = signal
            return
        }
        guard signal.frequency != nil else { throw .frequencyNotAccepted(signal: signal.name, text: parameter) }
        var number = Substring(parameter)
        if number.lowercased().hasSuffix("hz") { number = number.dropLast(2) }
        guard let value = Double(number.trimmingASCIISpaces()) else { throw .notAFrequency(parameter) }
        guard value.isFinite, value > 0, value <= Self.maximumFrequency else {
            throw .frequencyOutOfRange(signal: signal.name, frequency: value)
        }
        switch signal.storage {
        case .fluctuate: self = .fluctuate(perSecond: value)
        default: self = .sine(frequency: value)
        }
    }

    /// Which signal this is, without its parameter: what a `switch` matches.
    ///
    /// ```swift
    /// let signal = try KeepAliveSignal(parsing: "sine:20")
    /// if signal.kind == .sine, let frequency = signal.frequency { print("\(frequency) Hz") }
    /// ```
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        /// The kind's name, as `openOnly`.
        public let description: String
        private init(_ name: String) { description = name }

        /// ``KeepAliveSignal/clip``.
        public static let clip = Kind("clip")
        /// ``KeepAliveSignal/zero``.
        public static let zero = Kind("zero")
        /// ``KeepAliveSignal/fluctuate(perSecond:)``, at any rate.
        public static let fluctuate = Kind("fluctuate")
        /// ``KeepAliveSignal/sine(frequency:)``, at any frequency.
        public static let sine = Kind("sine")
        /// ``KeepAliveSignal/white``.
        public static let white = Kind("white")
        /// ``KeepAliveSignal/pink``.
        public static let pink = Kind("pink")
        /// ``KeepAliveSignal/brown``.
        public static let brown = Kind("brown")
        /// ``KeepAliveSignal/openOnly``.
        public static let openOnly = Kind("openOnly")
    }

    /// Which signal this is, without its parameter.
    public var kind: Kind {
        switch storage {
        case .clip: .clip
        case .zero: .zero
        case .fluctuate: .fluctuate
        case .sine: .sine
        case .white: .white
        case .pink: .pink
        case .brown: .brown
        case .openOnly: .openOnly
        }
    }

    /// The command-line word without its parameter: `sine`, `open-only`, ….
    ///
    /// ```swift
    /// print(KeepAliveSignal.sine(frequency: 20).name)  // sine
    /// ```
    public var name: String {
        switch storage {
        case .clip: "clip"
        case .zero: "zero"
        case .fluctuate: "fluctuate"
        case .sine: "sine"
        case .white: "white"
        case .pink: "pink"
        case .brown: "brown"
        case .openOnly: "open-only"
        }
    }

    /// The sine's frequency or the pulses per second of ``fluctuate(perSecond:)``; nil for the
    /// signals that take none.
    ///
    /// ```swift
    /// print(KeepAliveSignal.fluctuate(perSecond: 25).frequency ?? 0)  // 25.0
    /// ```
    public var frequency: Double? {
        switch storage {
        case .fluctuate(let perSecond): perSecond
        case .sine(let frequency): frequency
        default: nil
        }
    }

    /// Whether the stream carries audio frames (everything but ``openOnly``).
    ///
    /// ```swift
    /// if !signal.playsFrames { /* only hold the device open */ }
    /// ```
    public var playsFrames: Bool { self != .openOnly }

    /// The word that parses back to this signal: `clip`, `sine:440`, `fluctuate:50`, ….
    ///
    /// ```swift
    /// print(KeepAliveSignal.sine(frequency: 440))  // sine:440
    /// ```
    public var description: String {
        guard let frequency else { return name }
        return "\(name):\(Self.format(frequency))"
    }

    /// Checks what can be checked without a device: a finite, positive frequency up to
    /// ``maximumFrequency``.
    ///
    /// ```swift
    /// try KeepAliveSignal.sine(frequency: 440).validate()
    /// ```
    /// - Throws: ``KeepAliveSignalError/frequencyOutOfRange(signal:frequency:)``.
    public func validate() throws(KeepAliveSignalError) {
        guard let frequency else { return }
        guard frequency.isFinite, frequency > 0, frequency <= Self.maximumFrequency else {
            throw .frequencyOutOfRange(signal: name, frequency: frequency)
        }
    }

    /// Checks the signal against a device rate: a sine must stay under half the rate (Nyquist)
    /// and ``fluctuate(perSecond:)`` can pulse at most once per frame.
    ///
    /// ```swift
    /// try KeepAliveSignal.sine(frequency: 30_000).validate(sampleRate: 48_000)  // throws
    /// ```
    /// - Throws: ``KeepAliveSignalError``.
    public func validate(sampleRate: Int) throws(KeepAliveSignalError) {
        try validate()
        switch storage {
        case .sine(let frequency) where frequency * 2 >= Double(sampleRate):
            throw .frequencyNotBelowNyquist(frequency: frequency, sampleRate: sampleRate)
        case .fluctuate(let perSecond) where perSecond > Double(sampleRate):
            throw .pulsesAboveSampleRate(perSecond: perSecond, sampleRate: sampleRate)
        default:
            break
        }
    }

    /// `440` for whole numbers, `0.5` otherwise.
    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int(value)) }
        return String(value)
    }
}

/// Why a signal word or a signal for a device was refused.
///
/// ```swift
/// do { _ = try KeepAliveSignal(parsing: "hum") } catch { print(error) }
/// // unknown signal 'hum': use one of clip, zero, fluctuate[:PER_SECOND], sine[:HZ], white, pink, brown, open-only
/// ```
///
/// A struct with a ``code``, not an enumeration, so that a new signal's rules break no program's
/// `switch`.
public struct KeepAliveSignalError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule the signal breaks; match it with `==` or in a `switch` with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as `unknownSignal`.
        public let description: String
        private init(_ name: String) { description = name }

        /// The word names no signal.
        public static let unknownSignal = Code("unknownSignal")
        /// The text after `:` is not a number (with an optional `Hz`).
        public static let notAFrequency = Code("notAFrequency")
        /// A frequency was given to a signal that takes none (`white:3`).
        public static let frequencyNotAccepted = Code("frequencyNotAccepted")
        /// The frequency or pulse rate is not finite, not positive, or above 192 kHz.
        public static let frequencyOutOfRange = Code("frequencyOutOfRange")
        /// A sine at or above half the device's rate would alias.
        public static let frequencyNotBelowNyquist = Code("frequencyNotBelowNyquist")
        /// More pulses per second than the device has frames.
        public static let pulsesAboveSampleRate = Code("pulsesAboveSampleRate")
    }

    /// Which rule the signal breaks.
    public let code: Code
    /// What is wrong, in words a command-line tool can print as is.
    ///
    /// ```swift
    /// print(KeepAliveSignalError.notAFrequency("loud"))  // 'loud' is not a frequency: use a number of Hz like 440 or 0.5
    /// ```
    public let description: String

    /// The word names no signal.
    public static func unknownSignal(_ word: String) -> KeepAliveSignalError {
        KeepAliveSignalError(code: .unknownSignal, description: "unknown signal '\(word)': use one of clip, zero, fluctuate[:PER_SECOND], sine[:HZ], white, pink, brown, open-only")
    }

    /// The text after `:` is not a number (with an optional `Hz`).
    public static func notAFrequency(_ text: String) -> KeepAliveSignalError {
        KeepAliveSignalError(code: .notAFrequency, description: "'\(text)' is not a frequency: use a number of Hz like 440 or 0.5")
    }

    /// A frequency was given to a signal that takes none (`white:3`).
    public static func frequencyNotAccepted(signal: String, text: String) -> KeepAliveSignalError {
        KeepAliveSignalError(code: .frequencyNotAccepted, description: "signal '\(signal)' takes no frequency (got '\(text)'); only sine and fluctuate do")
    }

    /// The frequency or pulse rate is not finite, not positive, or above 192 kHz.
    public static func frequencyOutOfRange(signal: String, frequency: Double) -> KeepAliveSignalError {
        KeepAliveSignalError(
            code: .frequencyOutOfRange,
            description: "\(signal) frequency \(KeepAliveSignal.format(frequency)) is out of range: it must be above 0 and at most 192000 Hz")
    }

    /// A sine at or above half the device's rate would alias.
    public static func frequencyNotBelowNyquist(frequency: Double, sampleRate: Int) -> KeepAliveSignalError {
        KeepAliveSignalError(
            code: .frequencyNotBelowNyquist,
            description: "a sine of \(KeepAliveSignal.format(frequency)) Hz cannot be played at \(sampleRate) Hz: it must be below half the rate (\(KeepAliveSignal.format(Double(sampleRate) / 2)) Hz)")
    }

    /// More pulses per second than the device has frames.
    public static func pulsesAboveSampleRate(perSecond: Double, sampleRate: Int) -> KeepAliveSignalError {
        KeepAliveSignalError(
            code: .pulsesAboveSampleRate,
            description: "\(KeepAliveSignal.format(perSecond)) pulses per second cannot be played at \(sampleRate) Hz: at most one per frame")
    }
}

extension String {
    fileprivate func replacingUnderscores() -> String {
        String(decoding: utf8.map { $0 == UInt8(ascii: "_") ? UInt8(ascii: "-") : $0 }, as: UTF8.self)
    }
}
