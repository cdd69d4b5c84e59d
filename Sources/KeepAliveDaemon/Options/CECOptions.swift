import ArgumentParser

/// What keepalived tells the TV and the audio system over HDMI-CEC when the box becomes active
/// or idle (``CECFollower``). Part of the playback options, so the options file and a reload
/// carry them, as ``PowerOptions``' hooks.
///
/// ```swift
/// let options = try CECOptions.parse(["--cec", "/dev/cec0", "--cec-standby"])
/// try options.settings   // device /dev/cec0, standby on, the TV left alone
/// ```
struct CECOptions: ParsableArguments {
    @Option(name: .customLong("cec"), help: ArgumentHelp(
        "Follow the box's real audio on HDMI-CEC through this adapter (the kernel's CEC framework, like /dev/cec0): when an output becomes active keepalived, as a Playback device, asks the audio system (an AV receiver or soundbar, logical address 5) to turn on and play it (System Audio Mode Request); the TV is left alone. An adapter that is missing or has no physical address yet is waited for.",
        valueName: "device"), completion: .file())
    var device: String?

    @Flag(name: .customLong("cec-wake-tv"), help: ArgumentHelp(
        "With --cec: also turn the TV on and switch it to the box's input (Image View On, Active Source) when the box becomes active."))
    var wakeTV = false

    @Flag(name: .customLong("cec-standby"), help: ArgumentHelp(
        "With --cec: when every output is idle (--on-idle-after), send Standby to what keepalived itself switched on in that active period (it reported standby, or nothing, before keepalived's wake): the audio system, and the TV only with --cec-wake-tv. Nothing is put in standby after another device became the active source, nor what the user switched off."))
    var standby = false

    @Flag(name: .customLong("cec-take-over"), help: ArgumentHelp(
        "With --cec: replace another program's configuration of the adapter (Kodi's libcec, cec-ctl) with keepalived's Playback device. Without it keepalived leaves such an adapter alone, says so in the log and in status, and waits for the other program to let go."))
    var takeOver = false

    mutating func validate() throws {
        _ = try settings
    }

    /// The checked settings; a nil device when `--cec` is not given.
    /// - Throws: `ValidationError` naming the option and what was wrong.
    var settings: CECFollower.Settings {
        get throws {
            guard let device else {
                if wakeTV { throw ValidationError("--cec-wake-tv goes with --cec DEVICE (the CEC adapter, like /dev/cec0)") }
                if standby { throw ValidationError("--cec-standby goes with --cec DEVICE (the CEC adapter, like /dev/cec0)") }
                if takeOver { throw ValidationError("--cec-take-over goes with --cec DEVICE (the CEC adapter, like /dev/cec0)") }
                return CECFollower.Settings()
            }
            guard device.hasPrefix("/"), device.count > 1, !device.hasSuffix("/") else {
                throw ValidationError("--cec takes the CEC adapter's device node, like /dev/cec0, not '\(device)'")
            }
            return CECFollower.Settings(device: device, machine: CECStateMachine.Settings(wakeTV: wakeTV, standby: standby, takeOver: takeOver))
        }
    }
}
