import CALSA
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension PlaybackLoop {
    /// Open-only: the device is prepared and held, nothing is written. Some HDMI and USB sinks
    /// stay awake while a stream is merely open. The state is looked at once a second (a plug-in
    /// device reports no errors on a stream that never runs).
    func holdOpen(_ pcm: PCMDevice, _ format: OutputFormat) -> Outcome {
        perform(machine.flowing(at: clock.now))
        while true {
            switch doorbell.wait(.seconds(1), orReadable: watcher?.descriptor ?? -1) {
            case .stopped:
                pcm.drop()
                return .stopped
            case .readable:
                let action = machine.sawWhilePlaying(seenWhileOpen(), at: clock.now)
                if action != .none { return perform(action) }
            case .timedOut, .rung:
                break
            }
            report(.wrote(0))
            switch pendingRequest(pcm, format) {
            case .stop: return .stopped
            // Still open-only (another level, say): nothing to change on a stream that writes nothing.
            case .end(.reconfigure) where source == nil: break
            case .end(let outcome): return outcome
            // A signal to write now: open again to play it.
            case .reloaded: return .reconfigure
            case nil: break
            }
            switch pcm.state {
            case SND_PCM_STATE_DISCONNECTED: return lose(.unplugged, "device disconnected while held open")
            case SND_PCM_STATE_SUSPENDED: _ = pcm.prepare()
            default: break
            }
        }
    }
}
