import Glibc

/// A signal computed sample by sample, one value per frame (the same on every channel), as a
/// fraction of full scale before the quantizer's gain. Value type, no allocation in ``next()``.
protocol SampleGenerator {
    /// The next frame's value, in [-1, 1].
    mutating func next() -> Double

    /// Whether any stretch of the output can be repeated end to end without a seam a listener
    /// or a detector could tell from the signal itself: true for noise, false for a waveform.
    static var repeatsSeamlessly: Bool { get }
}

extension SampleGenerator {
    static var repeatsSeamlessly: Bool { false }
}

/// A source that renders a ``SampleGenerator`` into a scratch buffer allocated at init, one
/// scratch-full at a time, and offers slices of it.
///
/// ```swift
/// let source = GeneratedFrameSource(format: format, quantizer: quantizer, generator: WhiteNoise(seed: 42))
/// ```
final class GeneratedFrameSource<Generator: SampleGenerator>: FrameSource {
    let format: OutputFormat
    private var generator: Generator
    private let quantizer: SampleQuantizer
    private let scratch: UnsafeMutableRawBufferPointer
    /// Frames the scratch buffer holds.
    let capacity: Int
    /// Frames of the scratch rendered and not yet consumed: offset..<filled.
    private var offset = 0
    private var filled = 0

    init(format: OutputFormat, quantizer: SampleQuantizer, generator: Generator, capacity: Int? = nil) {
        self.format = format
        self.quantizer = quantizer
        self.generator = generator
        self.capacity = max(1, capacity ?? scratchFrames(for: format))
        scratch = .allocate(byteCount: self.capacity * format.bytesPerFrame, alignment: 16)
    }

    deinit { scratch.deallocate() }

    func peek(maximum: Int) -> (pointer: UnsafeRawPointer, frames: Int) {
        if offset == filled, maximum > 0 { render() }
        return (UnsafeRawPointer(scratch.baseAddress! + offset * format.bytesPerFrame), max(0, min(maximum, filled - offset)))
    }

    func consume(_ frames: Int) {
        precondition(frames >= 0 && frames <= filled - offset, "consumed more than was offered")
        offset += frames
    }

    /// Drops what is rendered and not yet played; the generator goes on from where it was.
    func restart() {
        offset = 0
        filled = 0
    }

    func holds(_ pointer: UnsafeRawPointer, frames: Int) -> Bool {
        scratch.contains(pointer, byteCount: frames * format.bytesPerFrame)
    }

    var ringFit: RingFit { Generator.repeatsSeamlessly ? .anyLength : .none }

    private func render() {
        let base = scratch.baseAddress!
        let bytesPerFrame = format.bytesPerFrame
        let channels = format.channels
        for frame in 0..<capacity {
            quantizer.store(generator.next(), channels: channels, at: base + frame * bytesPerFrame)
        }
        offset = 0
        filled = capacity
    }
}

/// The scratch size for generated and faded frames: one period, at most 16384 frames (a write
/// of fewer frames than asked is fine; this keeps an 8-channel 384 kHz scratch at 512 KiB).
func scratchFrames(for format: OutputFormat) -> Int {
    min(max(format.periodFrames, 1), 16_384)
}

/// A sine by phase accumulation, for frequencies no short loop holds an exact number of cycles of.
struct SineGenerator: SampleGenerator {
    /// Cycles per frame.
    private let increment: Double
    /// Position in the cycle, in [0, 1).
    private var phase = 0.0

    init(frequency: Double, sampleRate: Int) {
        increment = frequency / Double(sampleRate)
    }

    mutating func next() -> Double {
        let value = sin(2 * Double.pi * phase)
        phase += increment
        if phase >= 1 { phase -= 1 }
        return value
    }
}

/// ``KeepAliveSignal/fluctuate(perSecond:)`` by accumulation, for rates no short loop holds:
/// zero, with a pulse of `±pulse` (alternating, + first) each time a pulse falls due.
struct PulseGenerator: SampleGenerator {
    private let increment: Double
    private let pulse: Double
    private var accumulated = 1.0
    private var negative = false

    init(perSecond: Double, sampleRate: Int, pulse: Double) {
        increment = perSecond / Double(sampleRate)
        self.pulse = pulse
    }

    mutating func next() -> Double {
        guard accumulated >= 1 else {
            accumulated += increment
            return 0
        }
        accumulated += increment - 1
        defer { negative.toggle() }
        return negative ? -pulse : pulse
    }
}

/// xorshift64* (Vigna): fast, deterministic, good enough for audio noise; seeded through
/// SplitMix64 so any seed, 0 included, gives a well-mixed non-zero state.
struct NoiseRandom {
    private var state: UInt64

    init(seed: UInt64) {
        var z = seed &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        state = z == 0 ? 0x2545_F491_4F6C_DD1D : z
    }

    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }

    /// Uniform in [-1, 1), variance 1/3.
    mutating func nextBipolar() -> Double {
        Double(Int64(bitPattern: next()) >> 11) * 0x1p-52
    }
}

/// Noise with a ±1 bound: pink and brown are scaled to an RMS of 1/``crestFactor`` of the
/// bound and clamped to it. Gaussian-like, they go past 5 σ about once in 1.7 million samples:
/// the clamp keeps the peak rule without shaping the spectrum.
enum NoiseShaping {
    static let crestFactor = 5.0
}

/// White noise: uniform in [-1, 1), a flat spectrum; its peak is the bound itself.
struct WhiteNoise: SampleGenerator {
    static var repeatsSeamlessly: Bool { true }
    private var random: NoiseRandom

    init(seed: UInt64) { random = NoiseRandom(seed: seed) }

    mutating func next() -> Double { random.nextBipolar() }
}

/// Pink noise (-3 dB per octave) from Paul Kellet's refined filter: six one-pole low-passes
/// plus a direct path over white noise, accurate to ±0.05 dB from about a 2000th of the rate up.
struct PinkNoise: SampleGenerator {
    static var repeatsSeamlessly: Bool { true }
    private var random: NoiseRandom
    private var b0 = 0.0, b1 = 0.0, b2 = 0.0, b3 = 0.0, b4 = 0.0, b5 = 0.0, b6 = 0.0
    private let scale: Double

    // Kellet's coefficients, named once: the filter below uses them tap by tap (unrolled, the
    // per-sample path), the deviation computes with them as arrays.
    static let (p0, p1, p2, p3, p4, p5) = (0.99886, 0.99332, 0.96900, 0.86650, 0.55000, -0.7616)
    static let (g0, g1, g2, g3, g4, g5) = (0.0555179, 0.0750759, 0.1538520, 0.3104856, 0.5329522, -0.0168980)
    static let poles = [p0, p1, p2, p3, p4, p5]
    static let gains = [g0, g1, g2, g3, g4, g5]
    static let direct = 0.5362
    static let delayed = 0.115926

    init(seed: UInt64) {
        random = NoiseRandom(seed: seed)
        scale = 1 / (NoiseShaping.crestFactor * Self.outputDeviation)
    }

    /// The filter's output RMS for uniform white input in [-1, 1): sqrt(Σ h[n]² / 3), from the
    /// closed form of the impulse response h[n] = Σ g·pⁿ (+ the direct taps at n = 0 and 1).
    static var outputDeviation: Double {
        var energy = 0.0
        for i in 0..<poles.count {
            for j in 0..<poles.count { energy += gains[i] * gains[j] / (1 - poles[i] * poles[j]) }
        }
        let first = gains.reduce(0, +)
        let second = zip(gains, poles).reduce(0) { $0 + $1.0 * $1.1 }
        energy += 2 * first * direct + direct * direct + 2 * second * delayed + delayed * delayed
        return (energy / 3).squareRoot()
    }

    mutating func next() -> Double {
        let white = random.nextBipolar()
        b0 = Self.p0 * b0 + white * Self.g0
        b1 = Self.p1 * b1 + white * Self.g1
        b2 = Self.p2 * b2 + white * Self.g2
        b3 = Self.p3 * b3 + white * Self.g3
        b4 = Self.p4 * b4 + white * Self.g4
        b5 = Self.p5 * b5 + white * Self.g5
        let pink = b0 + b1 + b2 + b3 + b4 + b5 + b6 + white * Self.direct
        b6 = white * Self.delayed
        return min(max(pink * scale, -1), 1)
    }
}

/// Brown (red) noise, -6 dB per octave: white noise through a leaky integrator whose corner,
/// 10 Hz whatever the rate, keeps it from drifting off while leaving the audible band at -6 dB
/// per octave.
struct BrownNoise: SampleGenerator {
    static var repeatsSeamlessly: Bool { true }
    static let cornerFrequency = 10.0
    private var random: NoiseRandom
    private let leak: Double
    private let scale: Double
    private var level = 0.0

    init(seed: UInt64, sampleRate: Int) {
        random = NoiseRandom(seed: seed)
        leak = exp(-2 * Double.pi * Self.cornerFrequency / Double(sampleRate))
        // Stationary RMS of y = leak·y + w for w uniform in [-1, 1): sqrt((1/3) / (1 - leak²)).
        let deviation = (1.0 / 3 / (1 - leak * leak)).squareRoot()
        scale = 1 / (NoiseShaping.crestFactor * deviation)
        // Start from the stationary distribution's spread rather than zero, so the first second
        // is not quieter than the rest: one draw scaled to the deviation.
        level = random.nextBipolar() * deviation * 3.0.squareRoot()
    }

    mutating func next() -> Double {
        level = leak * level + random.nextBipolar()
        return min(max(level * scale, -1), 1)
    }
}
