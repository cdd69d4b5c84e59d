/// How one open of a device ended.
enum PlaybackOutcome {
    case stopped
    /// The state machine decided: close, wait, open again.
    case reopen(after: Duration)
    /// A new configuration wants the device opened differently: close and open at once.
    case reconfigure
}

/// What another thread asked of an open stream, looked at each time round a mode's loop.
enum PlaybackRequest {
    /// Stop: the stream is dropped already.
    case stop
    /// A new configuration, rendered for the open format.
    case reloaded(any FrameSource)
    /// A new configuration that writes nothing (open-only).
    case writesNothing
    /// The open must end this way (the new signal cannot play at the open format).
    case end(PlaybackOutcome)
    /// A player to carry on this open stream (``CarryPlayback``), with the format request it
    /// waits for an answer to, if any.
    case carry(CarriedPlayer, CarriedFormat?)
}

/// What a way of playing (``StreamPlayback``, ``RingLoopPlayback``, ``HoldOpenPlayback``) may ask
/// of the ``PlaybackLoop`` that runs it, and nothing more: the loop keeps the recovery state
/// machine, the watcher and the configuration; a mode keeps its device, format and frames.
protocol PlaybackContext: AnyObject {
    var clock: ContinuousClock { get }
    /// Rung to stop or to hand over a configuration; a mode sleeps on it.
    var doorbell: Doorbell { get }
    /// The device watcher's descriptor, -1 without one: a mode's sleep ends when it is readable.
    var watcherDescriptor: Int32 { get }

    func report(_ report: PlaybackReport)
    /// A stop, or a configuration handed over and rendered for `format`; nil when neither.
    func pendingRequest(_ pcm: PCMDevice, _ format: OutputFormat) -> PlaybackRequest?
    /// A player handed over to be carried since the last look (taken), and nothing else looked
    /// at: for a carrying's end, which must answer it before its plug-in's deadline.
    func takeWaitingPlayer() -> CarriedPlayer?
    /// Audio flows (the first write after an open or a repair).
    func flowing()
    /// A stream error: repaired in place (nil, with `restarted` true when the buffer is empty
    /// now), or the outcome that ends the open.
    func recover(_ pcm: PCMDevice, code: Int32, operation: String, dryAt: ContinuousClock.Instant?, restarted: inout Bool) -> PlaybackOutcome?
    /// A prepare the mode needed failed.
    func prepareFailed(_ code: Int32) -> PlaybackOutcome
    /// The watcher's descriptor was readable while playing: the outcome when what it saw ends
    /// the open (a sound server restarted under the stream), else nil.
    func sawWhilePlaying() -> PlaybackOutcome?
    /// The ring loop found that the device does not replay its ring: the output is opened again
    /// at once and streams from then on.
    func ringNotReplayed(_ message: String) -> PlaybackOutcome
    /// What the open device could be opened in (read at the open, before its setup): what a
    /// carried player is offered.
    var capabilities: PCMCapabilities? { get }
    /// Until when a carried player's format request waits after the open made for it
    /// (`--lead-in`): the signal plays in the new format meanwhile. Nil: no wait.
    var carryLeadInEnds: ContinuousClock.Instant? { get }
    /// Carrying `player` needs the device opened again in `format`: the player is kept, and
    /// carried at the next open: true. False when the device was just opened for that format and
    /// does not run it: the player is told so and carried on (it may set another).
    func reopen(for format: CarriedFormat, carrying player: CarriedPlayer) -> Bool
    /// `player`'s carrying met a stream error: carried again once the stream is repaired (in its
    /// memory, when it had one), answering `request` then (refused if the repair opens a stream
    /// that cannot carry it).
    func keep(_ player: CarriedPlayer, waitingFor request: CarriedFormat?)
    /// The device must be closed and opened again.
    func lose(_ reason: InterruptionReason, _ message: String, since: ContinuousClock.Instant?) -> PlaybackOutcome
}

extension PlaybackContext {
    func lose(_ reason: InterruptionReason, _ message: String) -> PlaybackOutcome {
        lose(reason, message, since: nil)
    }
}

/// How carrying a player ended, for the way of playing that carried it.
enum CarryEnding {
    /// The mode goes on (the player is gone, or kept for a format the device could not open in).
    case goOn
    /// A stream error for the mode to repair as its own.
    case failed(Int32, String)
    case outcome(PlaybackOutcome)
}

extension PlaybackContext {
    /// Carries `player` on the open stream (``CarryPlayback``); a format switch becomes
    /// `.outcome(.reconfigure)` (the device opened again in it) or, refused, `.goOn`.
    func carry(_ player: CarriedPlayer, _ request: CarriedFormat?, pcm: PCMDevice, format: OutputFormat, source: inout any FrameSource, ringLoop: Bool) -> CarryEnding {
        var carrying = CarryPlayback(pcm: pcm, format: format, source: source)
        defer { source = carrying.source }
        switch carrying.carry(player, answering: request, ringLoop: ringLoop, in: self) {
        case .playerGone: return .goOn
        // The player that asked: after a `next`, not the one this carrying began with (MPD's open
        // for a track in another format, read before its last PCM's close: the gone one was
        // held for the reopen, and the asking one's connection dropped unanswered).
        case .switchFormat(let wanted, let asking): return reopen(for: wanted, carrying: asking) ? .outcome(.reconfigure) : .goOn
        case .failed(let code, let operation, let kept):
            if let (player, request) = kept { keep(player, waitingFor: request) }
            return .failed(code, operation)
        case .outcome(let outcome): return .outcome(outcome)
        case .next: preconditionFailure("CarryPlayback.carry returned a player it carries next")
        }
    }
}
