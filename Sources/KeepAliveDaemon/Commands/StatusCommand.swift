import ArgumentParser
import _KeepalivedControlProtocol
import Glibc

/// `keepalived status`: whether a daemon runs, and how each output is doing.
package struct StatusCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether keepalived runs and how each output is doing.",
        discussion: "Exit status: 0 when running, 3 when not (the LSB convention), 1 when the socket misbehaves.")

    @OptionGroup var socket: SocketOption

    @Flag(help: "Print one JSON object.")
    var json = false

    package func run() throws {
        switch ControlClient.send("status", to: socket.paths) {
        case .success(let reply):
            guard let status = reply.status else { throw CleanExit.failure("no status in reply", code: ExitCode(1)).exit() }
            printOutput(json ? ControlJSON.encode(status) : Self.describe(status))
        case .failure(.notRunning):
            printOutput(json ? ControlJSON.encode(StoppedStatus(socket: socket.paths.socket)) : "keepalived is not running (no daemon on \(socket.paths.socket))")
            throw ExitCode(3)
        case .failure(let failure):
            printError("keepalived: error: \(failure)")
            throw ExitCode(1)
        }
    }

    /// `active (mpd) for 12.5 s`, `active (mpd), silent: idle in 290 s`, `idle for 3 s`, `idle`.
    static func describe(_ activity: ActivityReport) -> String {
        var text = activity.state
        if let program = activity.program, activity.state == "active" { text += " (\(program))" }
        if let since = activity.sinceSeconds { text += " for \(formatDuration(since))" }
        if let left = activity.idleInSeconds { text += ", silent: idle in \(formatDuration(left))" }
        return text
    }

    /// `/dev/cec0 (vivid-000-vid-out1): ready, 2.0.0.0, logical address 4; last sent: 4→5 System
    /// Audio Mode Request (2.0.0.0), acknowledged; audio system on`.
    static func describe(_ cec: CECReport) -> String {
        var text = "\(cec.device)\(cec.adapter.map { " (\($0))" } ?? ""): \(cec.state)"
        if let physical = cec.physicalAddress, let logical = cec.logicalAddress { text += ", \(physical), logical address \(logical)" }
        if let message = cec.lastMessage {
            let heard = cec.acknowledged.map { $0 ? "acknowledged" : "not acknowledged" } ?? "sending"
            text += "; last sent: \(message), \(heard)"
        }
        if let mode = cec.systemAudioMode { text += "; audio system \(mode ? "on" : "off")" }
        return text
    }

    static func describe(_ status: DaemonStatus) -> String {
        var lines = ["keepalived is running (pid \(status.pid), up \(formatDuration(status.uptimeSeconds)))"]
        lines.append("state: \(status.state)\(status.reason.map { " (\($0))" } ?? "")")
        lines.append("socket: \(status.socket)")
        if let log = status.logFile { lines.append("log: \(log)") }
        if let server = status.soundServer { lines.append("sound server: \(server)") }
        for (pcm, why) in (status.withheld ?? [:]).sorted(by: { $0.key < $1.key }) {
            lines.append("left alone: \(pcm): \(why)")
        }
        for loan in status.loans ?? [] {
            let who = "\(loan.program ?? "a player") (pid \(loan.pid))"
            let since = (loan.sinceSeconds * 10).rounded() / 10
            let what = loan.state == "playing" ? "playing on it" : "opening it"
            lines.append("lent: \(loan.pcm) to \(who), \(what), since \(since) s; keepalived's \(loan.outputs.joined(separator: ", ")) wait for it")
            if let format = loan.format, let rate = loan.rate, let channels = loan.channels {
                lines.append("  player's format: \(format) \(rate) Hz \(channels) ch (kept when keepalived takes it back)")
            }
            if let why = loan.notCarriedBecause { lines.append("  handed over, not carried: \(why)") }
        }
        if let cec = status.cec { lines.append("cec: \(Self.describe(cec))") }
        if let mqtt = status.mqtt {
            let state = mqtt.connected ? "connected, state on \(mqtt.stateTopic)" : "not connected (\(mqtt.lastError ?? "connecting"))"
            lines.append("mqtt: \(mqtt.broker): \(state)")
        }
        for output in status.outputs {
            lines.append("output \(output.device): \(output.state)\(output.reason.map { " (\($0))" } ?? "")")
            if let format = output.format, let rate = output.rate, let channels = output.channels {
                lines.append("  format: \(format) \(rate) Hz \(channels) ch, buffer \(output.bufferFrames ?? 0) frames, period \(output.periodFrames ?? 0) frames")
            }
            if let sink = output.sink {
                lines.append("  sink: \(sink)\(output.sinkKind.map { " (\($0))" } ?? "") on \(output.server ?? "the sound server")")
            }
            if let mode = output.mode { lines.append("  mode: \(Self.describe(mode: mode))") }
            if let carrying = output.carrying {
                let silent = output.carriedSilent == true ? ", sending only silence" : ""
                lines.append("  carrying: \(carrying), on this output's running stream (--carry)\(silent)")
            }
            if let activity = output.activity { lines.append("  activity: \(Self.describe(activity))") }
            let signal = output.signal.map { "signal: \($0), " } ?? ""
            lines.append("  \(signal)level: \(Self.level(output.volume)) (ceiling \(Self.level(output.ceiling))), frames played: \(output.framesPlayed)")
            let reasons = output.recoveriesByReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append("  recoveries: \(output.recoveries)\(reasons.isEmpty ? "" : " (\(reasons))")")
            if let error = output.lastError { lines.append("  last error: \(error)") }
            if let holders = output.heldBy { lines.append("  held by: \(holders.isEmpty ? "no program now (it may have let go)" : holders.joined(separator: ", "))") }
            if let linger = output.linger { lines.append("  linger: \(Self.describe(linger: linger))") }
        }
        return lines.joined(separator: "\n")
    }

    /// `10 min on sink keep: another stream plays`, `… nothing else plays, sleeps in 4 min 10 s`.
    static func describe(linger: LingerReport) -> String {
        let length = formatDuration(linger.seconds)
        if let note = linger.note { return "\(length): \(note)" }
        let sink = linger.sink.map { " on sink \($0)" } ?? ""
        if linger.othersPlaying == true { return "\(length)\(sink): another stream plays, kept awake" }
        if let left = linger.sleepsInSeconds { return "\(length)\(sink): nothing else plays, sleeps in \(formatDuration(left))" }
        return "\(length)\(sink): nothing else played for \(length), let sleep"
    }

    static func describe(mode: String) -> String {
        switch mode {
        case "ring-loop": "ring-loop (the hardware replays its ring; nothing is written)"
        case "stream": "stream (written about twice per buffer)"
        case "open-only": "open-only (held open, nothing written)"
        default: mode
        }
    }

    /// A linear level as a person reads it: `0.01 (-40.0 dBFS)`, not `0.009999999999999995`.
    static func level(_ linear: Double) -> String {
        let rounded = (linear * 1e6).rounded() / 1e6
        guard linear > 0, linear.isFinite else { return "\(rounded)" }
        return "\(rounded) (\((20 * log10(linear) * 10).rounded() / 10) dBFS)"
    }

    static func formatDuration(_ seconds: Double) -> String {
        let whole = Int(seconds)
        if whole < 60 { return "\(Double(Int(seconds * 10)) / 10) s" }
        if whole < 3600 { return "\(whole / 60) min \(whole % 60) s" }
        return "\(whole / 3600) h \(whole / 60 % 60) min"
    }
}

/// What `status --json` prints when no daemon answers: the running status's shape, empty.
private struct StoppedStatus: Encodable {
    var outputs: [OutputReport] = []
    var socket: String
    var state = "stopped"
}

extension CleanExit {
    func exit() -> Error {
        printError("keepalived: error: \(description)")
        return code
    }
}
