/// A carried player's format (its `keepalived:` PCM's hw_params), sent on the connection its
/// `carry` opened: keepalived then runs its stream in that format and hands the PCM the memory
/// to write into.
///
/// ```swift
/// let request = try CarryFormatRequest(parsing: Array(#"{"request":"format","format":2,"rate":48000,"channels":2,"bufferFrames":24000,"periodFrames":6000}"#.utf8))
/// ```
public struct CarryFormatRequest: Codable, Equatable, Sendable {
    public var request: String
    /// alsa-lib's `snd_pcm_format_t`.
    public var format: Int
    public var rate: Int
    public var channels: Int
    public var bufferFrames: Int
    public var periodFrames: Int

    /// Reads and checks one line: every number within what a card device could run.
    public init(parsing line: some Collection<UInt8>) throws(ControlRequestError) {
        let read: CarryFormatRequest
        do { read = try ControlJSON.decode(CarryFormatRequest.self, from: line) } catch { throw .malformed }
        guard read.request == "format" else { throw .unknown(String(read.request.prefix(64))) }
        guard (0...63).contains(read.format), (1000...768_000).contains(read.rate), (1...64).contains(read.channels),
              (16...(1 << 24)).contains(read.bufferFrames), (1...read.bufferFrames).contains(read.periodFrames) else {
            throw .badRelease("a format request out of range")
        }
        self = read
    }
}
