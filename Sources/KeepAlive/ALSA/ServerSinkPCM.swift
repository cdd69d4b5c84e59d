import CALSA
import CKeepAlivePulse
import CKeepAliveLinux
import Glibc

/// The PCM of a sound server's sink, built in this process: an ALSA external PCM (alsa-lib's
/// ioplug) whose frames go into a libpulse stream of keepalived's own. The engine plays to it as
/// to any other PCM, through the same calls.
///
/// Why not ALSA's pulse plug-in (`pulse:DEVICE=…`), which it replaces: the plug-in asks the
/// server for a timing update every 1.5 s, for `snd_pcm_delay`, which a keep-alive never calls.
/// Each costs its thread two wakeups and the server a round trip: most of what a sink output
/// cost, and more than tuned aplay (BENCHMARKS.md, "Sink outputs"). This stream asks for nothing
/// but the server's requests for more.
///
/// Otherwise it answers as the plug-in does, so that recovery sees the same errors: a server
/// that cannot be reached fails the open (`ECONNREFUSED`); a stream the server ends, or a
/// connection it drops, fails the next call (`EIO`) and makes the descriptor readable; a stream
/// the server ran dry reports an underrun (`EPIPE`), and `snd_pcm_prepare` makes a new one.
///
/// ```swift
/// guard let pcm = try ServerSinkPCM.open(sink: "alsa_output.pci-0000_00_1f.3.hdmi-stereo") else {
///     return   // no libpulse: open "pulse:DEVICE=…" through the plug-in instead
/// }
/// ```
///
/// Every such PCM in the process plays on the one ``SoundServerConnection``: its stream is all a
/// sink adds, not a libpulse thread or a connection of its own.
///
/// Concurrency: ALSA calls the callbacks on the thread that uses the PCM; each takes the main
/// loop's lock. libpulse calls its own on the main loop's thread, with the lock held.
final class ServerSinkPCM {
    private let connection: SoundServerConnection
    private let sink: String
    /// Readable while the stream can take a period, or has failed: what a poll on the PCM sees.
    private let wakeup: Int32
    private var readable = false
    private var stream: OpaquePointer?
    /// Lets a user's stream on the sink have its own rate (PipeWire), while the stream is ready.
    private var rateFollower: SinkRateFollower?
    private var io: UnsafeMutablePointer<snd_pcm_ioplug_t>?
    private var position = ServerStreamPosition(bufferFrames: 2)
    private var frameBytes = 1
    private var format = Int32(CPULSE_FORMAT_S16LE)
    private var target: UInt32 = 0
    private var request: UInt32 = 0
    /// Set by the software parameters' start threshold; until then, all of the buffer but a period.
    private var prebuffer: UInt32?
    /// Bytes queued since the stream was made: an underflow the server reports before this index
    /// is one the stream has already written past.
    private var written: Int64 = 0
    private var underrun = false

    /// The PCM's name in alsa-lib's dumps and errors.
    static let pluginName = "keepalived sound server stream"
    /// PulseAudio's name for the default sink: a stream for it follows the default.
    static let defaultSink = "@DEFAULT_SINK@"

    /// Opens a PCM that plays into `sink` on the sound server this process reaches (libpulse's
    /// default: `PULSE_SERVER`, the user's runtime directory), never starting a server. Returns
    /// nil when libpulse cannot be loaded.
    ///
    /// - Throws: ``ALSAError`` `ECONNREFUSED` when no server answers.
    static func open(sink: String) throws(ALSAError) -> OpaquePointer? {
        let connection: SoundServerConnection
        do {
            connection = try SoundServerConnection.acquire()
        } catch .libraryMissing {
            return nil
        } catch {
            throw ALSAError(code: -EAGAIN, operation: "open")
        }
        let wakeup = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeup >= 0 else {
            let code = -errno
            connection.release()
            throw ALSAError(code: code, operation: "open")
        }
        let pcm = ServerSinkPCM(connection: connection, sink: sink, wakeup: wakeup)
        do {
            try pcm.connect()
            return try pcm.makePCM()
        } catch {
            pcm.shutDown()
            throw error
        }
    }

    private init(connection: SoundServerConnection, sink: String, wakeup: Int32) {
        self.connection = connection
        self.sink = sink
        self.wakeup = wakeup
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> ServerSinkPCM {
        Unmanaged<ServerSinkPCM>.fromOpaque(userdata!).takeUnretainedValue()
    }

    private static func from(_ io: UnsafeMutablePointer<snd_pcm_ioplug_t>?) -> ServerSinkPCM {
        from(io!.pointee.private_data)
    }

    /// The process's connection, ready: made now if it is not there or was lost, without
    /// waiting for a watcher's backoff.
    private func connect() throws(ALSAError) {
        connection.lock()
        defer { connection.unlock() }
        connection.connectIfNeeded()
        while connection.isConnecting { connection.wait() }
        guard connection.isReady else { throw ALSAError(code: -ECONNREFUSED, operation: "open") }
    }

    private func makePCM() throws(ALSAError) -> OpaquePointer {
        let io = UnsafeMutablePointer<snd_pcm_ioplug_t>.allocate(capacity: 1)
        io.initialize(to: snd_pcm_ioplug_t())
        io.pointee.version = calsa_ioplug_version()
        io.pointee.name = UnsafePointer(strdup(Self.pluginName))
        io.pointee.poll_fd = wakeup
        io.pointee.poll_events = UInt32(POLLIN)
        io.pointee.mmap_rw = 0
        io.pointee.callback = UnsafePointer(Self.callbacks)
        // Released by the close callback, which alsa-lib calls from snd_pcm_close.
        io.pointee.private_data = Unmanaged.passRetained(self).toOpaque()
        let created = snd_pcm_ioplug_create(io, Self.pluginName, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK)
        guard created >= 0, let pcm = io.pointee.pcm else {
            Unmanaged<ServerSinkPCM>.fromOpaque(io.pointee.private_data).release()
            free(UnsafeMutableRawPointer(mutating: io.pointee.name))
            io.deallocate()
            throw ALSAError(code: created < 0 ? created : -ENOMEM, operation: "open")
        }
        self.io = io
        let constrained = Self.constrain(io)
        guard constrained >= 0 else {
            snd_pcm_close(pcm)
            throw ALSAError(code: constrained, operation: "open")
        }
        return pcm
    }

    /// What the stream can carry: the formats the engine plays, in the ranges the plug-in
    /// allows. At least four periods: a server grants room a period at a time, so up to a period
    /// it played is not room yet, and a write of half the buffer must still leave more than a
    /// period queued (three, written two at a time, left pipewire-pulse nothing at a write that
    /// just missed a grant: StreamPacer).
    private static func constrain(_ io: UnsafeMutablePointer<snd_pcm_ioplug_t>) -> Int32 {
        let access = [UInt32(SND_PCM_ACCESS_RW_INTERLEAVED.rawValue)]
        let formats = [SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_S32_LE, SND_PCM_FORMAT_FLOAT_LE, SND_PCM_FORMAT_S24_LE,
                       SND_PCM_FORMAT_S24_3LE, SND_PCM_FORMAT_U8].map { UInt32(bitPattern: $0.rawValue) }
        var result = snd_pcm_ioplug_set_param_list(io, Int32(SND_PCM_IOPLUG_HW_ACCESS), UInt32(access.count), access)
        if result >= 0 { result = snd_pcm_ioplug_set_param_list(io, Int32(SND_PCM_IOPLUG_HW_FORMAT), UInt32(formats.count), formats) }
        if result >= 0 { result = snd_pcm_ioplug_set_param_minmax(io, Int32(SND_PCM_IOPLUG_HW_CHANNELS), 1, 32) }
        if result >= 0 { result = snd_pcm_ioplug_set_param_minmax(io, Int32(SND_PCM_IOPLUG_HW_RATE), 1, 384_000) }
        if result >= 0 { result = snd_pcm_ioplug_set_param_minmax(io, Int32(SND_PCM_IOPLUG_HW_BUFFER_BYTES), 1, 4 * 1024 * 1024) }
        if result >= 0 { result = snd_pcm_ioplug_set_param_minmax(io, Int32(SND_PCM_IOPLUG_HW_PERIOD_BYTES), 128, 2 * 1024 * 1024) }
        if result >= 0 { result = snd_pcm_ioplug_set_param_minmax(io, Int32(SND_PCM_IOPLUG_HW_PERIODS), 4, 1024) }
        return result
    }

    private var isShutDown = false

    /// Lets go of its stream and of the connection (the last PCM or watcher to let go of it
    /// stops its thread); the last thing the PCM does. Once only: a PCM closed while it was
    /// being made comes here from its close callback first.
    private func shutDown() {
        guard !isShutDown else { return }
        isShutDown = true
        connection.lock()
        releaseStream()
        connection.unlock()
        connection.release()
        Glibc.close(wakeup)
    }

    // MARK: - On the main loop's thread

    /// The stream changed state: a waiting prepare looks again, and a failure wakes whoever
    /// polls the PCM. A lost connection fails its streams, so it comes here too.
    private func changed() {
        if let stream, Int(cpulse_stream_state(stream)) >= Int(CPULSE_FAILED) { setReadable(true) }
        connection.signal()
    }

    private func requested() {
        _ = updateReadable()
    }

    private func underflowed() {
        guard let stream else { return }
        if written <= cpulse_stream_underflow_index(stream) {
            underrun = true
            setReadable(true)
        }
    }

    // MARK: - With the main loop locked

    private func setReadable(_ wanted: Bool) {
        guard wanted != readable else { return }
        readable = wanted
        var value: UInt64 = 1
        if wanted { _ = Glibc.write(wakeup, &value, 8) } else { _ = Glibc.read(wakeup, &value, 8) }
    }

    /// 0 while the connection and the stream are ready, else the error the plug-in reports.
    private func check() -> Int32 {
        guard connection.isReady else { return -EIO }
        guard let stream else { return -EBADFD }
        return Int(cpulse_stream_state(stream)) == Int(CPULSE_READY) ? 0 : -EIO
    }

    /// Whether the stream takes a period now (1), not (0), or the error; the descriptor follows.
    private func updateReadable() -> Int32 {
        var result = check()
        if result == 0, let stream {
            let writable = cpulse_stream_writable(stream)
            result = writable < 0 ? -EIO : writable >= Int64(request) ? 1 : 0
        }
        setReadable(result != 0 || underrun)
        return result
    }

    /// Follows what the server takes now; false when the stream cannot say.
    private func updatePosition() -> Bool {
        guard let stream else { return false }
        let writable = cpulse_stream_writable(stream)
        guard writable >= 0 else { return false }
        position.update(writable: Int(writable) / frameBytes)
        return true
    }

    private func releaseStream() {
        guard let stream else { return }
        if let rateFollower {
            rateFollower.retire()
            connection.remove(rateFollower)
        }
        rateFollower = nil
        cpulse_stream_release(stream)
        self.stream = nil
    }

    // MARK: - ALSA's callbacks, on the thread that uses the PCM

    private func locked<T>(_ body: () -> T) -> T {
        connection.lock()
        defer { connection.unlock() }
        return body()
    }

    private func hwParams(_ io: snd_pcm_ioplug_t) -> Int32 {
        guard let format = Self.format(io.format) else { return -EINVAL }
        return locked {
            self.format = format
            frameBytes = Int(snd_pcm_format_physical_width(io.format)) * Int(io.channels) / 8
            target = UInt32(Int(io.buffer_size) * frameBytes)
            request = UInt32(Int(io.period_size) * frameBytes)
            if prebuffer == nil { prebuffer = UInt32(Int(io.buffer_size - io.period_size) * frameBytes) }
            return 0
        }
    }

    private func swParams(_ io: snd_pcm_ioplug_t, _ params: OpaquePointer?) -> Int32 {
        var start: snd_pcm_uframes_t = 0
        snd_pcm_sw_params_get_start_threshold(params, &start)
        return locked {
            // At least a period: a server starts no stream on less.
            prebuffer = UInt32(Int(max(start, io.period_size)) * frameBytes)
            return 0
        }
    }

    /// A new stream: the buffer starts empty, as a prepared PCM's does.
    private func prepare(_ io: snd_pcm_ioplug_t) -> Int32 {
        locked {
            releaseStream()
            underrun = false
            written = 0
            guard connection.isReady, let context = connection.context else { return -EIO }
            // Named for its sink, so the sink watcher knows where it belongs even when the
            // server moved it before it was first listed.
            let home = sink == Self.defaultSink ? nil : sink
            guard let stream = cpulse_stream_new(
                context, "keep-alive", home, format, io.rate, UInt8(io.channels),
                { ServerSinkPCM.from($0).changed() }, { ServerSinkPCM.from($0).requested() },
                { ServerSinkPCM.from($0).underflowed() }, userdata)
            else { return -ENOMEM }
            self.stream = stream
            // No sink named: the server routes the stream to its default sink, and moves it
            // when the default changes, as it does the pulse plug-in's stream.
            let connected = sink == Self.defaultSink
                ? cpulse_stream_connect(stream, nil, target, prebuffer ?? target, request)
                : cpulse_stream_connect(stream, sink, target, prebuffer ?? target, request)
            guard connected >= 0 else {
                releaseStream()
                return -EIO
            }
            while Int(cpulse_stream_state(stream)) == Int(CPULSE_CONNECTING), connection.isReady {
                connection.wait()
            }
            guard check() == 0 else {
                releaseStream()
                return -EIO
            }
            let follower = SinkRateFollower(connection: connection, stream: stream)
            rateFollower = follower
            connection.add(follower)
            position = ServerStreamPosition(bufferFrames: max(Int(io.buffer_size), 2))
            _ = updatePosition()
            _ = updateReadable()
            return 0
        }
    }

    private func start() -> Int32 {
        locked {
            let result = check()
            guard result == 0, let stream else { return result }
            underrun = false
            return cpulse_stream_start(stream) < 0 ? -EIO : 0
        }
    }

    private func stop() -> Int32 {
        locked {
            let result = check()
            guard result == 0, let stream else { return result }
            return cpulse_stream_stop(stream) < 0 ? -EIO : 0
        }
    }

    private func pointer(_ io: snd_pcm_ioplug_t) -> snd_pcm_sframes_t {
        if io.state == SND_PCM_STATE_XRUN { return -snd_pcm_sframes_t(EPIPE) }
        guard io.state == SND_PCM_STATE_RUNNING else { return 0 }
        return locked {
            let result = check()
            guard result == 0 else { return snd_pcm_sframes_t(result) }
            guard !underrun, updatePosition() else { return -snd_pcm_sframes_t(EPIPE) }
            return snd_pcm_sframes_t(position.frames)
        }
    }

    private func transfer(_ areas: UnsafePointer<snd_pcm_channel_area_t>, offset: snd_pcm_uframes_t, size: snd_pcm_uframes_t) -> snd_pcm_sframes_t {
        let area = areas.pointee
        let bytes = Int(size) * frameBytes
        let data = area.addr.advanced(by: Int((UInt(area.first) + UInt(area.step) * UInt(offset)) / 8))
        return locked {
            let result = check()
            guard result == 0, let stream else { return snd_pcm_sframes_t(result) }
            guard updatePosition() else { return -snd_pcm_sframes_t(EIO) }
            guard cpulse_stream_write(stream, data, bytes) >= 0 else { return -snd_pcm_sframes_t(EIO) }
            position.wrote(Int(size))
            written += Int64(bytes)
            guard updatePosition() else { return -snd_pcm_sframes_t(EIO) }
            let active = updateReadable()
            return active < 0 ? snd_pcm_sframes_t(active) : snd_pcm_sframes_t(size)
        }
    }

    private func pollRevents(_ revents: UnsafeMutablePointer<UInt16>?) -> Int32 {
        locked {
            let active = updateReadable()
            guard active >= 0 else { return active }
            revents?.pointee = active > 0 ? UInt16(POLLOUT) : 0
            return 0
        }
    }

    /// alsa-lib's snd_pcm_close: nothing of this PCM is used afterwards.
    private func close(_ io: UnsafeMutablePointer<snd_pcm_ioplug_t>) -> Int32 {
        shutDown()
        free(UnsafeMutableRawPointer(mutating: io.pointee.name))
        self.io = nil
        io.deallocate()
        Unmanaged.passUnretained(self).release()
        return 0
    }

    private static func format(_ format: snd_pcm_format_t) -> Int32? {
        switch format {
        case SND_PCM_FORMAT_U8: Int32(CPULSE_FORMAT_U8)
        case SND_PCM_FORMAT_S16_LE: Int32(CPULSE_FORMAT_S16LE)
        case SND_PCM_FORMAT_S32_LE: Int32(CPULSE_FORMAT_S32LE)
        case SND_PCM_FORMAT_FLOAT_LE: Int32(CPULSE_FORMAT_FLOAT32LE)
        case SND_PCM_FORMAT_S24_3LE: Int32(CPULSE_FORMAT_S24LE)
        case SND_PCM_FORMAT_S24_LE: Int32(CPULSE_FORMAT_S24_32LE)
        default: nil
        }
    }

    /// The callbacks every such PCM shares; alsa-lib keeps the pointer.
    nonisolated(unsafe) private static let callbacks: UnsafeMutablePointer<snd_pcm_ioplug_callback_t> = {
        var table = snd_pcm_ioplug_callback_t()
        table.start = { ServerSinkPCM.from($0).start() }
        table.stop = { ServerSinkPCM.from($0).stop() }
        table.pointer = { ServerSinkPCM.from($0).pointer($0!.pointee) }
        table.transfer = { io, areas, offset, size in ServerSinkPCM.from(io).transfer(areas!, offset: offset, size: size) }
        table.close = { ServerSinkPCM.from($0).close($0!) }
        table.hw_params = { io, _ in ServerSinkPCM.from(io).hwParams(io!.pointee) }
        table.sw_params = { io, params in ServerSinkPCM.from(io).swParams(io!.pointee, params) }
        table.prepare = { ServerSinkPCM.from($0).prepare($0!.pointee) }
        table.poll_revents = { io, _, _, revents in ServerSinkPCM.from(io).pollRevents(revents) }
        let pointer = UnsafeMutablePointer<snd_pcm_ioplug_callback_t>.allocate(capacity: 1)
        pointer.initialize(to: table)
        return pointer
    }()
}
