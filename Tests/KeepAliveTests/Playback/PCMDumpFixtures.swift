@testable import KeepAlive

/// Whole `snd_pcm_dump` texts of softvol chains (PCMChainDumpTests), as alsa-lib printed them:
/// `aplay -v` on the VM's Raspberry Pi stand-in (Tests/VM/scenarios/75-pi-standin.py saves them as
/// io/dump-*.txt), under Debian 12's alsa-lib 1.2.8 and Debian 13's 1.2.14 (its trixie root),
/// cards/vc4-hdmi.conf's `default` and a softvol of the test's own over `hdmi:`. softvol prints
/// its "Control:", "min_dB:", "max_dB:" and "resolution:" lines unindented (pcm_softvol.c, the
/// same in both).
enum PCMDumpFixtures {
    struct Fixture: CustomStringConvertible, Sendable {
        let name: String
        let dump: String
        let layers: [String]
        let hardware: HardwareDevice?
        var description: String { name }
    }

    static let softvolChains: [Fixture] = [
        Fixture(name: "alsa-lib 1.2.8: the card's default (vc4-hdmi.conf): plug, softvol 'PCM Playback Volume', iec958, hooks, hw", dump: """
            Plug PCM: Soft volume PCM
            Control: PCM Playback Volume
            min_dB: -51
            max_dB: 0
            resolution: 256
            Its setup is:
              stream       : PLAYBACK
              access       : RW_INTERLEAVED
              format       : S16_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 16
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : NONE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: IEC958 subframe conversion PCM (IEC958_SUBFRAME_LE)
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : S16_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 16
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : NONE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: Hooks PCM
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : IEC958_SUBFRAME_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 32
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : NONE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: Hardware PCM card 1 'vc4-hdmi-0' device 0 subdevice 0
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : IEC958_SUBFRAME_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 32
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : NONE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
              appl_ptr     : 0
              hw_ptr       : 0

            """, layers: ["Plug PCM", "Soft volume PCM", "IEC958 subframe conversion PCM", "Hooks PCM", "Hardware PCM"], hardware: HardwareDevice(card: 1, device: 0)),
        Fixture(name: "alsa-lib 1.2.14: the card's default (vc4-hdmi.conf): plug, softvol 'PCM Playback Volume', iec958, hooks, hw", dump: """
            Plug PCM: Soft volume PCM
            Control: PCM Playback Volume
            min_dB: -51
            max_dB: 0
            resolution: 256
            Its setup is:
              stream       : PLAYBACK
              access       : RW_INTERLEAVED
              format       : S16_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 16
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : ENABLE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: IEC958 subframe conversion PCM (IEC958_SUBFRAME_LE)
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : S16_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 16
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : ENABLE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: Hooks PCM
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : IEC958_SUBFRAME_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 32
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : ENABLE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: Hardware PCM card 1 'vc4-hdmi-0' device 0 subdevice 0
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : IEC958_SUBFRAME_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 32
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : ENABLE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
              appl_ptr     : 0
              hw_ptr       : 0

            """, layers: ["Plug PCM", "Soft volume PCM", "IEC958 subframe conversion PCM", "Hooks PCM", "Hardware PCM"], hardware: HardwareDevice(card: 1, device: 0)),
        Fixture(name: "alsa-lib 1.2.8: a softvol with the control 'Master Playback Volume' over hdmi:", dump: """
            Soft volume PCM
            Control: Master Playback Volume
            min_dB: -51
            max_dB: 0
            resolution: 256
            Its setup is:
              stream       : PLAYBACK
              access       : RW_INTERLEAVED
              format       : S16_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 16
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : NONE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: IEC958 subframe conversion PCM (IEC958_SUBFRAME_LE)
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : S16_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 16
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : NONE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: Hooks PCM
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : IEC958_SUBFRAME_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 32
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : NONE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: Hardware PCM card 1 'vc4-hdmi-0' device 0 subdevice 0
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : IEC958_SUBFRAME_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 32
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : NONE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
              appl_ptr     : 0
              hw_ptr       : 0

            """, layers: ["Soft volume PCM", "IEC958 subframe conversion PCM", "Hooks PCM", "Hardware PCM"], hardware: HardwareDevice(card: 1, device: 0)),
        Fixture(name: "alsa-lib 1.2.14: a softvol with the control 'Master Playback Volume' over hdmi:", dump: """
            Soft volume PCM
            Control: Master Playback Volume
            min_dB: -51
            max_dB: 0
            resolution: 256
            Its setup is:
              stream       : PLAYBACK
              access       : RW_INTERLEAVED
              format       : S16_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 16
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : ENABLE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: IEC958 subframe conversion PCM (IEC958_SUBFRAME_LE)
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : S16_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 16
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : ENABLE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: Hooks PCM
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : IEC958_SUBFRAME_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 32
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : ENABLE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
            Slave: Hardware PCM card 1 'vc4-hdmi-0' device 0 subdevice 0
            Its setup is:
              stream       : PLAYBACK
              access       : MMAP_INTERLEAVED
              format       : IEC958_SUBFRAME_LE
              subformat    : STD
              channels     : 2
              rate         : 48000
              exact rate   : 48000 (48000/1)
              msbits       : 32
              buffer_size  : 24000
              period_size  : 6000
              period_time  : 125000
              tstamp_mode  : ENABLE
              tstamp_type  : MONOTONIC
              period_step  : 1
              avail_min    : 6000
              period_event : 0
              start_threshold  : 24000
              stop_threshold   : 24000
              silence_threshold: 0
              silence_size : 0
              boundary     : 6755399441055744000
              appl_ptr     : 0
              hw_ptr       : 0

            """, layers: ["Soft volume PCM", "IEC958 subframe conversion PCM", "Hooks PCM", "Hardware PCM"], hardware: HardwareDevice(card: 1, device: 0)),
    ]
}
