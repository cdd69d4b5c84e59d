import CALSA
import Logging
import Synchronization
import Glibc

/// What a playback thread tells its manager. Sent from the playback thread; the receiver must
/// not block.
enum PlaybackReport: Sendable {
    case state(KeepAliveState)
    case opened(OutputFormat, PlaybackMode)
    /// The card device the open handle plays to, when it differs from the last open's.
    case playsOn(HardwareDevice?)
    case fault(InterruptionReason, String)
    case recovered(InterruptionReason, Duration)
    /// Frames played since the last report; also the thread's heartbeat.
    case wrote(Int)
    case notice(String)
    /// The player whose audio the output carries now; nil when it carries none any more.
    case carrying(program: String?, pid: Int32)
    /// Whether the carried player's audio is sound (true) or has been silence for a second.
    case carriedSound(Bool)
    /// What the open device could be opened in, for a player that asks to be carried; nil when
    /// the open stream cannot carry one.
    case carries(PCMCapabilities?)
}

/// One output's playback thread: open, play, recover, reopen, until stopped.
///
/// Opening, negotiating and recovering live here; playing lives in the three ways of playing
/// (``StreamPlayback``, ``RingLoopPlayback``, ``HoldOpenPlayback``), which see this loop only as
/// their ``PlaybackContext``. Every decision about faults is the ``RecoveryStateMachine``'s,
/// every decision about when to write the ``StreamPacer``'s.
///
/// Concurrency: everything but `doorbell`, `pending` and `thread` is confined to the playback
/// thread once it runs: it claims ``owner`` first, each open (`openAndPlay`) and each way of
/// playing's call about a fault (``lose(_:_:since:)``, ``recover(_:code:operation:dryAt:restarted:)``,
/// ``prepareFailed(_:)``, ``sawWhilePlaying()``, ``ringNotReplayed(_:)``) checks it in every build
/// (`preconditionOwned`), and the calls made per period or per write (``pendingRequest(_:_:)``,
/// ``flowing()``) in debug and test builds (`assertOwned`). `doorbell` and `pending` are
/// thread-safe. `thread` is written by `start()` and read by `join()`, both called by the owning
/// manager under its lifecycle lock. So `@unchecked Sendable`.
final class PlaybackLoop: PlaybackContext, @unchecked Sendable {
    let device: String
    /// The configuration in force, confined to the playback thread once it runs; ``apply(_:)``
    /// hands it a new one through `pending`.
    var configuration: OutputConfiguration
    private let reporter: @Sendable (PlaybackReport) -> Void
    /// The doorbell, or why it could not be made: then ``start()`` reports that as the output's
    /// fault, as it does a thread that cannot start, and no thread runs.
    private let madeDoorbell: Result<Doorbell, DoorbellError>
    private var thread: JoinableThread?
    let clock = ContinuousClock()
    /// The playback thread, once it runs: what only it may touch is checked against it.
    let owner: ThreadOwner

    init(device: String, configuration: OutputConfiguration, report: @escaping @Sendable (PlaybackReport) -> Void) {
        self.device = device
        self.configuration = configuration
        self.reporter = report
        owner = ThreadOwner("\(device)'s playback thread")
        madeDoorbell = Result { () throws(DoorbellError) in try Doorbell() }
    }

    /// The playback thread's doorbell: only that thread waits on it, and it starts only once the
    /// doorbell was made.
    var doorbell: Doorbell {
        guard case .success(let doorbell) = madeDoorbell else { preconditionFailure("a playback thread ran without its doorbell") }
        return doorbell
    }

    /// Starts the thread; a thread that cannot be started, or its doorbell not made, is reported
    /// as a fault of the output.
    func start() {
        precondition(thread == nil, "playback loop started twice")
        if case .failure(let error) = madeDoorbell {
            report(.fault(.unknown, "\(error)"))
            return
        }
        do {
            thread = try startThread(named: "keepalive-play") { [self] in run() }
        } catch {
            report(.fault(.unknown, "\(error)"))
        }
    }

    /// A configuration handed over by ``apply(_:)``, taken by the playback thread between two
    /// writes: the stream stays open and the new loop follows the old one without a gap.
    private let pending = Locked<OutputConfiguration?>(nil)
    /// Bumped by ``apply(_:)``: the playback thread checks this counter, not the lock, each time
    /// round its loop.
    private let pendingGeneration = Atomic<Int>(0)

    /// Hands a new clip, level or ceiling to the running thread (see `KeepAliveManager.reconfigure`).
    /// Buffer settings take effect at the next open.
    func apply(_ configuration: OutputConfiguration) {
        pending.withLock { $0 = configuration }
        pendingGeneration.add(1, ordering: .releasing)
        if case .success(let doorbell) = madeDoorbell { doorbell.ring() }
    }

    /// A player handed over to be carried on the open stream, taken by the playback thread at
    /// its next look (its doorbell is rung). A second one waiting is refused at once.
    private let carryHandOver = Locked<CarriedPlayer?>(nil)
    private let carryGeneration = Atomic<Int>(0)
    private var seenCarryGeneration = 0

    /// Hands `player` to the playback thread, which answers it from then on.
    func carry(_ player: CarriedPlayer) {
        let refused = carryHandOver.withLock { waiting -> CarriedPlayer? in
            if waiting != nil { return player }
            waiting = player
            return nil
        }
        if let refused {
            refused.reply(CarriedPlayer.busy)
            return
        }
        carryGeneration.add(1, ordering: .releasing)
        if case .success(let doorbell) = madeDoorbell { doorbell.ring() }
    }

    /// Asks the thread to stop and waits for it: the stream is dropped, never drained.
    func stopAndJoin() {
        if case .success(let doorbell) = madeDoorbell { doorbell.raise() }
        thread.take()?.join()
    }

    // MARK: - The playback thread

    private var machine = RecoveryStateMachine(retry: RetryPolicy(), seed: 1)
    /// Notices cards and sound servers appearing; made when the thread starts.
    private var watcher: DeviceWatcher?
    /// Whether a sound server may be behind the open device. Not for one that plays straight to
    /// a card: a PulseAudio starting at login (its socket appearing) must not reopen it.
    private var serverMayBeBehind = true
    private var seenGeneration = 0

    /// The frames for the current configuration, rendered for `renderedFor`; reused across
    /// opens in the same format.
    private var source: (any FrameSource)?
    private var renderedFor: OutputFormat?
    /// The card device the last open played to (reported when it changes).
    private var playsOn: HardwareDevice?
    /// The fewest frames the rendered loop holds (see ``makeFrameSource``).
    private var renderedLoopFrames = 0
    private var rendered = false
    /// Set when the watcher saw a card appear: the next open reads alsa-lib's configuration again.
    private var configurationStale = false

    /// What the watcher saw since it was last asked, noting a card's appearance.
    private func takeSeen() -> DeviceChanges {
        let seen = watcher?.take() ?? []
        if seen.contains(.card) { configurationStale = true }
        return seen
    }

    /// A carried player whose format needs the device opened again: carried on at the next open,
    /// in that format (``carriedFormat``), which the output keeps from then on.
    var heldCarry: CarriedPlayer?
    var carriedFormat: CarriedFormat?
    /// The format request the held player waits for an answer to.
    var heldRequest: CarriedFormat?
    /// The open device's capabilities (``PlaybackContext/capabilities``).
    private(set) var capabilities: PCMCapabilities?
    /// When the lead-in after an open for a carried player's format ends (``PlaybackContext/carryLeadInEnds``).
    private(set) var carryLeadInEnds: ContinuousClock.Instant?
    /// The last open was made for ``carriedFormat``'s sake.
    private var reopenedForCarry = false

    /// Set when a ring loop did not go round on this output's device (``ringNotReplayed(_:)``):
    /// it streams from then on.
    private var ringLoopRefused = false

    private func run() {
        owner.claim()
        machine = RecoveryStateMachine(retry: configuration.retry, seed: Self.seed(Int(bitPattern: Unmanaged.passUnretained(self).toOpaque())))
        let watcher = DeviceWatcher()
        self.watcher = watcher
        defer { self.watcher = nil }
        report(.state(.starting))
        var outcome = PlaybackOutcome.reconfigure
        while !doorbell.isRaised {
            if case .reopen(let delay) = outcome, waitToReopen(after: delay) { break }
            takePendingConfiguration()
            let seen = takeSeen()
            // A card that appeared brings its own configuration (alsa-lib's cards/DRIVER.conf: a
            // Raspberry Pi's `hdmi:CARD=vc4hdmi0`), which alsa-lib reads only when it reads its
            // configuration: read it again before this open, or the name stays unknown.
            if configurationStale {
                configurationStale = false
                ALSADevice.reloadConfiguration()
            }
            machine.attemptingOpen(seen: seen)
            outcome = openAndPlay()
            if case .stopped = outcome { break }
        }
        perform(machine.stopped())
    }

    /// Opens the device, decides how to play, plays until stopped or lost; the device is closed
    /// before returning (a retry opens a fresh handle, and a hardware device is free for others
    /// meanwhile).
    private func openAndPlay() -> PlaybackOutcome {
        owner.preconditionOwned("PlaybackLoop.openAndPlay")
        let pcm: PCMDevice
        do { pcm = try PCMDevice(name: device, serverSink: configuration.serverSink) } catch { return openFailed(error) }
        defer {
            pcm.close()
            serverMayBeBehind = true
            // A player carried on this stream, kept through its underrun, ends with it: its PCM
            // says "No such device", and its next open is handed the card or carried again.
            if heldCarry?.memory != nil {
                heldCarry = nil
                heldRequest = nil
            }
        }
        // Read before anything is set: a device whose rules follow its own setup (snd-aloop's
        // cable) would otherwise offer a carried player nothing but keepalived's format.
        capabilities = pcm.capabilities()
        let negotiation: HardwareNegotiation
        do {
            // The clip is asked for in its own format; generated signals in the format most
            // digital receivers run at natively (48 kHz stereo), or a sound server's sink's own
            // rate, to spare them a conversion.
            // A player's last format, when keepalived took the device back from one, wins: the
            // device then keeps running as the player left it.
            let clipSignal = configuration.signal == .clip
            // A carried player's format wins: the device runs as it asked, and stays so.
            let player = carriedFormat.map { DeviceFormat(sampleFormat: SampleFormat(alsaFormat: snd_pcm_format_t(rawValue: $0.alsaFormat)), rate: $0.rate, channels: $0.channels) }
                ?? configuration.deviceFormat
            negotiation = try pcm.negotiate(
                format: player?.sampleFormat ?? (clipSignal ? SampleFormat(closestTo: configuration.clip.encoding) : .s16),
                rate: player?.rate ?? (clipSignal ? configuration.clip.sampleRate : configuration.generatedSignalRate ?? 48000),
                channels: player?.channels ?? (clipSignal ? configuration.clip.channels : 2))
        } catch {
            return openFailed(error)
        }
        // A format other than the last one rendered for is worth announcing again.
        let formatChanged = renderedFor.map { !$0.carriesSameFrames(as: negotiation.provisionalFormat) } ?? false
        if let failed = renderIfNeeded(for: negotiation.provisionalFormat) { return failed }
        // Read once the parameters are chosen: a plug PCM inserts its conversions then.
        let chain = pcm.chain
        serverMayBeBehind = !chain.endsInHardware
        // Known from the handle, never guessed from the name: a player's release is matched
        // by it (`default` is dmix on some card's device 0, `hdmi:CARD=PCH,DEV=1` device 7).
        let hardware = pcm.hardwareDevice(chain: chain)
        if hardware != playsOn {
            playsOn = hardware
            report(.playsOn(hardware))
        }
        let format: OutputFormat
        let mode: PlaybackMode
        do {
            (format, mode) = try commit(negotiation, pcm, chain)
        } catch {
            return openFailed(error)
        }
        if machine.opened() == .announceOpen || formatChanged { report(.opened(format, mode)) }
        // Only a card's own stream carries a player: nothing between keepalived's frames and the
        // hardware that could change the player's (on an IEC958-only card keepalived frames its
        // signal itself, and the player's PCM frames its samples to match).
        let carries = chain.carriesPlayersUnchanged && mode != .openOnly
        report(.carries(carries ? capabilities : nil))
        if !carries, let held = heldCarry.take() {
            heldRequest = nil
            held.reply(CarriedPlayer.refusal("the device no longer plays a stream that can carry a player"))
        }
        // Opened for a carried player's format: the signal plays in it for the lead-in first.
        carryLeadInEnds = heldCarry != nil && configuration.carryLeadIn > .zero ? clock.now + configuration.carryLeadIn : nil
        // A stream to a sound server costs a round trip per write call (the plug-in's thread
        // and the server each wake for it), and a write call takes at most the rest of the loop:
        // rendered for the provisional quarter-second period, a write to a sink was twelve
        // calls. A loop as long as one write (``StreamPacer/threshold``, two of a sink's four
        // periods), written from its start each time, makes it one. A card's writes are copies
        // into its ring: its short loop stays.
        if mode == .stream, !chain.endsInHardware {
            let writeFrames = StreamPacer.threshold(for: format)
            if renderedLoopFrames < writeFrames {
                do { try render(for: format, minimumLoopFrames: writeFrames) } catch {
                    return perform(machine.cannotRender(message: "\(error)", at: clock.now))
                }
            }
        }
        switch (mode, source) {
        case (.ringLoop, let source?):
            var playback = RingLoopPlayback(pcm: pcm, format: format, source: source,
                                            pollsDevice: negotiation.canDisablePeriodWakeup, hardware: hardware)
            return playback.play(in: self)
        case (.stream, let source?):
            var playback = StreamPlayback(pcm: pcm, format: format, source: source)
            return playback.play(in: self)
        case (.openOnly, _), (_, nil):
            return HoldOpenPlayback(pcm: pcm, format: format).play(in: self)
        }
    }

    /// Commits the buffer for the way this output will play: a ring the signal tiles exactly
    /// when the device replays its ring on its own and the signal can loop, else a stream.
    private func commit(_ negotiation: HardwareNegotiation, _ pcm: PCMDevice, _ chain: PCMChain) throws(ALSAError) -> (OutputFormat, PlaybackMode) {
        guard let source else {
            let format = try negotiation.commitStreaming(bufferMicroseconds: configuration.bufferMicroseconds, periods: configuration.periodsPerBuffer)
            try pcm.configureStreaming(startThreshold: format.bufferFrames, wakeThreshold: format.bufferFrames)
            return (format, .openOnly)
        }
        // Not on an indirect driver (it plays only what was written since its last look, so the
        // ring written once would play once), nor where a ring loop was found not to go round.
        // snd-usb-audio asks for its pointer's moves too (its low-latency mode queues what was
        // written at once) but replays its ring when nothing more comes: the VM's box scenarios
        // capture its ring loop sample for sample.
        let indirect = negotiation.isIndirect && playsOn.map { Self.driver(ofCard: $0.card) != "USB-Audio" } ?? negotiation.isIndirect
        if configuration.allowsRingLoop, !ringLoopRefused, !indirect, chain.canLoopRing {
            let cycle: Int? = switch source.ringFit {
            case .multiple(let frames): IEC958Framer.alignedCycle(frames, block: chain.ringBlockFrames)
            case .anyLength: chain.ringBlockFrames
            case .none: nil
            }
            if let cycle, let format = try negotiation.commitRing(cycleFrames: cycle, maximumFrames: negotiation.rate * RingLoopPlayback.maximumRingSeconds) {
                try pcm.configureRingLoop(bufferFrames: format.bufferFrames)
                return (format, .ringLoop)
            }
        }
        let format = try negotiation.commitStreaming(bufferMicroseconds: configuration.bufferMicroseconds, periods: configuration.periodsPerBuffer)
        let threshold = StreamPacer.threshold(for: format)
        try pcm.configureStreaming(startThreshold: format.bufferFrames, wakeThreshold: threshold)
        return (format, .stream)
    }

    /// Renders the current configuration's signal for `format`: once per open in a new format
    /// or per reload, never while playing steadily. Returns an outcome when it cannot.
    private func renderIfNeeded(for format: OutputFormat) -> PlaybackOutcome? {
        if rendered, let renderedFor, renderedFor.carriesSameFrames(as: format) { return nil }
        do {
            try render(for: format)
            return nil
        } catch {
            // The device's rate cannot carry the signal (a sine at or above half of it).
            return perform(machine.cannotRender(message: "\(error)", at: clock.now))
        }
    }

    private func render(for format: OutputFormat, minimumLoopFrames: Int? = nil) throws(KeepAliveSignalError) {
        source = try makeFrameSource(
            signal: configuration.signal, clip: configuration.clip, format: format, volume: configuration.volume,
            ceiling: configuration.ceiling, schedule: configuration.schedule, seed: configuration.seed,
            minimumLoopFrames: minimumLoopFrames)
        rendered = true
        renderedFor = format
        renderedLoopFrames = minimumLoopFrames ?? format.periodFrames
    }

    /// A stop, or a configuration handed over by ``apply(_:)`` and rendered for `format` (a reload
    /// allocates here, once, never in the steady state); nil when there is neither.
    func pendingRequest(_ pcm: PCMDevice, _ format: OutputFormat) -> PlaybackRequest? {
        owner.assertOwned("PlaybackLoop.pendingRequest")
        if doorbell.isRaised {
            pcm.drop()
            return .stop
        }
        if let player = takeWaitingPlayer() { return .carry(player, nil) }
        if let player = heldCarry.take() { return .carry(player, heldRequest.take()) }
        let previous = configuration
        guard hasPendingConfiguration, takePendingConfiguration() else { return nil }
        // Another way to the server (keepalived's own stream instead of ALSA's plug-in, or back)
        // is taken by a new open only. Rendered in place instead, a `pulse` output whose server
        // answered only after its first open played on through the plug-in, with the plug-in's
        // libpulse thread and connection beside the process's own, until its next fault.
        if configuration.serverSink != previous.serverSink { return .end(.reconfigure) }
        // Nothing the open device plays changed: what it is asked for is for the next open.
        if configuration.playsTheSame(as: previous) {
            rendered = true
            return nil
        }
        // The same length of loop as the one it replaces (a stream's, one write long).
        do { try render(for: format, minimumLoopFrames: max(renderedLoopFrames, format.periodFrames)) } catch {
            return .end(lose(.unknown, "\(error)"))
        }
        guard let next = source else { return .writesNothing }
        return .reloaded(next)
    }

    /// A player handed over by ``carry(_:)`` since the last look, taken; nil when none waits.
    func takeWaitingPlayer() -> CarriedPlayer? {
        owner.assertOwned("PlaybackLoop.takeWaitingPlayer")
        let generation = carryGeneration.load(ordering: .acquiring)
        guard generation != seenCarryGeneration else { return nil }
        seenCarryGeneration = generation
        return carryHandOver.withLock { $0.take() }
    }

    /// Whether a configuration handed over by ``apply(_:)`` waits to be taken.
    private var hasPendingConfiguration: Bool { pendingGeneration.load(ordering: .relaxed) != seenGeneration }

    /// Takes a configuration handed over by ``apply(_:)``; true if there was one. The signal is
    /// rendered again at the next open, or by the caller for an open stream.
    @discardableResult
    private func takePendingConfiguration() -> Bool {
        let generation = pendingGeneration.load(ordering: .acquiring)
        guard generation != seenGeneration else { return false }
        seenGeneration = generation
        guard let next = pending.withLock({ $0.take() }) else { return false }
        configuration = next
        machine.reconfigured(retry: next.retry, seed: Self.seed(generation))
        rendered = false
        return true
    }

    private func openFailed(_ error: ALSAError) -> PlaybackOutcome {
        var code = error.code
        var message = error.description
        // A card this process may not open looks missing to alsa-lib: say what is really wrong.
        let reason = InterruptionReason(openError: code)
        if reason == .noDevice || reason == .permissionDenied || reason == .unknown, let denied = DeviceAccess.deniedExplanation() {
            code = -EACCES
            message = "\(error.description); \(denied)"
        }
        return perform(machine.openFailed(code, message: message, seen: takeSeen(), at: clock.now))
    }

    // MARK: - What a way of playing may ask (PlaybackContext)

    var watcherDescriptor: Int32 { watcher?.descriptor ?? -1 }

    func report(_ report: PlaybackReport) {
        reporter(report)
    }

    func ringNotReplayed(_ message: String) -> PlaybackOutcome {
        owner.preconditionOwned("PlaybackLoop.ringNotReplayed")
        ringLoopRefused = true
        report(.notice(message))
        return .reconfigure
    }

    func lose(_ reason: InterruptionReason, _ message: String, since: ContinuousClock.Instant?) -> PlaybackOutcome {
        owner.preconditionOwned("PlaybackLoop.lose")
        return perform(machine.lost(reason, message, since: since, seen: seenWhileOpen(), at: clock.now))
    }

    func flowing() {
        owner.assertOwned("PlaybackLoop.flowing")
        perform(machine.flowing(at: clock.now))
    }

    func recover(_ pcm: PCMDevice, code: Int32, operation: String, dryAt: ContinuousClock.Instant?, restarted: inout Bool) -> PlaybackOutcome? {
        // A hang-up on a PCM that ends in a card's own hardware is the card going away: no
        // server is behind it. The kernel raises it on an unplugged USB card, and the stream's
        // state may not say DISCONNECTED yet when poll returns (seen in the VM under load: an
        // unplug reported as a lost server).
        owner.preconditionOwned("PlaybackLoop.recover")
        var code = code
        if !serverMayBeBehind, InterruptionReason(streamError: code) == .serverGone,
           code == -ENOTCONN || pcm.state == SND_PCM_STATE_DISCONNECTED || playsOn.map(Self.nodeGone) == true {
            code = -ENODEV
        }
        let action = machine.streamFailed(
            code, message: ALSAError(code: code, operation: operation).description, dryAt: dryAt, seen: seenWhileOpen(), at: clock.now)
        return repair(pcm, action, restarted: &restarted)
    }

    func reopen(for format: CarriedFormat, carrying player: CarriedPlayer) -> Bool {
        owner.preconditionOwned("PlaybackLoop.reopen(for:carrying:)")
        if carriedFormat == format, reopenedForCarry {
            // Opened for it already: the device does not take it as asked.
            reopenedForCarry = false
            player.reply(CarriedPlayer.refusal("the device did not open in \(format)"))
            heldCarry = player
            return false
        }
        carriedFormat = format
        reopenedForCarry = true
        heldCarry = player
        heldRequest = format
        return true
    }

    func keep(_ player: CarriedPlayer, waitingFor request: CarriedFormat?) {
        owner.preconditionOwned("PlaybackLoop.keep(_:waitingFor:)")
        heldCarry = player
        heldRequest = request
    }

    func prepareFailed(_ code: Int32) -> PlaybackOutcome {
        owner.preconditionOwned("PlaybackLoop.prepareFailed")
        return perform(machine.repairFailed(code, message: ALSAError(code: code, operation: "prepare").description, at: clock.now))
    }

    func sawWhilePlaying() -> PlaybackOutcome? {
        owner.preconditionOwned("PlaybackLoop.sawWhilePlaying")
        let action = machine.sawWhilePlaying(seenWhileOpen(), at: clock.now)
        return action == .none ? nil : perform(action)
    }

    /// What the watcher saw that concerns the open device: a sound server's socket only when a
    /// server may be behind it.
    private func seenWhileOpen() -> DeviceChanges {
        let seen = takeSeen()
        return serverMayBeBehind ? seen : seen.subtracting(.server)
    }

    /// Reports what an action says and turns it into an outcome for the actions that end an
    /// open (an in-place repair is the caller's to carry out, see ``repair(_:_:restarted:)``).
    @discardableResult
    private func perform(_ action: RecoveryStateMachine.Action) -> PlaybackOutcome {
        switch action {
        case .none, .announceOpen:
            return .reconfigure
        case .play(let recovered):
            report(.state(.playing))
            if let recovered { report(.recovered(recovered.reason, recovered.downtime)) }
            return .reconfigure
        case .repair(_, let fault):
            reportFault(fault)
            return .reconfigure
        case .reopen(let delay, let fault):
            if let fault { reportFault(fault) }
            return .reopen(after: delay)
        case .stop:
            report(.state(.stopped))
            return .stopped
        }
    }

    private func reportFault(_ fault: RecoveryStateMachine.Fault) {
        report(.fault(fault.reason, fault.message))
        if let state = fault.state { report(.state(state)) }
    }

    /// Sleeps the delay before the next open; a card or a sound server appearing (see
    /// ``DeviceWatcher``) ends it early. Returns true when stopped.
    private func waitToReopen(after delay: Duration) -> Bool {
        let deadline = clock.now + delay
        while true {
            switch doorbell.wait(until: deadline, orReadable: watcher?.descriptor ?? -1) {
            case .stopped:
                return true
            case .timedOut:
                return false
            case .rung:
                continue
            case .readable:
                if case .reopen(let settle, _) = machine.sawWhileWaiting(takeSeen()) {
                    return doorbell.wait(settle)
                }
            }
        }
    }

    /// Carries out an in-place repair the state machine asked for. Returns nil when the stream
    /// goes on (`restarted` tells whether it starts again from an empty buffer), or the outcome
    /// when the device must be reopened.
    private func repair(_ pcm: PCMDevice, _ action: RecoveryStateMachine.Action, restarted: inout Bool) -> PlaybackOutcome? {
        let outcome = perform(action)
        switch action {
        case .repair(.prepare, _):
            let result = pcm.prepare()
            if result < 0 { return prepareFailed(result) }
            restarted = true
            return nil
        case .repair(.resume, _):
            var result = pcm.resume()
            var attempts = 0
            // A device still waking answers EAGAIN; give it a moment, never a busy loop.
            while result == -EAGAIN, attempts < 100, !doorbell.isRaised {
                _ = doorbell.wait(.milliseconds(10))
                attempts += 1
                result = pcm.resume()
            }
            // Some plug-ins report success without resuming; the state tells.
            if result == 0, pcm.state == SND_PCM_STATE_SUSPENDED { result = -ENOSYS }
            if result == 0 {
                restarted = false
                return nil
            }
            result = pcm.prepare()
            if result < 0 { return prepareFailed(result) }
            restarted = true
            return nil
        case .none, .announceOpen, .play:
            return nil
        case .reopen, .stop:
            return outcome
        }
    }

    /// The kernel driver's name of card `card` (`USB-Audio`, `HDA-Intel`, `bcm2835_headpho`).
    private static func driver(ofCard card: Int) -> String? {
        var ctl: OpaquePointer?
        guard snd_ctl_open(&ctl, "hw:\(card)", SND_CTL_NONBLOCK) == 0, let ctl else { return nil }
        defer { snd_ctl_close(ctl) }
        var allocated: OpaquePointer?
        guard snd_ctl_card_info_malloc(&allocated) == 0, let info = allocated else { return nil }
        defer { snd_ctl_card_info_free(info) }
        guard snd_ctl_card_info(ctl, info) == 0, let name = snd_ctl_card_info_get_driver(info) else { return nil }
        return String(cString: name)
    }

    /// Whether the card device's playback node is gone from /dev/snd (its card was unplugged).
    private static func nodeGone(_ hardware: HardwareDevice) -> Bool {
        access("/dev/snd/pcmC\(hardware.card)D\(hardware.device)p", F_OK) != 0
    }

    private static func seed(_ value: Int) -> UInt64 {
        UInt64(truncatingIfNeeded: value) ^ 0x9E37_79B9_7F4A_7C15
    }

    /// A duration for a log message, in seconds with millisecond precision.
    static func format(_ duration: Duration) -> String {
        let milliseconds = duration.wholeMilliseconds
        let fraction = milliseconds % 1000
        return "\(milliseconds / 1000).\(fraction < 10 ? "00" : fraction < 100 ? "0" : "")\(fraction)s"
    }
}
