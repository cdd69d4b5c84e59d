import ArgumentParser
import _KeepalivedControlProtocol
import KeepAlive

/// What `keepalived test` plays and decides, without a device: the tone, the configuration that
/// plays it on one output, the ceilings it will not exceed, how each output is named to a
/// person, and the exit code.
///
/// The tone is the library's own ``KeepAliveSignal/sine(frequency:)`` at 440 Hz, peaking at
/// −30 dBFS (0.0316 of full scale, under the default ceiling of 0.05), played as one
/// ``PlaySchedule`` burst of 1 s with 15 ms raised-cosine fades, then digital silence until the
/// output is stopped: the length is exact to the frame and neither end clicks.
///
/// ```swift
/// let one = TestTone.configuration(for: "pulse:DEVICE=tv", in: planned)   // the tone, on the TV alone
/// TestTone.exitCode(sounded: 1, failed: 1)                               // 75
/// ```
enum TestTone {
    static let frequency = 440.0
    /// −30 dBFS: clearly audible on a speaker at a normal volume, never loud.
    static let level = try! Level(decibels: -30)
    /// The burst, fades included.
    static let length: Duration = .seconds(1)
    static let fade: Duration = .milliseconds(15)
    /// The digital silence after the burst: longer than the output is ever kept open.
    static let silenceAfter: Duration = .seconds(60)
    /// Short, so the burst is out of the device soon after it was written (a sink's 8 s buffer
    /// would hold the next output back for seconds), but not shorter: a sink's stream asked for
    /// 0.5 s stalled at every start on a private PulseAudio (no progress for 1 s, then reopened,
    /// which restarts the burst); 0.8 s and 1 s never did.
    static let buffer: Duration = .seconds(1)
    /// How long an output may take to play before it counts as failed.
    static let startTimeout: Duration = .seconds(5)
    /// Kept open after it started playing: the burst, the buffer it may still sit in, and a
    /// margin for a server that starts its stream a little after the first write.
    static var heldFor: Duration { length + buffer + .milliseconds(300) }
    /// When the daemon gives its outputs their keep-alive back after sounding the tone on them
    /// (``TestToneStateMachine``): ``heldFor`` after a start as slow as 2.7 s. Until then they
    /// play the digital silence after the burst, far shorter than any receiver's standby timer.
    static var daemonRestoresAfter: Duration { startTimeout }

    static var signal: KeepAliveSignal { .sine(frequency: frequency) }
    static var schedule: PlaySchedule { PlaySchedule(playFor: length, pauseFor: silenceAfter, fade: fade) }

    /// The tone's RMS over its steady part: a sine's peak over √2, −33 dBFS.
    static var rms: Double { level.linear / 2.0.squareRoot() }

    /// Its peak in `bits`-bit samples: 1036 LSB in 16 bits.
    static func peak(bits: Int) -> Double { level.linear * Double(1 << (bits - 1)) }

    /// "440 Hz sine, peak 0.0316 (-30 dBFS)".
    static var summary: String { "\(Int(frequency)) Hz sine at \(describe(level)) peak" }

    /// The configuration that sounds the tone on `device` alone, as `planned` (the scanner's plan
    /// for the same options) plays it: its sound server's sink and that sink's rate, its ceiling;
    /// the signal, level, burst and buffer the tone's.
    static func configuration(for device: String, in planned: KeepAliveConfiguration) -> KeepAliveConfiguration {
        KeepAliveConfiguration(devices: [device], defaults: planned.defaults, outputSettings: [device: settings(over: planned.outputSettings[device])])
    }

    /// An output's own settings (its sink, its rate, its ceiling) with the tone's signal, level,
    /// burst and buffer in place of its keep-alive's.
    static func settings(over own: OutputSettings?) -> OutputSettings {
        var settings = own ?? OutputSettings()
        settings.signal = signal
        settings.clip = nil
        settings.volume = level
        settings.schedule = schedule
        settings.bufferDuration = buffer
        return settings
    }

    /// Why the tone may not play on `devices` under `configuration`'s ceilings, naming the values;
    /// nil when every ceiling is at or above the tone. The test never plays above a ceiling the
    /// user set.
    static func ceilingRefusal(devices: [String], in configuration: KeepAliveConfiguration) -> String? {
        if let refusal = ceilingRefusal(globalCeiling: configuration.defaults.ceiling) { return refusal }
        for device in devices {
            let ceiling = configuration.configuration(for: device).ceiling
            if ceiling < level {
                return "--output '\(device)': its max level \(describe(ceiling)) is below the test tone's peak \(describe(level)); "
                    + "the test never plays above a ceiling you set: leave that output out, or raise its --max-level to at least \(rounded(level.linear))"
            }
        }
        return nil
    }

    /// Why the tone may not play under a global `--max-level` of `ceiling`; nil when it may.
    static func ceilingRefusal(globalCeiling ceiling: Level) -> String? {
        guard ceiling < level else { return nil }
        return "--max-level \(describe(ceiling)) is below the test tone's peak \(describe(level)); "
            + "the test never plays above a ceiling you set: leave --max-level out, or give at least \(rounded(level.linear))"
    }

    /// 0 when every output sounded; 69 (EX_UNAVAILABLE) when none did, or there was none;
    /// 75 (EX_TEMPFAIL) when some did and others did not (busy, missing, too slow to start):
    /// the ones that failed may be tried again.
    static func exitCode(sounded: Int, failed: Int) -> ExitCode {
        if failed == 0, sounded > 0 { return .success }
        return sounded == 0 ? SysExit.unavailable : SysExit.tempFail
    }

    /// Whether an answer to the `[y/N]` question is a yes: `y` or `yes`, any case, spaces around.
    static func isYes(_ answer: String?) -> Bool {
        guard let answer else { return false }
        let word = answer.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }).first?.lowercased()
        return word == "y" || word == "yes"
    }

    /// How a person tells the output apart, after its PCM name: a sink by its description and
    /// kind, a card device by its card and title, any other PCM by ALSA's description of it.
    static func label(sink: ServerSink?, card: CardDevice?, hint: ALSADevice?) -> String {
        if let sink {
            return "sink \"\(sink.description)\", \(sink.isVirtual ? "virtual" : sink.kind.rawValue)"
        }
        if let card {
            return "card \(card.card) \"\(card.cardID)\": \(card.title), \(card.kind.rawValue)"
        }
        let description = hint?.description.split(separator: "\n").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }.joined(separator: ", ") ?? ""
        return description.isEmpty ? "ALSA PCM" : "ALSA PCM: \(description)"
    }

    /// What to say about a daemon that runs while the test plays: an output it holds in a ring
    /// loop (a card's `hw:`, `plughw:`, `hdmi:` device) is busy for anyone else; its streams to
    /// sinks and `dmix` share the device, and the tone plays over them.
    static func daemonWarning(_ status: DaemonStatus, socket: String) -> String {
        let held = status.outputs.filter { $0.mode == "ring-loop" }.map(\.device)
        var text = "a keepalived daemon runs (pid \(status.pid), \(socket)) and keeps \(status.outputs.count) output\(status.outputs.count == 1 ? "" : "s") awake"
        if held.isEmpty {
            text += "; its streams share the devices, so the tone plays over its keep-alive"
        } else {
            text += "; it holds \(held.joined(separator: ", ")) in a ring loop, and that card device is busy for the test"
                + " ('keepalived stop' first if an output fails as busy, then start it again)"
        }
        return text
    }

    /// "0.0316 (-30 dBFS)".
    static func describe(_ level: Level) -> String {
        let decibels = (level.decibels * 10).rounded() / 10
        let text = decibels == decibels.rounded() ? "\(Int(decibels))" : "\(decibels)"
        return "\(rounded(level.linear)) (\(text) dBFS)"
    }

    /// A fraction of full scale to four decimals, as a person would type it: 0.0316, 0.01.
    static func rounded(_ linear: Double) -> String {
        let value = (linear * 10_000).rounded() / 10_000
        return value == value.rounded() ? "\(Int(value))" : "\(value)"
    }
}

extension StringProtocol {
    fileprivate func trimmingSpaces() -> String {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return String(text)
    }
}
