import Glibc
@testable import KeepAlive
import Testing

@testable import KeepAliveDaemon

/// What keepalived makes of a sink from the properties PulseAudio and PipeWire's pulse server
/// give (as `pactl list sinks` shows them on real machines).
@Suite("a sound server's sink: kind, virtual or not, its PCM")
struct ServerSinkTests {
    static func sink(_ name: String, _ description: String = "", hardware: Bool = false, port: String? = nil, portType: Int = 0,
                     _ properties: [String: String] = [:]) -> ServerSink {
        var sink = ServerSink(name: name, description: description, properties: properties)
        sink.isHardware = hardware
        sink.activePort = port
        sink.activePortType = portType
        return sink
    }

    @Test("the kind comes from the bus, the port's type, then the profile's, port's and description's names", arguments: [
        // PulseAudio on an HDA card: the HDMI profile, the port typed HDMI.
        (sink("alsa_output.pci-0000_00_1f.3.hdmi-stereo", "Built-in Audio Digital Stereo (HDMI)", hardware: true, port: "hdmi-output-0", portType: 10,
              ["device.api": "alsa", "alsa.card": "0", "device.bus": "pci", "device.profile.name": "hdmi-stereo"]), OutputKind.hdmi),
        // A libpulse older than 14 types no port: the profile's name says it.
        (sink("alsa_output.pci-0000_00_1f.3.hdmi-surround", "", hardware: true, ["device.api": "alsa", "device.profile.name": "hdmi-surround"]), .hdmi),
        (sink("alsa_output.pci-0000_00_1b.0.iec958-stereo", "Built-in Audio Digital Stereo (IEC958)", hardware: true, port: "iec958-stereo-output",
              portType: 9, ["device.api": "alsa", "alsa.card": "1", "device.profile.name": "iec958-stereo"]), .spdif),
        (sink("alsa_output.pci-0000_00_1b.0.analog-stereo", "Built-in Audio Analog Stereo", hardware: true, port: "analog-output-speaker",
              portType: 2, ["device.api": "alsa", "alsa.card": "1", "device.bus": "pci", "device.profile.name": "analog-stereo"]), .analog),
        (sink("alsa_output.usb-Generic_USB_Audio-00.analog-stereo", "USB Audio Analog Stereo", hardware: true,
              ["device.api": "alsa", "alsa.card": "2", "device.bus": "usb", "device.profile.name": "analog-stereo"]), .usb),
        // A USB DAC's own S/PDIF output is S/PDIF, not "USB".
        (sink("alsa_output.usb-DAC-00.iec958-stereo", "", hardware: true, ["device.api": "alsa", "device.bus": "usb", "device.profile.name": "iec958-stereo"]), .spdif),
        // PulseAudio's bluez sink, PipeWire's bluez5 node.
        (sink("bluez_sink.00_11_22_33_44_55.a2dp_sink", "JBL Flip", hardware: true, ["device.api": "bluez", "device.bus": "bluetooth", "device.form_factor": "speaker"]), .bluetooth),
        (sink("bluez_output.00_11_22_33_44_55.1", "Headset", ["device.api": "bluez5", "device.bus": "bluetooth", "device.form_factor": "headset"]), .bluetooth),
    ])
    func kinds(_ sink: ServerSink, _ kind: OutputKind) {
        #expect(sink.kind == kind, "\(sink.name)")
        #expect(!sink.isVirtual, "\(sink.name)")
    }

    @Test("sinks that play to no device are virtual; a device's sink is not, whichever server lists it", arguments: [
        // PulseAudio: null (abstract), remap and virtual (filter) sinks; combine has no device.api.
        (sink("null", "Null Output", ["device.class": "abstract"]), true),
        (sink("remapped", "Remapped", ["device.class": "filter", "device.api": "alsa"]), true),
        (sink("combined", "Simultaneous output", [:]), true),
        // PipeWire: EasyEffects' sink is a null-audio-sink node without device.api.
        (sink("easyeffects_sink", "Easy Effects Sink", [:]), true),
        (sink("monitor", "", ["device.class": "monitor"]), true),
        (sink("alsa_output.x", "", hardware: true), false),
        (sink("alsa_output.y", "", ["device.api": "alsa"]), false),
        (sink("alsa_output.z", "", ["alsa.card": "3"]), false),
        (sink("bluez_output.w", "", ["device.bus": "bluetooth"]), false),
    ])
    func virtualSinks(_ sink: ServerSink, _ isVirtual: Bool) {
        #expect(sink.isVirtual == isVirtual, "\(sink.name)")
    }

    @Test("a sink's PCM is ALSA's pulse:DEVICE form, quoted when the name needs it, and read back", arguments: [
        ("alsa_output.pci-0000_00_1f.3.hdmi-stereo", "pulse:DEVICE=alsa_output.pci-0000_00_1f.3.hdmi-stereo"),
        ("my sink,2", "pulse:DEVICE=\"my sink,2\""),
        ("a\"b\\c", "pulse:DEVICE=\"a\\\"b\\\\c\""),
    ])
    func pcmNames(_ name: String, _ pcm: String) {
        #expect(ServerSink.pcm(forSink: name) == pcm)
        #expect(ServerSink.sinkName(fromPCM: pcm) == name)
    }

    @Test("other names are no sink's")
    func notSinks() {
        for name in ["pulse", "default", "dmix:CARD=Intel,DEV=0", "pulse:DEVICE=", "pulse:DEVICE=\"unterminated"] {
            #expect(ServerSink.sinkName(fromPCM: name) == nil, "\(name)")
        }
    }

    @Test("a server owns the cards its sinks and its cards name, also a card whose sink is gone (profile off)")
    func ownedCards() {
        let view = SoundServerView(
            server: "pulseaudio 16.1",
            sinks: [Self.sink("a", "", ["alsa.card": "0"]), Self.sink("b", "", ["device.api": "bluez5"]), Self.sink("c", "", ["alsa.card": "x"])],
            cards: [ServerCard(name: "alsa_card.usb", activeProfile: "off", properties: ["alsa.card": "2"])])
        #expect(view.ownedCards == [0, 2])
        #expect(view.sink(forPCM: "pulse:DEVICE=b")?.name == "b")
        #expect(view.sink(forPCM: "pulse:DEVICE=zz") == nil)
    }

    @Test("a selection sees sinks and cards come and go, not their states or the default sink")
    func selectionSees() {
        var running = Self.sink("a", "", ["alsa.card": "0"])
        running.state = .running
        var suspended = running
        suspended.state = .suspended
        let one = SoundServerReachability.connected(SoundServerView(server: "s", defaultSink: "a", sinks: [running]))
        let two = SoundServerReachability.connected(SoundServerView(server: "s", defaultSink: nil, sinks: [suspended]))
        #expect(SinkWatcher.selectionSees(one) == SinkWatcher.selectionSees(two))
        let three = SoundServerReachability.connected(SoundServerView(server: "s", sinks: [running, Self.sink("b")]))
        #expect(SinkWatcher.selectionSees(one) != SinkWatcher.selectionSees(three))
        #expect(SinkWatcher.selectionSees(.unreachable("refused")) == SinkWatcher.selectionSees(.unreachable("timeout")))
        #expect(SinkWatcher.selectionSees(.unknown) != SinkWatcher.selectionSees(.unreachable("")))
    }
}

@Suite("PipeWire without its pulse server: found by its socket, and said")
struct PipeWireWithoutPulseTests {
    @Test("its socket: PIPEWIRE_REMOTE, PIPEWIRE_RUNTIME_DIR or XDG_RUNTIME_DIR; only a socket counts")
    func socket() throws {
        let directory = "/tmp/keepalived-pw-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(directory, 0o700)
        defer {
            unlink(directory + "/pipewire-0")
            unlink(directory + "/not-a-socket")
            rmdir(directory)
        }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = directory + "/pipewire-0"
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        #expect(bound == 0)
        close(open(directory + "/not-a-socket", O_CREAT | O_WRONLY, 0o600))
        #expect(PipeWireWithoutPulse.socket(environment: { ["XDG_RUNTIME_DIR": directory][$0] }) == path)
        #expect(PipeWireWithoutPulse.socket(environment: { ["PIPEWIRE_RUNTIME_DIR": directory, "XDG_RUNTIME_DIR": "/nonexistent"][$0] }) == path)
        #expect(PipeWireWithoutPulse.socket(environment: { ["PIPEWIRE_REMOTE": path][$0] }) == path)
        #expect(PipeWireWithoutPulse.socket(environment: { ["XDG_RUNTIME_DIR": directory, "PIPEWIRE_REMOTE": "not-a-socket"][$0] }) == nil)
        #expect(PipeWireWithoutPulse.socket(environment: { _ in nil }) == nil)
    }

    @Test("the reason: libpulse's own without PipeWire; with it, what runs, what does not, and what to do")
    func explain() {
        #expect(PipeWireWithoutPulse.explain("Connection refused", socket: nil) == "Connection refused")
        let said = PipeWireWithoutPulse.explain("Connection refused", socket: "/run/user/1000/pipewire-0")
        #expect(said.hasPrefix("PipeWire runs (/run/user/1000/pipewire-0) but no PulseAudio server answers (Connection refused): pipewire-pulse is not running"))
        #expect(said.contains("systemctl --user enable --now pipewire-pulse.socket") && said.hasSuffix("or name an output with -d"))
    }
}
