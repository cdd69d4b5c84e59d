import CALSA

/// Open-only: the device is prepared and held, nothing is written. Some HDMI and USB sinks stay
/// awake while a stream is merely open. The state is looked at once a second (a plug-in device
/// reports no errors on a stream that never runs).
///
/// ```swift
/// let outcome = HoldOpenPlayback(pcm: pcm, format: format).play(in: loop)
/// ```
struct HoldOpenPlayback {
    let pcm: PCMDevice
    let format: OutputFormat

    func play(in context: some PlaybackContext) -> PlaybackOutcome {
        context.flowing()
        while true {
            switch context.doorbell.wait(.seconds(1), orReadable: context.watcherDescriptor) {
            case .stopped:
                pcm.drop()
                return .stopped
            case .readable:
                if let outcome = context.sawWhilePlaying() { return outcome }
            case .timedOut, .rung:
                break
            }
            context.report(.wrote(0))
            switch context.pendingRequest(pcm, format) {
            case .stop: return .stopped
            // Still open-only (another level, say): nothing to change on a stream that writes nothing.
            case .writesNothing: break
            case .end(let outcome): return outcome
            // A signal to write now: open again to play it.
            case .reloaded: return .reconfigure
            // Nothing plays to carry a player on.
            case .carry(let player, _): player.reply(CarriedPlayer.refusal("the output holds the device open without playing"))
            case nil: break
            }
            switch pcm.state {
            case SND_PCM_STATE_DISCONNECTED: return context.lose(.unplugged, "device disconnected while held open")
            case SND_PCM_STATE_SUSPENDED: _ = pcm.prepare()
            default: break
            }
        }
    }
}
