import FoundationEssentials

// The control socket speaks one JSON object per line each way:
//
//     → {"request":"status"}
//     ← {"ok":true,"status":{"state":"playing","pid":4242,…,"outputs":[…]}}
//     → {"request":"stop"}
//     ← {"ok":true,"pid":4242}
//     → {"request":"reload"}
//     ← {"ok":true,"changed":false}
//     → {"request":"release","card":0,"device":0,"program":"mpd"}
//     ← {"ok":true,"released":["hw:CARD=Intel,DEV=0"]}
//
// With --power-on-wait a release that makes its output active is answered twice: at once with
// how long the player's open is held at most, then when the on-active hook has switched the
// amplifier on:
//
//     ← {"ok":true,"wait":5100}
//     ← {"ok":true,"released":["hw:CARD=Intel,DEV=0"]}
//
// This module is the daemon's wire format and nothing else: it has no sockets and no ALSA, so
// the fuzzer and the tests use the very code the daemon ships.

/// One request line a client sends.
///
/// ```swift
/// let line = ControlJSON.encode(ControlRequest(request: "status")) + "\n"
/// ```
public struct ControlRequest: Codable, Sendable {
    /// `status`, `stop`, `reload` or `release`.
    public var request: String
    /// `release`: the ALSA card index and playback device the caller is about to open.
    public var card: Int?
    public var device: Int?
    /// `release`: the caller's program name, for `status` (the daemon may not see the
    /// caller's /proc entry).
    public var program: String?

    /// A request by name.
    public init(request: String) { self.request = request }

    /// A `release` of one card device for the caller.
    ///
    /// ```swift
    /// let line = ControlJSON.encode(ControlRequest(release: 0, device: 0, program: "mpd")) + "\n"
    /// ```
    public init(release card: Int, device: Int, program: String? = nil) {
        request = "release"
        self.card = card
        self.device = device
        self.program = program
    }
}

/// The daemon's answer to one request.
///
/// ```swift
/// let reply = try ControlJSON.decode(ControlReply.self, from: Array(line.utf8))
/// if !reply.ok { print(reply.error ?? "failed") }
/// ```
public struct ControlReply: Codable, Sendable {
    /// Whether the request was carried out.
    public var ok: Bool
    /// Why not, when `ok` is false.
    public var error: String?
    /// The daemon's process id (`status`, `stop`).
    public var pid: Int32?
    /// The daemon's state (`status`).
    public var status: DaemonStatus?
    /// Whether a `reload` changed anything.
    public var changed: Bool?
    /// The outputs a `release` closed for the caller (empty: keepalived held nothing there).
    public var released: [String]?
    /// An interim line of a `release` (`--power-on-wait`): the device is released, and the
    /// player's open is held at most this many milliseconds more, until the final reply.
    public var wait: Int?

    /// A reply; only the fields that apply are set.
    public init(ok: Bool, error: String? = nil, pid: Int32? = nil, status: DaemonStatus? = nil, changed: Bool? = nil,
                released: [String]? = nil, wait: Int? = nil) {
        self.ok = ok
        self.error = error
        self.pid = pid
        self.status = status
        self.changed = changed
        self.released = released
        self.wait = wait
    }

    /// A refusal carrying `message`.
    ///
    /// ```swift
    /// let reply = ControlReply.failure("busy: too many control connections")
    /// ```
    public static func failure(_ message: String) -> ControlReply { ControlReply(ok: false, error: message) }
}

/// What `keepalived status` shows: the daemon and each of its outputs.
///
/// ```swift
/// if let status = reply.status { print(status.state, status.outputs.map(\.device)) }
/// ```
public struct DaemonStatus: Codable, Equatable, Sendable {
    /// The overall state: `playing`, `starting`, `recovering`, `waiting`, `sleeping`, `paused`,
    /// `stopped`.
    public var state: String
    /// Why the daemon is not playing, when it is not (`underrun`, `locked`, `linger`, …).
    public var reason: String?
    /// The daemon's process id.
    public var pid: Int32
    /// Seconds since the daemon started.
    public var uptimeSeconds: Double
    /// The control socket's path.
    public var socket: String
    /// The log file of a daemon started with `keepalived start`.
    public var logFile: String?
    /// One report per output, in configuration order.
    public var outputs: [OutputReport]
    /// The `--exclude` patterns the daemon's selection leaves out (absent when none).
    public var exclude: [String]?
    /// The sound server a selection follows (`pulseaudio 16.1`), or why none is followed
    /// (absent without a selection).
    public var soundServer: String?
    /// Outputs a selection would pick but leaves alone, with why: a card the sound server owns
    /// or another program reserved (absent when none).
    public var withheld: [String: String]?
    /// The card devices keepalived let players have (the `keepalived:` PCM), and who has them
    /// (absent when none).
    public var loans: [LoanReport]?
    /// HDMI-CEC with `--cec`: the adapter, keepalived's addresses on the bus, the last message
    /// it sent (absent without `--cec`).
    public var cec: CECReport?
    /// `--mqtt`: the broker, whether it accepted the connection, where the state goes (absent
    /// without `--mqtt`).
    public var mqtt: MQTTReport?

    /// A status as the daemon reports it.
    public init(state: String, reason: String? = nil, pid: Int32, uptimeSeconds: Double, socket: String,
                logFile: String? = nil, outputs: [OutputReport], exclude: [String]? = nil) {
        self.state = state
        self.reason = reason
        self.pid = pid
        self.uptimeSeconds = uptimeSeconds
        self.socket = socket
        self.logFile = logFile
        self.outputs = outputs
        self.exclude = exclude
    }
}

/// `--mqtt` in ``DaemonStatus``: the broker (never a secret) and the connection now.
///
/// ```swift
/// if let mqtt = status.mqtt, !mqtt.connected { print("not connected to \(mqtt.broker): \(mqtt.lastError ?? "connecting")") }
/// ```
public struct MQTTReport: Codable, Equatable, Sendable {
    /// `mqtts://user@broker.lan:8883`.
    public var broker: String
    /// Whether the broker accepted the connection and has the state.
    public var connected: Bool
    /// The topic of the box's state (`keepalived/HOST/state`).
    public var stateTopic: String
    /// Why the last connection failed or ended, while not connected.
    public var lastError: String?

    public init(broker: String, connected: Bool, stateTopic: String, lastError: String? = nil) {
        self.broker = broker
        self.connected = connected
        self.stateTopic = stateTopic
        self.lastError = lastError
    }
}

/// `--cec` in ``DaemonStatus``: where keepalived is on the HDMI-CEC bus and what it last said.
///
/// ```swift
/// if let cec = status.cec, cec.acknowledged == false { print("nothing answered \(cec.lastMessage ?? "")") }
/// ```
public struct CECReport: Codable, Equatable, Sendable {
    /// The adapter's device node (`/dev/cec0`).
    public var device: String
    /// `waiting for the adapter`, `claiming a logical address` or `ready`.
    public var state: String
    /// The driver's name of the adapter, once open.
    public var adapter: String?
    /// keepalived's physical address (`2.0.0.0`) and logical address (4, 8 or 11 for a
    /// Playback device; 15 when none was free), once claimed.
    public var physicalAddress: String?
    public var logicalAddress: Int?
    /// The last message keepalived sent when the box became active or idle
    /// (`4→5 System Audio Mode Request (2.0.0.0)`).
    public var lastMessage: String?
    /// Whether its destination acknowledged it (absent until the adapter said).
    public var acknowledged: Bool?
    /// Whether the audio system said it plays the box's sound (its Set System Audio Mode),
    /// absent until it said anything.
    public var systemAudioMode: Bool?

    /// A report; only the fields that apply are set.
    public init(device: String, state: String, adapter: String? = nil, physicalAddress: String? = nil, logicalAddress: Int? = nil,
                lastMessage: String? = nil, acknowledged: Bool? = nil, systemAudioMode: Bool? = nil) {
        self.device = device
        self.state = state
        self.adapter = adapter
        self.physicalAddress = physicalAddress
        self.logicalAddress = logicalAddress
        self.lastMessage = lastMessage
        self.acknowledged = acknowledged
        self.systemAudioMode = systemAudioMode
    }
}

/// One output in ``DaemonStatus``.
///
/// ```swift
/// for output in status.outputs where output.recoveries > 0 { print(output.device, output.recoveriesByReason) }
/// ```
public struct OutputReport: Codable, Equatable, Sendable {
    /// The ALSA PCM name.
    public var device: String
    /// `playing`, `starting`, `recovering`, `waiting`, `sleeping`, `paused`, `stopped`.
    public var state: String
    /// Why the output is not playing, when it is not.
    public var reason: String?
    /// How the output plays: `stream`, `ring-loop` or `open-only`; nil until it first opened.
    public var mode: String?
    /// The sample format the device took (`S16_LE`, …).
    public var format: String?
    /// Frames per second.
    public var rate: Int?
    /// Channels per frame.
    public var channels: Int?
    /// The device buffer, in frames.
    public var bufferFrames: Int?
    /// The device period, in frames.
    public var periodFrames: Int?
    /// What the output plays: `clip`, `sine:30`, `fluctuate:50`, … (its own, with `--output`).
    public var signal: String?
    /// The output's volume, linear.
    public var volume: Double
    /// The ceiling no sample exceeds, linear.
    public var ceiling: Double
    /// Frames handed to the device since start.
    public var framesPlayed: Int
    /// All recoveries together: the sum of ``recoveriesByReason``.
    public var recoveries: Int
    /// Recoveries by reason (`underrun`, `server-gone`, …).
    public var recoveriesByReason: [String: Int]
    /// The last fault's text.
    public var lastError: String?
    /// The card device its handle played to at its last open (`hw:CARD=0,DEV=3`), whatever
    /// its name: what a player's release through `keepalived:` is matched by.
    public var hardware: String?
    /// `--linger` on this output, when given.
    public var linger: LingerReport?
    /// The sound server this output plays through, when it plays to one of its sinks.
    public var server: String?
    /// The server's sink it keeps awake (`alsa_output.pci-0000_00_1f.3.hdmi-stereo`), and what
    /// the sink is (`HDMI/DisplayPort`, `Bluetooth`, …).
    public var sink: String?
    public var sinkKind: String?
    /// Whether real audio plays on this output (a player through `keepalived:`, another stream
    /// on its sink), as `--on-active`/`--on-idle` and `keepalived events` see it.
    public var activity: ActivityReport?
    /// While the output waits because its device is busy: the programs that hold the cards'
    /// playback devices open (`mpd (pid 812, uid 110) on card 0`; `thread 815 of a process
    /// hidden from keepalived on card 0` where the system service cannot see the process), nil
    /// otherwise.
    public var heldBy: [String]?
    /// The player whose audio this output carries on its own running stream now (`--carry`):
    /// the program its `keepalived:` PCM named.
    public var carrying: String?
    /// True while that player has sent nothing above silence for a second or more (it holds the
    /// device open without music, so the output's activity counts it idle); nil when none is carried.
    public var carriedSilent: Bool?

    /// A report; ``recoveries`` is counted from ``recoveriesByReason``, so the two always agree.
    public init(device: String, state: String, reason: String? = nil, mode: String? = nil, format: String? = nil,
                rate: Int? = nil, channels: Int? = nil, bufferFrames: Int? = nil, periodFrames: Int? = nil,
                volume: Double, ceiling: Double, framesPlayed: Int,
                recoveriesByReason: [String: Int], lastError: String? = nil, signal: String? = nil) {
        self.device = device
        self.state = state
        self.reason = reason
        self.mode = mode
        self.format = format
        self.rate = rate
        self.channels = channels
        self.bufferFrames = bufferFrames
        self.periodFrames = periodFrames
        self.volume = volume
        self.ceiling = ceiling
        self.framesPlayed = framesPlayed
        self.recoveriesByReason = recoveriesByReason
        self.lastError = lastError
        self.signal = signal
        recoveries = recoveriesByReason.values.reduce(0, +)
    }
}

/// One card device keepalived released for a player (the `keepalived:` PCM), in
/// ``DaemonStatus``: who has it, since when, and in what format it plays.
///
/// ```swift
/// for loan in status.loans ?? [] { print(loan.pcm, loan.program ?? "?", loan.pid, loan.rate ?? 0) }
/// ```
public struct LoanReport: Codable, Equatable, Sendable {
    /// The card device, as `hw:` names it (`hw:CARD=0,DEV=0`).
    public var pcm: String
    public var card: Int
    public var device: Int
    /// The player's process id and program name.
    public var pid: Int32
    public var program: String?
    /// `lent` until the player has the device open, then `playing`.
    public var state: String
    /// Seconds since the release.
    public var sinceSeconds: Double
    /// keepalived's outputs closed for the player, taken back once it closes the device.
    public var outputs: [String]
    /// The format the player plays in, once seen (`S16_LE`, 44100, 2): keepalived takes the
    /// device back in it.
    public var format: String?
    public var rate: Int?
    public var channels: Int?
    /// Why the player was handed the device rather than carried on keepalived's running stream
    /// (`--no-carry`, …), when its plug-in asked to be carried first.
    public var notCarriedBecause: String?

    /// A report; only the fields that apply are set.
    public init(pcm: String, card: Int, device: Int, pid: Int32, program: String?, state: String, sinceSeconds: Double,
                outputs: [String], format: String? = nil, rate: Int? = nil, channels: Int? = nil) {
        self.pcm = pcm
        self.card = card
        self.device = device
        self.pid = pid
        self.program = program
        self.state = state
        self.sinceSeconds = sinceSeconds
        self.outputs = outputs
        self.format = format
        self.rate = rate
        self.channels = channels
    }
}

/// `--linger` on one output, in ``OutputReport``: whether it lingers there and, if so, what it
/// waits for.
///
/// ```swift
/// if let linger = output.linger, let left = linger.sleepsInSeconds { print("sleeps in \(left) s") }
/// ```
public struct LingerReport: Codable, Equatable, Sendable {
    /// The linger time, in seconds.
    public var seconds: Double
    /// Whether the output lingers: false on a hardware output, or without libpulse (then
    /// ``note`` says why and the output is kept awake all the time).
    public var active: Bool
    /// The sound server's sink the output plays on (or last played on).
    public var sink: String?
    /// Whether another stream plays on that sink now.
    public var othersPlaying: Bool?
    /// Seconds until the output is let sleep, unless another stream plays first.
    public var sleepsInSeconds: Double?
    /// Why the output does not linger, or cannot now (the server does not answer).
    public var note: String?

    /// A report; only the fields that apply are set.
    public init(seconds: Double, active: Bool, sink: String? = nil, othersPlaying: Bool? = nil,
                sleepsInSeconds: Double? = nil, note: String? = nil) {
        self.seconds = seconds
        self.active = active
        self.sink = sink
        self.othersPlaying = othersPlaying
        self.sleepsInSeconds = sleepsInSeconds
        self.note = note
    }
}

/// The one JSON spelling of the protocol: sorted keys, slashes unescaped.
///
/// ```swift
/// let text = ControlJSON.encode(ControlReply(ok: true, pid: 4242))   // {"ok":true,"pid":4242}
/// ```
public enum ControlJSON {
    /// `value` as one line of JSON (no newline).
    public static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return #"{"ok":false,"error":"cannot encode reply"}"# }
        return String(decoding: data, as: UTF8.self)
    }

    /// Reads one JSON value from `bytes`.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}

/// Whether real audio plays on one output, in ``OutputReport``: `active` from a player's first
/// audio until nothing has played for `--on-idle-after`, then `idle`.
///
/// ```swift
/// if let activity = output.activity, activity.state == "active" { print(activity.program ?? "?") }
/// ```
public struct ActivityReport: Codable, Equatable, Sendable {
    /// `active` or `idle`.
    public var state: String
    /// Seconds since it became what it is (absent when idle since the daemon started).
    public var sinceSeconds: Double?
    /// Who plays (or played last, while active between tracks).
    public var program: String?
    /// Seconds until it goes idle if nothing plays meanwhile (active and silent only).
    public var idleInSeconds: Double?

    /// A report; only the fields that apply are set.
    public init(state: String, sinceSeconds: Double? = nil, program: String? = nil, idleInSeconds: Double? = nil) {
        self.state = state
        self.sinceSeconds = sinceSeconds
        self.program = program
        self.idleInSeconds = idleInSeconds
    }
}

/// One line of `keepalived events` (the control socket's `events` request): an output became
/// active or idle.
///
/// ```swift
/// let event = try ControlJSON.decode(ActivityEvent.self, from: Array(line.utf8))
/// if event.event == "active" { print("\(event.output): \(event.program ?? "?")") }
/// ```
public struct ActivityEvent: Codable, Equatable, Sendable {
    /// `active` or `idle`.
    public var event: String
    /// The output, as keepalived names it (its ALSA PCM).
    public var output: String
    /// Who plays (`active`), or played last (`idle`).
    public var program: String?
    /// The card and device it plays to, when it is a card's.
    public var card: Int?
    public var device: Int?
    /// The sound server's sink, when it is a sink's.
    public var sink: String?
    /// When, in seconds since the Unix epoch.
    public var time: Double

    /// An event; only the fields that apply are set.
    public init(event: String, output: String, program: String? = nil, card: Int? = nil, device: Int? = nil, sink: String? = nil, time: Double) {
        self.event = event
        self.output = output
        self.program = program
        self.card = card
        self.device = device
        self.sink = sink
        self.time = time
    }
}
