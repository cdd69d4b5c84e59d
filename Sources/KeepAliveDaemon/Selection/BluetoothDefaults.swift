import KeepAlive

/// What a Bluetooth sink plays unless its `--output` says otherwise: a 30 Hz sine at −50 dBFS,
/// 2 s in every 30.
///
/// Why: a Bluetooth speaker hears keepalived through its codec (SBC at A2DP's usual settings),
/// which turns the discreet signals into silence: `fluctuate`'s single ±1 LSB pulses come back
/// as zeros, a constant −1 LSB at 1–3 LSB; the speaker's idle detector sees nothing and it
/// switches itself off. A low sine survives the codec at its own level, 30 Hz is below what a
/// small speaker reproduces, and −50 dBFS is 10 dB under the daemon's default level. Bursts are
/// enough: an idle detector resets on any sound and waits minutes (5–30 on common speakers),
/// and the link stays up between them, writing digital silence.
///
/// ```swift
/// let settings = BluetoothDefaults.settings(under: configuration.outputSettings["bluealsa"], ceiling: configuration.defaults.ceiling)
/// settings.signal   // .sine(frequency: 30), unless the user chose one
/// ```
enum BluetoothDefaults {
    static let signal = KeepAliveSignal.sine(frequency: 30)
    // −50 dBFS; a constant in range, so the check cannot fail.
    static let volume = try! Level(decibels: -50)
    static let schedule = PlaySchedule(playFor: .seconds(2), pauseFor: .seconds(28), fade: .milliseconds(200))

    /// The Bluetooth defaults under the user's own settings for that output: every setting the
    /// user gave wins. The volume never goes above the output's ceiling, nor the global one.
    static func settings(under own: OutputSettings?, ceiling: Level) -> OutputSettings {
        var settings = own ?? OutputSettings()
        // A clip given for this output is the user's choice of what it plays.
        if settings.signal == nil, settings.clip == nil { settings.signal = signal }
        if settings.schedule == nil { settings.schedule = schedule }
        if settings.volume == nil { settings.volume = min(volume, settings.ceiling ?? ceiling, ceiling) }
        return settings
    }
}
