import CALSA
import CKeepalivedCarry
import Glibc

/// Carries a player's audio on the output's open stream: the card is never stopped, closed or
/// prepared for it. Entered from the ring loop or the stream when the control socket hands the
/// playback thread a ``CarriedPlayer``; returns when the player is gone (the output's own mode
/// then goes on), or with the outcome that ends the open (a stop, a fault, the player's format,
/// which needs the device opened again once). Every decision is the ``CarryStateMachine``'s.
///
/// ```swift
/// let player = CarriedPlayer(connection: 9, program: "mpd", pid: 812, parseFormat: { _ in nil })
/// var carrying = CarryPlayback(pcm: pcm, format: format, source: source)
/// if case .playerGone = carrying.carry(player, answering: nil, ringLoop: true, in: loop) { print("the ring loop goes on") }
/// ```
struct CarryPlayback {
    let pcm: PCMDevice
    let format: OutputFormat
    var source: any FrameSource
    /// Whether the last step copied a sample above silence (``SampleSilence``).
    private var heardSound = false

    init(pcm: PCMDevice, format: OutputFormat, source: any FrameSource) {
        self.pcm = pcm
        self.format = format
        self.source = source
    }

    enum Ending {
        /// The player closed its PCM: the output's own mode goes on (a ring loop's ring is whole again).
        case playerGone
        /// A format the open stream is not in: opened again in it, the player kept waiting.
        case switchFormat(CarriedFormat)
        /// The player is gone and `next` came for the device meanwhile: carried next, on the same
        /// stream (the caller only starts it again).
        case next(CarriedPlayer)
        /// A stream error (`operation` failed with `code`): the output's own mode repairs the
        /// stream as it repairs its own. A player that had no memory yet (its format unanswered)
        /// is `kept`, with the request it waits on, to be carried once the stream plays again;
        /// one whose frames were carried has its stream end with the error.
        case failed(Int32, String, kept: (CarriedPlayer, CarriedFormat?)?)
        case outcome(PlaybackOutcome)
    }

    /// Whether `format` is the one this stream runs at (then the player is carried without a break).
    static func runs(_ format: OutputFormat, as player: CarriedFormat) -> Bool {
        format.framing == .linear && Int32(format.sampleFormat.alsaFormat.rawValue) == player.alsaFormat
            && format.sampleRate == player.rate && format.channels == player.channels
    }

    mutating func carry(_ player: CarriedPlayer, answering request: CarriedFormat?, ringLoop: Bool, in context: some PlaybackContext) -> Ending {
        var player = player
        var request = request
        var ending: Ending
        while true {
            player.owner.claim()
            ending = carrying(player, answering: request, ringLoop: ringLoop, in: context)
            guard case .next(let next) = ending else { break }
            (player, request) = (next, nil)
        }
        // A ring loop repairs its stream as its own: with its endless replay set back first.
        if ringLoop, case .failed = ending { try? pcm.configureRingLoop(bufferFrames: format.bufferFrames) }
        return ending
    }

    private mutating func carrying(_ player: CarriedPlayer, answering request: CarriedFormat?, ringLoop: Bool, in context: some PlaybackContext) -> Ending {
        let buffer = format.bufferFrames
        let levels = CarryStateMachine.Levels(rate: format.sampleRate, bufferFrames: buffer)
        if !player.granted {
            guard let capabilities = context.capabilities, !capabilities.formats.isEmpty else {
                player.reply(CarriedPlayer.refusal("the device's formats cannot be read"))
                return .playerGone
            }
            let bytes = CarryStateMachine.playerBufferBytes(ringFrames: buffer, rate: format.sampleRate, levels: levels,
                                                            capabilities: capabilities, maximum: CarriedFormat.maximumBufferBytes)
            guard bytes > 0, player.reply(CarriedPlayer.grant(capabilities, maximumBufferBytes: bytes)) else { return .playerGone }
            player.granted = true
        }
        // A ring that replays has its write position behind the play position: moved ahead of it
        // over what the ring holds there (the signal, tiled), by the high water, where the loop
        // keeps it (box-mpd: a carry that began at the low water underran under emulation); a
        // player's first frame still goes in right behind the lead (its tail of signal is taken back).
        var available = pcm.available()
        if available > buffer { available -= max(0, pcm.forward(available - buffer + levels.highWater)) }
        do { try pcm.stopWhenDrained(bufferFrames: buffer) } catch { return .outcome(context.lose(.unknown, error.description)) }
        var machine = CarryStateMachine(levels: levels, leadFrames: max(0, buffer - max(available, 0)))
        var clock = CardPositionClock(rate: format.sampleRate)
        var memory: CarryMemory?
        var sound: CarriedSoundStateMachine?
        var request = request
        var fds = [pollfd(fd: context.doorbell.descriptor, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: player.connection, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: -1, events: Int16(POLLIN), revents: 0)]
        context.report(.carrying(program: player.program, pid: player.pid))
        defer { context.report(.carrying(program: nil, pid: 0)) }
        while true {
            let leadInLeft = context.carryLeadInEnds.map { context.clock.now.duration(to: $0) } ?? .zero
            if let format = request, leadInLeft <= .zero {
                request = nil
                guard Self.runs(self.format, as: format) else { return .switchFormat(format) }
                do {
                    let made = try CarryMemory(format: format, frameBytes: self.format.bytesPerFrame)
                    guard player.reply(#"{"ok":true}"#, descriptors: [made.memory, made.kick]) else { return finish(&machine, ringLoop: ringLoop, in: context) }
                    memory = made
                    fds[2].fd = made.kick
                    machine.granted(bufferFrames: format.bufferFrames)
                    if sound == nil { sound = CarriedSoundStateMachine(startingAt: Self.monotonicNanoseconds()) }
                    player.heard(sounding: true)
                    context.report(.carriedSound(true))
                } catch {
                    player.reply(CarriedPlayer.refusal("\(error)"))
                }
            }
            let available = pcm.available()
            if available < 0 { return .failed(Int32(truncatingIfNeeded: available), "avail", kept: memory == nil ? (player, request) : nil) }
            let fill = buffer - available
            switch machine.looked(player: memory?.player(), fill: fill) {
            case .broken(let why):
                context.report(.notice("\(player.program) (pid \(player.pid)): its carried stream ends: \(why)"))
                return finish(&machine, ringLoop: ringLoop, in: context)
            case .step(let step):
                if let failure = perform(step, memory, &machine, in: context) { return .failed(failure, "write", kept: memory == nil ? (player, request) : nil) }
            }
            if var heard = sound {
                let now = Self.monotonicNanoseconds()
                let action = heardSound ? heard.copied(sound: true, at: now) : heard.looked(at: now)
                heardSound = false
                sound = heard
                switch action {
                case .none: break
                case .sounding, .silent:
                    player.heard(sounding: action == .sounding)
                    context.report(.carriedSound(action == .sounding))
                }
            }
            let read = pcm.availableAndDelay()
            let queued = buffer - max(0, read?.available ?? pcm.available())
            let readAt = Self.monotonicNanoseconds()
            let heard = CarryStateMachine.heard(fill: queued, delay: read?.delay, rate: format.sampleRate)
            if let memory, let position = machine.position(fill: heard) {
                // Stamped when the card reaches the player's next frame: the signal ahead of it
                // plays first; the position read is the card's at its last step, not at the read.
                let validAt = clock.validAt(position: machine.cardWritten - Int64(heard), readAt: readAt)
                let stamp = validAt + Int64(position.ahead) * 1_000_000_000 / Int64(format.sampleRate)
                memory.publish(ckeepalived_carry_position(generation: position.generation, played: position.played, queued: position.queued, stamp_ns: stamp))
            }
            var timeout = max(1, machine.framesUntilLook(fill: queued) * 1000 / format.sampleRate)
            if request != nil, leadInLeft > .zero { timeout = min(timeout, max(1, Int(leadInLeft.wholeMilliseconds))) }
            for index in fds.indices { fds[index].revents = 0 }
            if poll(&fds, nfds_t(fds.count), Int32(min(timeout, 1000))) < 0, errno != EINTR { return .outcome(context.lose(.unknown, "poll: \(String(cString: strerror(errno)))")) }
            if fds[0].revents != 0 {
                context.doorbell.drain()
                switch context.pendingRequest(pcm, format) {
                case .stop: return .outcome(.stopped)
                case .end(let outcome): return .outcome(outcome)
                case .writesNothing: return .outcome(.reconfigure)
                case .reloaded(let next): source = next
                case .carry(let other, _):
                    // A player that closed its PCM and opened it again at once (MPD between two
                    // tracks of different formats): its new open may come before the close is
                    // read. Busy only while the carried one is really there.
                    switch player.read() {
                    case .gone:
                        _ = finish(&machine, ringLoop: false, in: context)
                        return .next(other)
                    case .format(let format):
                        request = format
                        other.reply(CarriedPlayer.busy)
                    case .nothing:
                        other.reply(CarriedPlayer.busy)
                    }
                case nil: break
                }
            }
            if fds[2].revents != 0 { memory?.drainKick() }
            if fds[1].revents != 0 {
                switch player.read() {
                case .nothing: break
                case .format(let format): request = format
                case .gone(let why):
                    if let why { context.report(.notice("\(player.program) (pid \(player.pid)): \(why)")) }
                    return finish(&machine, ringLoop: ringLoop, in: context)
                }
            }
        }
    }

    /// Takes back, copies and appends what `step` says; a stream error's code, or nil. Each look
    /// is the thread's heartbeat, written or not.
    private mutating func perform(_ step: CarryStateMachine.Step, _ memory: CarryMemory?, _ machine: inout CarryStateMachine, in context: some PlaybackContext) -> Int32? {
        var written = 0
        defer { context.report(.wrote(written)) }
        let rewound = max(0, pcm.rewind(step.rewind, keeping: machine.levels.minimumLead))
        var copied = 0
        if let memory {
            while copied < step.music {
                let (frames, contiguous) = memory.slice(at: step.musicFrom + UInt64(copied))
                let written = pcm.write(frames, frames: min(contiguous, step.music - copied))
                if written == -Int(EAGAIN) { break }
                if written < 0 {
                    machine.performed(rewound: rewound, music: copied, signal: 0)
                    return Int32(truncatingIfNeeded: written)
                }
                // Once a step is enough: music is heard in its first samples, silence read whole.
                if !heardSound { heardSound = SampleSilence.sounds(frames, samples: written * format.channels, format: format.sampleFormat) }
                copied += written
            }
        }
        var appended = 0
        while appended < step.signal {
            let (frames, chunk) = source.peek(maximum: step.signal - appended)
            let written = pcm.write(frames, frames: chunk)
            if written == -Int(EAGAIN) { break }
            if written < 0 {
                machine.performed(rewound: rewound, music: copied, signal: appended)
                return Int32(truncatingIfNeeded: written)
            }
            source.consume(written)
            appended += written
        }
        machine.performed(rewound: rewound, music: copied, signal: appended)
        written = max(0, copied + appended - rewound)
        if pcm.state == SND_PCM_STATE_PREPARED { _ = pcm.start() }
        return nil
    }

    /// The player is gone: what is queued of its frames goes, the signal follows. A ring loop's
    /// ring is then filled again whole, from a continuous run of the signal, before it replays.
    private mutating func finish(_ machine: inout CarryStateMachine, ringLoop: Bool, in context: some PlaybackContext) -> Ending {
        let buffer = format.bufferFrames
        let step = machine.ended(fill: buffer - max(0, pcm.available()))
        let rewound = max(0, pcm.rewind(step.rewind, keeping: machine.levels.minimumLead))
        _ = rewound
        guard ringLoop else { return .playerGone }
        // What has played was zeroed while carrying: the fill below writes over all of it, and
        // nothing it writes may be zeroed after.
        do { try pcm.stopSilencing() } catch { return .outcome(context.lose(.unknown, error.description)) }
        // Twice: the first fill leaves the lead (which may be the player's) ahead of the play
        // position; once that has played, the second writes over it.
        for pass in 0..<2 {
            if pass == 1, context.doorbell.wait(.milliseconds(Int64(1000 * machine.levels.settle / format.sampleRate + 5))) { return .outcome(.stopped) }
            var room = max(0, pcm.available())
            while room > 0 {
                let (frames, chunk) = source.peek(maximum: room)
                let written = pcm.write(frames, frames: chunk)
                if written == -Int(EAGAIN) { break }
                if written < 0 { return .failed(Int32(truncatingIfNeeded: written), "write", kept: nil) }
                source.consume(written)
                room -= written
            }
        }
        do { try pcm.configureRingLoop(bufferFrames: buffer) } catch { return .outcome(context.lose(.unknown, error.description)) }
        return .playerGone
    }

    static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}
