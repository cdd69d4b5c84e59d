/// How soon an output tries again after it lost its device.
///
/// The first retry comes after ``initialDelay``, each later one after twice the previous delay,
/// never more than ``maximumDelay``, each shortened by a random fraction up to ``jitter`` so that
/// many outputs retrying at once do not stampede a sound server. After ``stablePeriod`` of
/// uninterrupted playback the delay starts over.
///
/// ```swift
/// var configuration = KeepAliveConfiguration()
/// configuration.defaults.retry = RetryPolicy(maximumDelay: .seconds(5))
/// ```
public struct RetryPolicy: Sendable, Equatable {
    /// The delay before the first retry.
    public var initialDelay: Duration
    /// The longest delay between two retries.
    public var maximumDelay: Duration
    /// The largest fraction (0 to 1) by which a delay is randomly shortened.
    public var jitter: Double
    /// Uninterrupted playback after which the backoff starts over.
    public var stablePeriod: Duration

    /// A policy; the defaults are the daemon's: 50 ms first, doubling up to 2 s, 20 % jitter,
    /// starting over after 10 s of playback.
    public init(
        initialDelay: Duration = .milliseconds(50), maximumDelay: Duration = .seconds(2),
        jitter: Double = 0.2, stablePeriod: Duration = .seconds(10)
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.jitter = jitter
        self.stablePeriod = stablePeriod
    }
}

/// The delays of one run of retries. Owned by a playback thread.
struct Backoff {
    let policy: RetryPolicy
    private var attempt = 0
    private var random: UInt64

    init(policy: RetryPolicy, seed: UInt64) {
        self.policy = policy
        self.random = seed | 1
    }

    /// The delay before the next retry.
    mutating func next() -> Duration {
        defer { attempt += 1 }
        if attempt == 0 { return policy.initialDelay }
        var delay = policy.initialDelay
        for _ in 0..<min(attempt, 32) where delay < policy.maximumDelay { delay *= 2 }
        delay = min(delay, policy.maximumDelay)
        // xorshift64: a jitter source without locks, syscalls or Foundation.
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        let fraction = Double(random >> 11) / Double(1 << 53)
        return delay * (1 - policy.jitter * fraction)
    }

    mutating func reset() { attempt = 0 }
}
