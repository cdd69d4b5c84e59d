@testable import KeepAlive

/// Whole `snd_pcm_dump` texts of softvol chains (PCMChainDumpTests).
enum PCMDumpFixtures {
    struct Fixture: CustomStringConvertible, Sendable {
        let name: String
        let dump: String
        let layers: [String]
        let hardware: HardwareDevice?
        var description: String { name }
    }

    static let softvolChains: [Fixture] = [
        Fixture(name: "placeholder PCM control", dump: """
            Plug PCM: Soft volume PCM
            Control: PCM Playback Volume
            min_dB: -51
            max_dB: 0
            resolution: 256
            Its setup is:
              stream       : PLAYBACK
            Slave: IEC958 subframe conversion PCM (IEC958_SUBFRAME_LE)
            Its setup is:
              stream       : PLAYBACK
            Slave: Hooks PCM
            Its setup is:
              stream       : PLAYBACK
            Slave: Hardware PCM card 1 'vc4-hdmi-0' device 0 subdevice 0
            Its setup is:
              stream       : PLAYBACK

            """, layers: ["Plug PCM", "Soft volume PCM", "IEC958 subframe conversion PCM", "Hooks PCM", "Hardware PCM"],
            hardware: HardwareDevice(card: 1, device: 0)),
        Fixture(name: "placeholder Master control", dump: """
            Soft volume PCM
            Control: Master Playback Volume
            min_dB: -51
            max_dB: 0
            resolution: 256
            Its setup is:
              stream       : PLAYBACK
            Slave: IEC958 subframe conversion PCM (IEC958_SUBFRAME_LE)
            Its setup is:
              stream       : PLAYBACK
            Slave: Hooks PCM
            Its setup is:
              stream       : PLAYBACK
            Slave: Hardware PCM card 1 'vc4-hdmi-0' device 0 subdevice 0
            Its setup is:
              stream       : PLAYBACK

            """, layers: ["Soft volume PCM", "IEC958 subframe conversion PCM", "Hooks PCM", "Hardware PCM"],
            hardware: HardwareDevice(card: 1, device: 0)),
    ]
}
