import _KeepalivedControlProtocol

/// The JSON retained on `PREFIX/state`: the box as `status --json` names it, without what moves
/// by itself (uptime, frames played, seconds since): a payload changes only when something
/// happened, so it is published on change only. Times are wall-clock seconds since 1970, as
/// `keepalived events` gives them.
///
/// ```swift
/// let state = MQTTBoxState(status: status, version: "0.2.0", events: lastEvents, switchedOff: false)
/// state.activity.state        // "active" while real audio plays on any output
/// state.activity.programs     // ["mpd"]
/// ```
struct MQTTBoxState: Codable, Equatable, Sendable {
    /// keepalived's version.
    var version: String
    /// The keep-alive as `status` says it: `playing`, `paused`, `waiting`, …
    var state: String
    /// Why it is not playing, as `status` says it.
    var reason: String?
    /// The keep-alive switch: `off` when home automation switched it off (`--mqtt-commands`).
    var keepAlive: String
    /// The box as a whole: active while real audio plays on any output.
    var activity: BoxActivityState
    var outputs: [Output]
    /// Card devices lent to players (the front door).
    var loans: [Loan]?
    /// HDMI-CEC as keepalived knows it (`--cec`).
    var cec: CECReport?
    /// The power path: the hooks' last run (`--on-active`, `--on-idle`: running, done, failed)
    /// and the outputs whose players wait for the power (`--power-on-wait`).
    var power: BoxActivity.PowerReport?

    struct BoxActivityState: Codable, Equatable, Sendable {
        /// `active` or `idle`.
        var state: String
        /// When the box became what it is (absent: idle since keepalived started).
        var since: Double?
        /// The programs playing now, by name, sorted.
        var programs: [String]
    }

    struct Output: Codable, Equatable, Sendable {
        var device: String
        var state: String
        var reason: String?
        var format: String?
        var rate: Int?
        var channels: Int?
        /// The player whose audio this output's stream carries.
        var carrying: String?
        var sink: String?
        var activity: OutputActivity?
    }

    struct OutputActivity: Codable, Equatable, Sendable {
        var state: String
        var program: String?
        var since: Double?
    }

    struct Loan: Codable, Equatable, Sendable {
        var pcm: String
        var program: String?
        var pid: Int32
        var state: String
        var outputs: [String]
    }

    /// - Parameter events: the last `keepalived events` line of each output: when its activity
    ///   last changed.
    /// What the state is read from when something changed, as `status` reads the box.
    struct Sources: Sendable {
        var status: DaemonStatus
        /// Whether home automation switched the keep-alive off.
        var switchedOff = false
        var power: BoxActivity.PowerReport?
    }

    init(_ sources: Sources, version: String, events: [String: ActivityEvent]) {
        self.init(status: sources.status, version: version, events: events, switchedOff: sources.switchedOff, power: sources.power)
    }

    init(status: DaemonStatus, version: String, events: [String: ActivityEvent], switchedOff: Bool = false,
         power: BoxActivity.PowerReport? = nil) {
        self.power = power
        self.version = version
        state = status.state
        reason = status.reason
        keepAlive = switchedOff ? "off" : "on"
        outputs = status.outputs.map { output in
            let activity = output.activity.map { report in
                let event = events[output.device]
                return OutputActivity(state: report.state, program: report.program,
                                      since: event?.event == report.state ? event?.time : nil)
            }
            return Output(device: output.device, state: output.state, reason: output.reason, format: output.format, rate: output.rate,
                          channels: output.channels, carrying: output.carrying, sink: output.sink, activity: activity)
        }
        loans = status.loans.map { loans in
            loans.map { Loan(pcm: $0.pcm, program: $0.program, pid: $0.pid, state: $0.state, outputs: $0.outputs) }
        }
        cec = status.cec
        let active = outputs.compactMap(\.activity).filter { $0.state == "active" }
        if active.isEmpty {
            // Idle since the last output went idle.
            let idled = outputs.compactMap { $0.activity?.state == "idle" ? $0.activity?.since : nil }
            activity = BoxActivityState(state: "idle", since: idled.max(), programs: [])
        } else {
            // Active since the first output that still plays began.
            activity = BoxActivityState(state: "active", since: active.compactMap(\.since).min(),
                                        programs: Array(Set(active.compactMap(\.program))).sorted())
        }
    }
}
