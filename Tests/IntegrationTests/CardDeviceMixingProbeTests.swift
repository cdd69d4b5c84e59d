import Foundation
import KeepAlive
import TestSupport
import Testing

extension Integration {
    /// The selections' one piece of I/O, ``CardDeviceMixing/probe(card:device:configurationFile:)``,
    /// against the real alsa-lib and the faulty PCM standing in for a card's hw PCM (`pcm.!hw`, as
    /// in ALSAPluginTests), read from a configuration file of the test's own.
    ///
    /// What the host cannot mimic: ALSA's device hints for a card (`dmix:CARD=vc4hdmi0,DEV=0`,
    /// `hdmi:CARD=vc4hdmi0,DEV=0`) are made only for cards the kernel has, and vc4-hdmi.conf is
    /// found by the card's driver name; this machine has no card and cannot load modules. The
    /// hints' side is unit-tested (CardDeviceMixingTests, MixingProbesTests); the whole path,
    /// `keepalived run --digital` and `keepalived devices` on a card whose driver is vc4-hdmi,
    /// is left to the VM's stand-in kernel module.
    @Suite("probing what dmix can mix")
    struct CardDeviceMixingProbeTests {
        func configuration(_ directory: URL, format: String?, hdmiFramed: Bool = false) throws -> String {
            let library = try FaultyDevice.pluginLibrary()
            let file = directory.appendingPathComponent("asound.conf")
            let hdmi = hdmiFramed ? """
                pcm.hdmi {
                    @args [ CARD DEV ]
                    @args.CARD { type string }
                    @args.DEV { type integer }
                    type iec958
                    slave { format IEC958_SUBFRAME_LE pcm { type hw card $CARD device $DEV } }
                    hdmi_mode true
                }
                """ : ""
            try """
                pcm_type.faulty { lib "\(library.path)" }
                pcm.hw {
                    @args [ CARD DEV SUBDEV ]
                    @args.CARD { type string }
                    @args.DEV { type integer }
                    @args.SUBDEV { type integer default -1 }
                    type faulty
                    state "\(directory.appendingPathComponent("state").path)"
                    \(format.map { "format \"\($0)\"" } ?? "")
                }
                \(hdmi)
                """.write(to: file, atomically: true, encoding: .utf8)
            return file.path
        }

        @Test("IEC958-only hardware (vc4-hdmi's stand-in), linear hardware, and a busy device that tells nothing")
        func probe() throws {
            let directory = try TestPaths.makeTemporaryDirectory("mixing-probe")
            defer { TestPaths.removeTemporaryDirectory(directory) }
            let iec958 = try configuration(directory, format: "IEC958_SUBFRAME_LE")
            #expect(CardDeviceMixing.probe(card: "vc4hdmi0", device: 0, configurationFile: iec958) == .iec958Only)
            let linear = try configuration(directory, format: nil)
            #expect(CardDeviceMixing.probe(card: "PCH", device: 0, configurationFile: linear) == .mixable)
            let float = try configuration(directory, format: "FLOAT_LE")
            #expect(CardDeviceMixing.probe(card: "Odd", device: 0, configurationFile: float) == .unmixable)
            // Busy: another program has it (the faulty PCM refuses opens with EBUSY for a while).
            let state = directory.appendingPathComponent("state")
            try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
            let deadline = monotonicNanoseconds() + 60_000_000_000
            try "EBUSY \(deadline)\n".write(to: state.appendingPathComponent("refuse"), atomically: true, encoding: .utf8)
            #expect(CardDeviceMixing.probe(card: "vc4hdmi0", device: 0, configurationFile: iec958) == nil)
        }

        @Test("an hdmi: that alsa-lib's configuration frames in software (vc4-hdmi.conf's shape) tells without an open")
        func configurationTells() throws {
            let directory = try TestPaths.makeTemporaryDirectory("mixing-config")
            defer { TestPaths.removeTemporaryDirectory(directory) }
            let framed = try configuration(directory, format: nil, hdmiFramed: true)
            #expect(CardDeviceMixing.framedByConfiguration("hdmi:CARD=vc4hdmi0,DEV=0", configurationFile: framed))
            let plain = try configuration(directory, format: nil)
            #expect(!CardDeviceMixing.framedByConfiguration("hdmi:CARD=vc4hdmi0,DEV=0", configurationFile: plain))
            #expect(!CardDeviceMixing.framedByConfiguration("hw:CARD=vc4hdmi0,DEV=0", configurationFile: framed))
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("state/events.log").path), "nothing opened")
        }
    }
}
