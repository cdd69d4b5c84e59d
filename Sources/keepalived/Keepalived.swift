import ArgumentParser
import KeepAliveDaemon

@main
struct Keepalived: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keepalived",
        abstract: "Keeps audio outputs awake with an inaudible stream.",
        discussion: """
            HDMI and S/PDIF receivers, soundbars, USB DACs and codecs power down after a while of \
            silence and clip the next sound. keepalived plays a near-silent loop through ALSA and \
            keeps it going through underruns, suspends, sound-server restarts and unplugging. \
            Not related to the VRRP daemon of the same name: system-wide files use 'keepalived-audio'.
            """,
        version: KeepalivedRelease.version,
        subcommands: [RunCommand.self, StartCommand.self, StopCommand.self, StatusCommand.self, EventsCommand.self, DevicesCommand.self, TestCommand.self],
        defaultSubcommand: nil
    )
}
