import CKeepAlivePipeWire

/// What PipeWire's graph clock may run at (its `settings` metadata), and the rate PipeWire gives
/// an idle sink's graph when streams start on it: the rule of its scheduler (`context.c`,
/// 0.3.65 to 1.4), which a sink stream of keepalived's lets a user's stream have.
///
/// ```swift
/// let clock = PipeWireClock(rate: "48000", allowedRates: "[ 44100, 48000 ]", forceRate: "0")!
/// clock.followsStreams                        // true: the graph switches to its streams' rates
/// clock.rate(forStreamsAt: [44100])           // 44100
/// clock.rate(forStreamsAt: [96000, 44100])    // 48000: the allowed rate nearest the largest
/// ```
package struct PipeWireClock: Equatable, Sendable {
    /// `clock.rate`: the graph's rate when no stream asks for one it allows.
    var defaultRate: UInt32
    /// `clock.allowed-rates`: the rates the graph may switch to (`[ defaultRate ]` unless set).
    var allowedRates: [UInt32]
    /// `clock.force-rate`: a rate the user forces on every graph (0: none).
    var forcedRate: UInt32

    package init(defaultRate: UInt32, allowedRates: [UInt32], forcedRate: UInt32 = 0) {
        self.defaultRate = defaultRate
        self.allowedRates = allowedRates
        self.forcedRate = forcedRate
    }

    /// The metadata's values as PipeWire writes them (`"48000"`, `"[ 44100, 48000 ]"`); nil
    /// when the default rate is not a rate. An empty or missing list allows the default only.
    package init?(rate: String, allowedRates: String, forceRate: String) {
        guard let defaultRate = UInt32(rate.filter { $0 != " " }), defaultRate > 0 else { return nil }
        let listed = allowedRates.split { !$0.isNumber }.compactMap { UInt32($0) }.filter { $0 > 0 }
        self.init(defaultRate: defaultRate, allowedRates: listed.isEmpty ? [defaultRate] : listed,
                  forcedRate: UInt32(forceRate.filter { $0 != " " }) ?? 0)
    }

    /// Whether an idle graph takes its streams' rates: more than one rate is allowed and none
    /// is forced. Otherwise the graph's rate never follows a stream, with keepalived or without.
    var followsStreams: Bool { forcedRate == 0 && allowedRates.count > 1 }

    /// The rate PipeWire starts an idle graph at for streams at `rates`: of the allowed rates,
    /// the one nearest the largest stream's, the default rate on a tie (PipeWire's
    /// `find_best_rate`).
    package func rate(forStreamsAt rates: [UInt32]) -> UInt32 {
        guard let wanted = rates.max() else { return defaultRate }
        var best = defaultRate
        for allowed in allowedRates where Self.distance(wanted, allowed) < Self.distance(wanted, best) {
            best = allowed
        }
        return best
    }

    private static func distance(_ a: UInt32, _ b: UInt32) -> UInt32 { a > b ? a - b : b - a }

    /// Why the clock could not be read.
    package enum ReadError: Error, Equatable, CustomStringConvertible {
        /// libpipewire-0.3.so.0 cannot be loaded, in the loader's words.
        case libraryMissing(String)
        /// No PipeWire answered (or it refused the connection), with its words.
        case noServer(String)
        /// It did not answer in time.
        case timedOut
        /// It has no `settings` metadata, or no rate in it.
        case noSettings

        package var description: String {
            switch self {
            case .libraryMissing(let detail): "cannot load libpipewire-0.3.so.0 (\(detail))"
            case .noServer(let detail): "PipeWire does not answer (\(detail))"
            case .timedOut: "PipeWire did not answer in time"
            case .noSettings: "PipeWire has no clock settings"
            }
        }
    }

    /// Asks the PipeWire this process reaches (`PIPEWIRE_REMOTE`, the user's runtime directory),
    /// over a connection of its own made and closed in the call; blocks for at most `timeout`.
    package static func read(timeout: Duration = .milliseconds(250)) -> Result<PipeWireClock, ReadError> {
        var clock = cpipewire_clock()
        let result = cpipewire_read_clock(&clock, Int32(clamping: max(1, timeout.microseconds / 1000)))
        let detail = String(cString: cpipewire_error())
        switch result {
        case Int32(CPIPEWIRE_OK):
            guard let read = PipeWireClock(rate: string(clock.rate), allowedRates: string(clock.allowed_rates),
                                           forceRate: string(clock.force_rate))
            else { return .failure(.noSettings) }
            return .success(read)
        case Int32(CPIPEWIRE_NO_LIBRARY): return .failure(.libraryMissing(detail))
        case Int32(CPIPEWIRE_TIMEOUT): return .failure(.timedOut)
        case Int32(CPIPEWIRE_NO_SETTINGS): return .failure(.noSettings)
        default: return .failure(.noServer(detail))
        }
    }

    /// A fixed-size C string field's text.
    private static func string<T>(_ field: T) -> String {
        withUnsafeBytes(of: field) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
