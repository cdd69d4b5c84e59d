import _KeepalivedControlProtocol
import KeepAlive
import Logging
import Glibc

/// A player's `carry`: its audio played on keepalived's own open stream on the card device it
/// named, so the device never stops for it (docs/players.md). Decided on the control socket's
/// thread: when an output plays on that device on a stream that can carry a player, the
/// connection is handed to that output's playback thread, which answers it from then on;
/// otherwise the player is told no at once and asks for a `release` instead.
///
/// ```swift
/// let request = ReleaseRequest(card: 0, device: 0, program: "mpd")
/// if case .notCarried(let why) = PlayerCarrying.handOver(request, pid: 812, connection: 9, manager: manager, scanner: scanner,
///                                                        activity: activity, logger: logger) {
///     print("the player asks for a release: \(why)")
/// }
/// ```
enum PlayerCarrying {
    enum Decision: Equatable {
        /// The connection is the carried player's now (carried, or told no by its output): the
        /// caller must neither answer nor close it.
        case taken
        /// The player asks for a release next; why, for the journal and its loan in `status`.
        case notCarried(String)
    }

    /// While it is carried and sends sound, the player is real audio on the device's outputs
    /// (``BoxActivity``): one that holds the device open with silence is not.
    static func handOver(_ request: ReleaseRequest, pid: Int32, connection: Int32, manager: KeepAliveManager, scanner: OutputScanner,
                         activity: BoxActivity, logger: Logger) -> Decision {
        let hardware = HardwareDevice(card: request.card, device: request.device)
        let outputs = scanner.outputs(on: hardware)
        if let why = activity.whyNotCarried(at: outputs) { return .notCarried(why) }
        guard manager.carryCapabilities(on: hardware) != nil else {
            let why = "no output plays on it on a stream that can carry one (one on the card's own PCM: not through plug, softvol, dmix or alsa-lib's IEC958 layer; or none open now)"
            // With --carry on, a player handed the card instead is worth a line: say why.
            logger.info("a player is handed the card, not carried: \(why)", metadata: [
                "hardware": "\(hardware)", "player": "\(request.program ?? "?") (pid \(pid))", "outputs": "\(outputs.joined(separator: ","))"])
            return .notCarried(why)
        }
        let who = BoxActivity.Player(program: request.program ?? "pid \(pid)", card: request.card, device: request.device)
        let player = CarriedPlayer(connection: connection, program: request.program ?? "?", pid: pid, parseFormat: { line in
            guard let format = try? CarryFormatRequest(parsing: line) else { return nil }
            return CarriedFormat(alsaFormat: Int32(format.format), rate: format.rate, channels: format.channels,
                                 bufferFrames: format.bufferFrames, periodFrames: format.periodFrames)
        }, sounding: { sounding in
            activity.carriedChanged(outputs, player: who, sounding: sounding)
        })
        guard manager.carry(player, on: hardware) else {
            // Not the caller's to close now: the player object owns the descriptor.
            player.reply(#"{"ok":false,"carry":false,"error":"no output carries a player on this device now"}"#)
            return .taken
        }
        logger.debug("a player asks to be carried", metadata: ["hardware": "\(hardware)", "player": "\(request.program ?? "?") (pid \(pid))"])
        return .taken
    }
}
