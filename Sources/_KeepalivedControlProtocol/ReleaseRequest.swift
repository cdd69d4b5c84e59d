/// A player's request to have one card's playback device (the `keepalived:` ALSA PCM sends it
/// from the player's `snd_pcm_open`): keepalived closes what it plays there and takes the
/// device back once the player closes it.
///
/// ```swift
/// let command = try ControlCommand(parsing: Array(#"{"request":"release","card":0,"device":3}"#.utf8))
/// // .release(ReleaseRequest(card: 0, device: 3))
/// ```
public struct ReleaseRequest: Equatable, Hashable, Sendable {
    /// ALSA allows at most 256 cards (`SNDRV_CARDS` is 8 to 256) and 256 PCM devices per card.
    public static let cardRange = 0..<256
    public static let deviceRange = 0..<256
    /// The longest program name kept; longer ones are cut.
    public static let maximumProgramLength = 64

    /// The card index and its playback device.
    public var card: Int
    public var device: Int
    /// What the caller says it is (`mpd`), printable ASCII only, for `status`.
    public var program: String?

    /// A request for `card`'s `device`.
    public init(card: Int, device: Int, program: String? = nil) {
        self.card = card
        self.device = device
        self.program = program
    }

    /// Checks the fields of a `release` line.
    init(_ request: ControlRequest) throws(ControlRequestError) {
        guard let card = request.card else { throw .badRelease("no \"card\" number") }
        guard let device = request.device else { throw .badRelease("no \"device\" number") }
        guard Self.cardRange.contains(card) else { throw .badRelease("card \(card) is outside 0...\(Self.cardRange.upperBound - 1)") }
        guard Self.deviceRange.contains(device) else {
            throw .badRelease("device \(device) is outside 0...\(Self.deviceRange.upperBound - 1)")
        }
        self.card = card
        self.device = device
        // Shown to an administrator: no control characters, no unbounded length.
        let printable = (request.program ?? "").unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }
        program = printable.isEmpty ? nil : String(String.UnicodeScalarView(printable.prefix(Self.maximumProgramLength)))
    }

    /// The device as `hw:` names it.
    public var pcm: String { "hw:CARD=\(card),DEV=\(device)" }
}
