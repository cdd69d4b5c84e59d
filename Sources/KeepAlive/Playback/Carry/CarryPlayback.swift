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
        /// A format the open stream is not in: opened again in it, `player` (the one that asked,
        /// which may be a `next` one, not the one carrying began with) kept waiting.
        case switchFormat(CarriedFormat, player: CarriedPlayer)
        /// The player is gone and `next` came for the device meanwhile: carried next, on the same
        /// stream (the caller only starts it again).
        case next(CarriedPlayer)
        /// A stream error (`operation` failed with `code`): the output's own mode repairs the
        /// stream as it repairs its own. The player is `kept`, with the request it waits on, to
        /// be carried once the stream plays again (one whose frames were carried is told of an
        /// underrun meanwhile); nil when it was gone.
        case failed(Int32, String, kept: (CarriedPlayer, CarriedFormat?)?)
        case outcome(PlaybackOutcome)
    }

    /// Whether `format` is the one this stream runs at (then the player is carried without a break).
    static func runs(_ format: OutputFormat, as player: CarriedFormat) -> Bool {
        let alsaFormat = format.framing == .iec958 ? SND_PCM_FORMAT_IEC958_SUBFRAME_LE : format.sampleFormat.alsaFormat
        return Int32(alsaFormat.rawValue) == player.alsaFormat && format.sampleRate == player.rate && format.channels == player.channels
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

    /// One player's carrying on this stream: the decisions, its memory, what it sounds like, the
    /// request it waits on, and the descriptors the loop waits on (the doorbell, the player's
    /// connection, its memory's kick).
    private struct Session {
        let player: CarriedPlayer
        var machine: CarryStateMachine
        var memory: CarryMemory?
        var sound: CarriedSoundStateMachine?
        var request: CarriedFormat?
        var fds: [pollfd]
        /// When the card's position was true at each read (it moves in steps on some cards).
        var clock: CardPositionClock
    }

    private mutating func carrying(_ player: CarriedPlayer, answering request: CarriedFormat?, ringLoop: Bool, in context: some PlaybackContext) -> Ending {
        guard grant(player, in: context) else { return .playerGone }
        var session: Session
        switch enter(player, answering: request, in: context) {
        case .success(let entered): session = entered
        case .failure(let lost): return .outcome(lost.outcome)
        }
        let buffer = format.bufferFrames
        context.report(.carrying(program: player.program, pid: player.pid))
        defer { context.report(.carrying(program: nil, pid: 0)) }
        while true {
            // After an open made for the player's format, its frames wait in its memory for the
            // lead-in (answered at once: a player's hw_params that waited seconds made
            // snapclient drop what came meanwhile); the signal plays in the new format until then.
            let leadInLeft = context.carryLeadInEnds.map { context.clock.now.duration(to: $0) } ?? .zero
            if let format = session.request.take(), let ending = answer(format, &session, ringLoop: ringLoop, in: context) { return ending }
            let available = pcm.available()
            if available < 0 { return failed(Int32(truncatingIfNeeded: available), "avail", session) }
            switch session.machine.looked(player: leadInLeft > .zero ? nil : session.memory?.player(), fill: buffer - available) {
            case .broken(let why):
                context.report(.notice("\(player.program) (pid \(player.pid)): its carried stream ends: \(why)"))
                return finish(&session.machine, ringLoop: ringLoop, in: context)
            case .step(let step):
                if let failure = perform(step, session.memory, &session.machine, in: context) { return failed(failure, "write", session) }
            }
            heard(&session, in: context)
            let read = pcm.availableAndDelay()
            let queued = buffer - max(0, read?.available ?? pcm.available())
            publish(&session, queued: queued, delay: read?.delay, leadIn: leadInLeft)
            var timeout = max(1, session.machine.framesUntilLook(fill: queued) * 1000 / format.sampleRate)
            if leadInLeft > .zero { timeout = min(timeout, max(1, Int(leadInLeft.wholeMilliseconds))) }
            for index in session.fds.indices { session.fds[index].revents = 0 }
            if poll(&session.fds, nfds_t(session.fds.count), Int32(min(timeout, 1000))) < 0, errno != EINTR {
                return .outcome(context.lose(.unknown, "poll: \(String(cString: strerror(errno)))"))
            }
            if let ending = woke(&session, ringLoop: ringLoop, in: context) { return ending }
        }
    }

    /// Tells a player new to this output what it may set (the card's formats, a buffer bound);
    /// false when it cannot be carried here or is gone. A player kept across a reopen was told.
    private func grant(_ player: CarriedPlayer, in context: some PlaybackContext) -> Bool {
        guard !player.granted else { return true }
        guard let capabilities = context.capabilities, !capabilities.formats.isEmpty else {
            player.reply(CarriedPlayer.refusal("the device's formats cannot be read"))
            return false
        }
        let levels = CarryStateMachine.Levels(rate: format.sampleRate, bufferFrames: format.bufferFrames)
        let bytes = CarryStateMachine.playerBufferBytes(ringFrames: format.bufferFrames, rate: format.sampleRate, levels: levels,
                                                        capabilities: capabilities, maximum: CarriedFormat.maximumBufferBytes)
        guard bytes > 0, player.reply(CarriedPlayer.grant(capabilities, maximumBufferBytes: bytes)) else { return false }
        player.granted = true
        return true
    }

    /// The stream set up for carrying: the card stops when what was written has played (never a
    /// replay of the player's frames), the signal queued ahead, the card's blocks counted.
    private mutating func enter(_ player: CarriedPlayer, answering request: CarriedFormat?, in context: some PlaybackContext) -> Result<Session, Lost> {
        let buffer = format.bufferFrames
        let levels = CarryStateMachine.Levels(rate: format.sampleRate, bufferFrames: buffer)
        // A ring that replays has its write position behind the play position: moved ahead of it
        // over what the ring holds there (the signal, tiled), by the high water, where the loop
        // keeps it (box-mpd: a carry that began at the low water underran under emulation); a
        // player's first frame still goes in right behind the lead (its tail of signal is taken back).
        var available = pcm.available()
        var forwarded = 0
        if available > buffer {
            forwarded = max(0, pcm.forward(available - buffer + levels.highWater))
            available -= forwarded
        }
        do { try pcm.stopWhenDrained(bufferFrames: buffer) } catch { return .failure(Lost(outcome: context.lose(.unknown, error.description))) }
        let lead = max(0, buffer - max(available, 0))
        // The signal was written in step with the card since its prepare (a ring of whole
        // blocks, or a stream never taken back): its next frame is the card's next one in a block.
        let block = IEC958Framer.blockFrames
        let blocks = source.frameInBlock.map { next in CarryStateMachine.Blocks(origin: ((next + forwarded - lead) % block + block) % block) }
        var machine = CarryStateMachine(levels: levels, leadFrames: lead, blocks: blocks)
        // A player kept across the stream's repair goes on in its memory, from where it is.
        let memory = player.memory
        if let memory { machine.granted(bufferFrames: memory.bufferFrames, resumingAt: memory.player()) }
        let fds = [pollfd(fd: context.doorbell.descriptor, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: player.connection, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: memory?.kick ?? -1, events: Int16(POLLIN), revents: 0)]
        let sound = memory.map { _ in CarriedSoundStateMachine(startingAt: Self.monotonicNanoseconds()) }
        return .success(Session(player: player, machine: machine, memory: memory, sound: sound, request: request, fds: fds,
                                clock: CardPositionClock(rate: format.sampleRate)))
    }

    /// What made entering fail: the device must be opened again.
    private struct Lost: Error {
        let outcome: PlaybackOutcome
    }

    /// Answers the player's format: memory for its frames when the stream runs in it; else the
    /// device opened again in it (`.switchFormat`). Nil: carrying goes on.
    private mutating func answer(_ format: CarriedFormat, _ session: inout Session, ringLoop: Bool, in context: some PlaybackContext) -> Ending? {
        // Its PCM let go of the last format's memory before it asked (carrier_hw_params).
        session.memory = nil
        session.player.memory = nil
        session.fds[2].fd = -1
        guard Self.runs(self.format, as: format) else { return .switchFormat(format, player: session.player) }
        do {
            let made = try CarryMemory(format: format, frameBytes: self.format.bytesPerFrame)
            guard session.player.reply(#"{"ok":true}"#, descriptors: [made.memory, made.kick]) else {
                return finish(&session.machine, ringLoop: ringLoop, in: context)
            }
            session.memory = made
            session.player.memory = made
            session.fds[2].fd = made.kick
            session.machine.granted(bufferFrames: format.bufferFrames)
            if session.sound == nil { session.sound = CarriedSoundStateMachine(startingAt: Self.monotonicNanoseconds()) }
            session.player.heard(sounding: true)
            context.report(.carriedSound(true))
        } catch {
            session.player.reply(CarriedPlayer.refusal("\(error)"))
        }
        return nil
    }

    /// Whether the player sounds or has fallen silent, from what the last step copied.
    private mutating func heard(_ session: inout Session, in context: some PlaybackContext) {
        guard var sound = session.sound else { return }
        let now = Self.monotonicNanoseconds()
        let action = heardSound ? sound.copied(sound: true, at: now) : sound.looked(at: now)
        heardSound = false
        session.sound = sound
        switch action {
        case .none: break
        case .sounding, .silent:
            session.player.heard(sounding: action == .sounding)
            context.report(.carriedSound(action == .sounding))
        }
    }

    /// Tells the player's PCM where the card is in its stream, with `queued` frames in the card
    /// and `delay` from snd_pcm_delay (the card's own delay past its buffer counts, as hw:'s does).
    /// While a lead-in holds its frames back, `leadIn` is what is left of it.
    private func publish(_ session: inout Session, queued: Int, delay: Int?, leadIn: Duration) {
        let readAt = Self.monotonicNanoseconds()
        let heard = CarryStateMachine.heard(fill: queued, delay: delay, rate: format.sampleRate)
        let leadInFrames = leadIn > .zero ? Int(leadIn.wholeMilliseconds) * format.sampleRate / 1000 : 0
        guard let memory = session.memory, let position = session.machine.position(fill: heard, leadIn: leadInFrames) else { return }
        // Stamped when the card reaches the player's next frame: the signal ahead of it plays
        // first; the position read is the card's at its last step, not at the read.
        let validAt = session.clock.validAt(position: session.machine.cardWritten - Int64(heard), readAt: readAt)
        let stamp = validAt + Int64(position.ahead) * 1_000_000_000 / Int64(format.sampleRate)
        memory.publish(ckeepalived_carry_position(generation: position.generation, played: position.played, queued: position.queued, stamp_ns: stamp))
    }

    /// What woke the loop: the doorbell (a stop, a reload, another player), the player's kick or
    /// its connection (a format, its close). Nil: carrying goes on.
    private mutating func woke(_ session: inout Session, ringLoop: Bool, in context: some PlaybackContext) -> Ending? {
        let player = session.player
        if session.fds[0].revents != 0 {
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
                    _ = finish(&session.machine, ringLoop: false, in: context)
                    return .next(other)
                case .format(let format):
                    session.request = format
                    other.reply(CarriedPlayer.busy)
                case .nothing:
                    other.reply(CarriedPlayer.busy)
                }
            case nil: break
            }
        }
        if session.fds[2].revents != 0 { session.memory?.drainKick() }
        if session.fds[1].revents != 0 {
            switch player.read() {
            case .nothing: break
            case .format(let format): session.request = format
            case .gone(let why):
                if let why { context.report(.notice("\(player.program) (pid \(player.pid)): \(why)")) }
                return finish(&session.machine, ringLoop: ringLoop, in: context)
            }
        }
        return nil
    }

    /// A stream error while carrying: the output's own mode repairs the stream. A player still
    /// waiting for its format's answer is kept, to be answered once it plays again. One whose
    /// frames were carried is kept only through an underrun (the stream prepared again in place,
    /// as the hardware's is): its PCM is told that everything it wrote has played (its next look
    /// at the position is an underrun, which it recovers from with a prepare), and the frames it
    /// writes after that are carried once the stream plays again. Any other error (a card gone,
    /// an I/O error) ends its stream, as on the hardware.
    private func failed(_ code: Int32, _ operation: String, _ session: Session) -> Ending {
        guard let memory = session.player.memory else { return .failed(code, operation, kept: (session.player, session.request)) }
        guard code == -EPIPE, let generation = session.machine.generation else { return .failed(code, operation, kept: nil) }
        memory.publish(ckeepalived_carry_position(generation: generation, played: UInt64.max / 2, queued: 0, stamp_ns: Self.monotonicNanoseconds()))
        return .failed(code, operation, kept: (session.player, session.request))
    }

    /// Takes back, copies and appends what `step` says; a stream error's code, or nil. Each look
    /// is the thread's heartbeat, written or not.
    private mutating func perform(_ step: CarryStateMachine.Step, _ memory: CarryMemory?, _ machine: inout CarryStateMachine, in context: some PlaybackContext) -> Int32? {
        var written = 0
        defer { context.report(.wrote(written)) }
        let rewound = max(0, pcm.rewind(step.rewind, keeping: machine.levels.minimumLead))
        // On subframes, the player's first frame of a run waits for its place in the card's block.
        let padding = step.music > 0 && memory != nil ? machine.padding(before: step.musicFrom, rewound: rewound) : 0
        var padded = 0
        if padding > 0 {
            padded = appendSignal(padding, blockFrame: machine.blockFrame(at: machine.cardWritten - Int64(rewound)))
            if padded < 0 {
                machine.performed(rewound: rewound, music: 0, signal: 0)
                return Int32(truncatingIfNeeded: padded)
            }
            if padded < padding {
                machine.performed(rewound: rewound, padding: padded, music: 0, signal: 0)
                written = max(0, padded - rewound)
                return nil
            }
        }
        var copied = 0
        if let memory {
            while copied < step.music {
                let (frames, contiguous) = memory.slice(at: step.musicFrom + UInt64(copied))
                let written = pcm.write(frames, frames: min(contiguous, step.music - copied))
                if written == -Int(EAGAIN) { break }
                if written < 0 {
                    machine.performed(rewound: rewound, padding: padded, music: copied, signal: 0)
                    return Int32(truncatingIfNeeded: written)
                }
                // Once a step is enough: music is heard in its first samples, silence read whole.
                if !heardSound {
                    let samples = written * format.channels
                    heardSound = format.framing == .iec958 ? SampleSilence.subframesSound(frames, samples: samples)
                        : SampleSilence.sounds(frames, samples: samples, format: format.sampleFormat)
                }
                copied += written
            }
        }
        let appended = step.signal > 0 ? appendSignal(step.signal, blockFrame: machine.blockFrame(at: machine.cardWritten - Int64(rewound) + Int64(padded + copied))) : 0
        if appended < 0 {
            machine.performed(rewound: rewound, padding: padded, music: copied, signal: 0)
            return Int32(truncatingIfNeeded: appended)
        }
        machine.performed(rewound: rewound, padding: padded, music: copied, signal: appended)
        written = max(0, padded + copied + appended - rewound)
        if pcm.state == SND_PCM_STATE_PREPARED { _ = pcm.start() }
        return nil
    }

    /// Appends up to `frames` of the signal, from frame `blockFrame` of a block on subframes
    /// (where the card's blocks are at the write); the frames appended (fewer once the card is
    /// full), or a negative errno.
    private mutating func appendSignal(_ frames: Int, blockFrame: Int?) -> Int {
        if let blockFrame { source.continueBlock(at: blockFrame) }
        var appended = 0
        while appended < frames {
            let (pointer, chunk) = source.peek(maximum: frames - appended)
            let written = pcm.write(pointer, frames: chunk)
            if written == -Int(EAGAIN) { break }
            if written < 0 { return written }
            source.consume(written)
            appended += written
        }
        return appended
    }

    /// The player is gone: what is queued of its frames goes, the signal follows. A ring loop's
    /// ring is then filled again whole, from a continuous run of the signal, before it replays.
    private mutating func finish(_ machine: inout CarryStateMachine, ringLoop: Bool, in context: some PlaybackContext) -> Ending {
        let buffer = format.bufferFrames
        let step = machine.ended(fill: buffer - max(0, pcm.available()))
        let rewound = max(0, pcm.rewind(step.rewind, keeping: machine.levels.minimumLead))
        // The signal goes on in the card's blocks, here or in the stream's own writes.
        if let frame = machine.blockFrame(at: machine.cardWritten - Int64(rewound)) { source.continueBlock(at: frame) }
        // Before anything else (a next player's grant, the ring's fill, the stream's own loop).
        // An error is left for the next look at the stream, which repairs it as its own.
        let signal = step.signal - (step.rewind - rewound)
        if signal > 0 { _ = appendSignal(signal, blockFrame: nil) }
        guard ringLoop else { return .playerGone }
        // A player that asked meanwhile (MPD's next track, its open read with the last one's
        // close) is carried at once, on this stream as it is: its plug-in waits 200 ms for the
        // answer, and the refill below took 242 ms on a loaded box (the plug-in then fell back to
        // a release, and the card was handed over).
        if let next = context.takeWaitingPlayer() { return .next(next) }
        // What has played was zeroed while carrying: the fill below writes over all of it, and
        // nothing it writes may be zeroed after.
        do { try pcm.stopSilencing() } catch { return .outcome(context.lose(.unknown, error.description)) }
        // Twice: the first fill leaves the lead (which may be the player's) ahead of the play
        // position; once that has played, the second writes over it.
        for pass in 0..<2 {
            if pass == 1, let ending = settle(machine.levels.settle, in: context) { return ending }
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

    /// Waits until `frames` have played (and 5 ms more) between a ring's two fills; a stop, or a
    /// player that asks meanwhile (carried on the stream at once, the ring's own set-up left to
    /// its next end), ends the wait.
    private func settle(_ frames: Int, in context: some PlaybackContext) -> Ending? {
        let deadline = context.clock.now + .milliseconds(Int64(1000 * frames / format.sampleRate + 5))
        while true {
            switch context.doorbell.wait(until: deadline, orReadable: -1) {
            case .stopped: return .outcome(.stopped)
            case .timedOut, .readable: return context.takeWaitingPlayer().map { .next($0) }
            case .rung: if let next = context.takeWaitingPlayer() { return .next(next) }
            }
        }
    }

    static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}
