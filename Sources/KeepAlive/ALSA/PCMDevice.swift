import CALSA
import Glibc

/// One open ALSA playback PCM, non-blocking. Confined to the playback thread that opened it.
///
/// ``close()`` releases the device at once (a lost device is closed before the engine waits to
/// reopen it, so a hardware device is free for others meanwhile); deinit closes it if still open.
final class PCMDevice {
    let name: String
    private var handle: OpaquePointer?
    /// Where positions wrap (the software parameters' boundary), once configured.
    private(set) var boundary = 0

    /// Opens `name` for playback without blocking (a busy device fails at once with EBUSY
    /// instead of hanging the thread that must stay responsive to stop).
    ///
    /// For a sound server's sink (`serverSink`), the PCM is keepalived's own stream into it
    /// (``ServerSinkPCM``), and `name` (ALSA's pulse plug-in for the same sink) is opened only
    /// when libpulse cannot be loaded.
    init(name: String, serverSink: String? = nil) throws(ALSAError) {
        if let serverSink, let pcm = try ServerSinkPCM.open(sink: serverSink) {
            self.name = name
            self.handle = pcm
            return
        }
        var pcm: OpaquePointer?
        // `name` stays the output's name everywhere else (status, the log, a player's release).
        let result = snd_pcm_open(&pcm, PCMOpenName.forOpening(name), SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK)
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

    /// Starts settling the hardware parameters: format, rate and channels now, the buffer when
    /// the caller knows how it will play.
    func negotiate(format: SampleFormat, rate: Int, channels: Int) throws(ALSAError) -> HardwareNegotiation {
        try HardwareNegotiation(pcm: pcm, format: format, rate: rate, channels: channels)
    }

    /// What the PCM is built of (is there a ring the hardware replays on its own?).
    var chain: PCMChain { PCMChain(pcm: pcm) }

    /// The card device this open handle plays to, whatever its name: `snd_pcm_info` of the
    /// handle (a plug or hooks chain answers with its slave's), else the hardware layer of
    /// `chain` (dmix answers with no card). Nil for a sound server's stream, a file, null.
    func hardwareDevice(chain: PCMChain) -> HardwareDevice? {
        var allocated: OpaquePointer?
        if snd_pcm_info_malloc(&allocated) == 0, let info = allocated {
            defer { snd_pcm_info_free(info) }
            if snd_pcm_info(pcm, info) == 0, snd_pcm_info_get_card(info) >= 0 {
                return HardwareDevice(card: Int(snd_pcm_info_get_card(info)), device: Int(snd_pcm_info_get_device(info)))
            }
        }
        return chain.hardware
    }

    /// Streaming: the device starts once `startThreshold` frames are queued, and its descriptors
    /// would signal once `wakeThreshold` frames are free.
    func configureStreaming(startThreshold: Int, wakeThreshold: Int) throws(ALSAError) {
        try configureSoftware { pcm, params, _ in
            var result = snd_pcm_sw_params_set_start_threshold(pcm, params, snd_pcm_uframes_t(startThreshold))
            if result >= 0 { result = snd_pcm_sw_params_set_avail_min(pcm, params, snd_pcm_uframes_t(wakeThreshold)) }
            return result
        }
    }

    /// The ring loop: the stream never stops by itself (stop threshold at the boundary, as
    /// alsa-lib documents for an endless loop) and the kernel never writes silence into what it
    /// played (silence threshold and size 0), so the hardware replays the ring for ever. It
    /// starts only when asked (``start()`` after the ring is full).
    func configureRingLoop(bufferFrames: Int) throws(ALSAError) {
        try configureSoftware { pcm, params, boundary in
            var result = snd_pcm_sw_params_set_start_threshold(pcm, params, boundary)
            if result >= 0 { result = snd_pcm_sw_params_set_stop_threshold(pcm, params, boundary) }
            if result >= 0 { result = snd_pcm_sw_params_set_silence_threshold(pcm, params, 0) }
            if result >= 0 { result = snd_pcm_sw_params_set_silence_size(pcm, params, 0) }
            if result >= 0 { result = snd_pcm_sw_params_set_avail_min(pcm, params, snd_pcm_uframes_t(bufferFrames)) }
            return result
        }
    }

    /// Carrying a player: the stream stops with an underrun once everything written has played
    /// (the stop threshold at the buffer's size), and the kernel writes digital zero over what
    /// has played at each look at the position (silence threshold 0, size the boundary), so
    /// that a keepalived that is not scheduled never lets the hardware replay a player's audio
    /// from its ring. The kernel finds the underrun only when it looks: at the next period
    /// interrupt (snd-aloop's 2 s periods); until then the card plays what its ring holds past
    /// the last frame written, which was, once the ring went round under a play, that play's
    /// own older frames (seen in carry-chaos: 1.55 s of them again). ``stopSilencing()`` ends
    /// the silence, ``configureRingLoop(bufferFrames:)`` sets the endless replay back.
    func stopWhenDrained(bufferFrames: Int) throws(ALSAError) {
        try configureSoftware { pcm, params, boundary in
            var result = snd_pcm_sw_params_set_stop_threshold(pcm, params, snd_pcm_uframes_t(bufferFrames))
            if result >= 0 { result = snd_pcm_sw_params_set_silence_threshold(pcm, params, 0) }
            if result >= 0 { result = snd_pcm_sw_params_set_silence_size(pcm, params, boundary) }
            return result
        }
    }

    /// The kernel stops writing silence over what has played (``stopWhenDrained(bufferFrames:)``):
    /// before a ring is filled to be replayed, so that no frame of it is zeroed once written.
    func stopSilencing() throws(ALSAError) {
        try configureSoftware { pcm, params, _ in snd_pcm_sw_params_set_silence_size(pcm, params, 0) }
    }

    /// Moves the write position `frames` on without writing: what the ring holds there plays.
    /// Returns the frames moved, or a negative errno.
    func forward(_ frames: Int) -> Int { frames > 0 ? Int(snd_pcm_forward(pcm, snd_pcm_uframes_t(frames))) : 0 }

    /// Takes back up to `frames` queued frames (they are written again or replaced); returns the
    /// frames taken back, or a negative errno.
    func rewind(_ frames: Int) -> Int { frames > 0 ? Int(snd_pcm_rewind(pcm, snd_pcm_uframes_t(frames))) : 0 }

    /// Takes back up to `frames` queued frames, but never so many that fewer than `lead` stay
    /// ahead of the card's position as the driver reports it now (the position is read again
    /// first: a figure from before a wakeup's work is already behind); returns the frames taken
    /// back, or a negative errno.
    func rewind(_ frames: Int, keeping lead: Int) -> Int {
        guard frames > 0 else { return 0 }
        // snd_pcm_avail syncs the position with the driver; snd_pcm_rewindable alone reads the
        // last one seen, which on a card without period interrupts may be a ring old.
        let synced = snd_pcm_avail(pcm)
        if synced < 0 { return Int(synced) }
        let rewindable = Int(snd_pcm_rewindable(pcm))
        if rewindable < 0 { return rewindable }
        return rewind(min(frames, max(0, rewindable - lead)))
    }

    /// What the hardware parameters allow on this handle's device, whatever is set now.
    func capabilities() -> PCMCapabilities? { PCMCapabilities(pcm: pcm) }

    private func configureSoftware(
        _ body: (OpaquePointer, OpaquePointer, snd_pcm_uframes_t) -> Int32
    ) throws(ALSAError) {
        var allocated: OpaquePointer?
        guard snd_pcm_sw_params_malloc(&allocated) == 0, let params = allocated else { throw ALSAError(code: -ENOMEM, operation: "sw_params") }
        defer { snd_pcm_sw_params_free(params) }
        var result = snd_pcm_sw_params_current(pcm, params)
        guard result >= 0 else { throw ALSAError(code: result, operation: "sw_params") }
        var boundary = snd_pcm_uframes_t(0)
        snd_pcm_sw_params_get_boundary(params, &boundary)
        self.boundary = Int(clamping: boundary)
        result = body(pcm, params, boundary)
        if result >= 0 { result = snd_pcm_sw_params(pcm, params) }
        guard result >= 0 else { throw ALSAError(code: result, operation: "sw_params") }
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

    /// Frames that can be written now, from the device's current position (a hardware device is
    /// asked where its pointer is, not told what the last interrupt said), or a negative errno.
    func available() -> Int { Int(snd_pcm_avail(pcm)) }

    /// ``available()`` and the frames until a frame written now is heard, read together: what
    /// the buffer holds and the card's own delay past it (a USB card's packets in flight, a
    /// codec's FIFO: the kernel's `runtime->delay`); nil on an error.
    func availableAndDelay() -> (available: Int, delay: Int)? {
        var available: snd_pcm_sframes_t = 0
        var delay: snd_pcm_sframes_t = 0
        guard snd_pcm_avail_delay(pcm, &available, &delay) == 0 else { return nil }
        return (Int(available), Int(delay))
    }

    /// Writes up to `frames` frames from `pointer`; returns frames written or a negative errno.
    func write(_ pointer: UnsafeRawPointer, frames: Int) -> Int {
        Int(snd_pcm_writei(pcm, pointer, snd_pcm_uframes_t(frames)))
    }

    var state: snd_pcm_state_t { snd_pcm_state(pcm) }

    /// A count that grows with every frame the device plays while nothing is written (in a ring
    /// loop: the free space, which wraps at ``boundary``); nil when the device cannot say.
    var playedPosition: Int? {
        let available = snd_pcm_avail(pcm)
        return available >= 0 ? Int(available) : nil
    }

    /// Frames played between two ``playedPosition`` readings.
    func framesPlayed(from before: Int, to after: Int) -> Int {
        guard boundary > 0 else { return after - before }
        return ((after - before) % boundary + boundary) % boundary
    }

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

extension PCMDevice {
    /// Turns what poll reported on this PCM's descriptors into the stream error it stands for;
    /// nil when there is none.
    func streamError(fromEvents events: Int32) -> Int32? {
        if events < 0 { return events }
        guard events & Int32(POLLERR | POLLHUP | POLLNVAL) != 0 else { return nil }
        switch state {
        case SND_PCM_STATE_XRUN: return -EPIPE
        case SND_PCM_STATE_SUSPENDED: return -ESTRPIPE
        case SND_PCM_STATE_DISCONNECTED: return -ENODEV
        case SND_PCM_STATE_OPEN, SND_PCM_STATE_SETUP: return -EBADFD
        default: return events & Int32(POLLHUP) != 0 ? -ENOTCONN : -EIO
        }
    }
}
