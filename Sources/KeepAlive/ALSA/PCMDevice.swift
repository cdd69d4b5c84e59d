import CALSA
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One open ALSA playback PCM, non-blocking. Confined to the playback thread that opened it.
///
/// ``close()`` releases the device at once (a lost device is closed before the engine waits to
/// reopen it, so a hardware device is free for others meanwhile); deinit closes it if still open.
final class PCMDevice {
    let name: String
    private var handle: OpaquePointer?

    /// Opens `name` for playback without blocking (a busy device fails at once with EBUSY
    /// instead of hanging the thread that must stay responsive to stop).
    init(name: String) throws(ALSAError) {
        calsa_silence_library_errors()
        var pcm: OpaquePointer?
        let result = snd_pcm_open(&pcm, name, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK)
        guard result >= 0, let pcm else { throw ALSAError(code: result < 0 ? result : -EINVAL, operation: "open") }
        self.name = name
        self.handle = pcm
    }

    deinit { close() }

    /// Closes the device; later calls do nothing.
    func close() {
        guard let handle else { return }
        self.handle = nil
        snd_pcm_close(handle)
    }

    /// The open handle. Every operation below runs between init and close on the one thread.
    private var pcm: OpaquePointer {
        guard let handle else { preconditionFailure("PCM \(name) used after close") }
        return handle
    }

    /// Negotiates the format nearest to `preferred` and a buffer of about `bufferMicroseconds`
    /// split in `periods`, then sets the start threshold to the full buffer and the wakeup
    /// threshold to one period.
    func configure(preferred: SampleFormat, rate: Int, channels: Int, bufferMicroseconds: Int, periods: Int) throws(ALSAError) -> OutputFormat {
        var config = calsa_hw_config(
            format: preferred.alsaFormat, rate: UInt32(rate), channels: UInt32(channels),
            buffer_time_us: UInt32(bufferMicroseconds), periods: UInt32(periods), buffer_frames: 0, period_frames: 0)
        var result = calsa_pcm_configure_hardware(pcm, &config)
        guard result >= 0 else { throw ALSAError(code: result, operation: "hw_params") }
        guard let format = SampleFormat(alsaFormat: config.format) else {
            throw ALSAError(code: -EINVAL, operation: "hw_params (no supported sample format)")
        }
        let buffer = Int(config.buffer_frames)
        let period = max(1, Int(config.period_frames))
        result = calsa_pcm_configure_software(pcm, snd_pcm_uframes_t(buffer), snd_pcm_uframes_t(period))
        guard result >= 0 else { throw ALSAError(code: result, operation: "sw_params") }
        return OutputFormat(sampleFormat: format, sampleRate: Int(config.rate), channels: Int(config.channels),
                            bufferFrames: buffer, periodFrames: period)
    }

    /// The descriptors to poll for writability; the array is made once per open.
    func pollDescriptors() throws(ALSAError) -> [pollfd] {
        let count = snd_pcm_poll_descriptors_count(pcm)
        guard count > 0 else { throw ALSAError(code: count < 0 ? count : -EINVAL, operation: "poll_descriptors_count") }
        var fds = [pollfd](repeating: pollfd(), count: Int(count))
        let filled = fds.withUnsafeMutableBufferPointer { snd_pcm_poll_descriptors(pcm, $0.baseAddress, UInt32(count)) }
        guard filled >= 0 else { throw ALSAError(code: filled, operation: "poll_descriptors") }
        return fds
    }

    /// Fills `fds` again in place (no allocation); plug-ins may change what they poll on.
    func refreshPollDescriptors(_ fds: UnsafeMutablePointer<pollfd>, count: Int) {
        _ = snd_pcm_poll_descriptors(handle, fds, UInt32(count))
    }

    /// Translates what poll reported on the descriptors into PCM events (plug-ins such as pulse
    /// use private descriptors whose raw events mean nothing on their own).
    func revents(_ fds: UnsafeMutablePointer<pollfd>, count: Int) -> Int32 {
        var events: UInt16 = 0
        let result = snd_pcm_poll_descriptors_revents(pcm, fds, UInt32(count), &events)
        return result < 0 ? result : Int32(events)
    }

    /// Frames that can be written now, or a negative errno value.
    func available() -> Int { Int(snd_pcm_avail_update(pcm)) }

    /// Writes up to `frames` frames from `pointer`; returns frames written or a negative errno.
    func write(_ pointer: UnsafeRawPointer, frames: Int) -> Int {
        Int(snd_pcm_writei(pcm, pointer, snd_pcm_uframes_t(frames)))
    }

    var state: snd_pcm_state_t { snd_pcm_state(pcm) }

    func start() -> Int32 { snd_pcm_start(pcm) }
    /// Empties the buffer and makes the stream ready to start again (after an underrun, or a
    /// suspend the device cannot resume from).
    func prepare() -> Int32 { snd_pcm_prepare(pcm) }
    /// Continues a suspended stream where it stopped; `-EAGAIN` while the device is still waking,
    /// `-ENOSYS` when it cannot resume.
    func resume() -> Int32 { snd_pcm_resume(pcm) }
    /// Stops at once, discarding what is queued: a keep-alive never drains.
    func drop() { snd_pcm_drop(pcm) }
}
