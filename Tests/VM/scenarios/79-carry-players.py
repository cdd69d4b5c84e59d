#!/usr/bin/python3
# vm: devices=aloop mode=systemd options=snd_aloop:pcm_substreams=1 timeout=400 release=yes
"""Debian's other players carried on keepalived's stream (issue 60, "real players"): mpv,
squeezelite (fed by `guest/slimserver.py`, a SlimProto server of the test's own: Debian has no
Squeezebox server) and snapclient (fed by Debian's snapserver, two pipe sources), each first
straight on `hw:CARD=Loopback,DEV=0` (what the player itself does to its audio), then through
`keepalived:CARD=Loopback,DEV=0` with the package's service running `--carry --lead-in 2s`; and
shairport-sync (AirPlay 1, fed by PulseAudio's RAOP sink), the same way but for the skip (below).

The link is the kernel's loopback card with one subdevice per device (device 0 exclusive like a
real card's); its capture side (device 1) records in real time what a receiver gets. Each run of
a player: the capture opened in the first track's rate (through keepalived: the rate its stream
already runs at, so the start is on the running stream), the player starts the first track; once
0.6 s of it reached the link the capture is closed (the loopback's cable holds one format while
either side is open) and the player skips, mid-track, to the second track in the other rate
(44.1 and 48 kHz, S16_LE stereo, alternating so that each carried run starts in the rate the run
before left); once device 0 runs in the new rate (the player's own open on `hw:`, keepalived's
reopen through `keepalived:`, whose 2 s lead-in covers the capture's open) the capture opens
again in it, the track plays to its end, the player stops and quits. Every track is a ramp
tagged for its player, mode and place (Tests/VM/linkcapture.py: no zero frame, no frame
repeated); the host (79-carry-players.host.py) finds each on the link and checks it bit for bit,
keepalived's signal before and after, and the zero runs.

Unity everywhere: mpv at --volume=100 (max 100), no filters (--af=), no replaygain, the file's own
rate and format per track (loadfile's options), 0.4 s ALSA buffer; squeezelite at gain 0x10000
(its own volume skipped), S16_LE (-a 400:4:16:1), no resampling, its output closed when idle
(-C 1); snapclient at the server's 100 % (its software mixer touches nothing then), PCM codec.

shairport-sync 3.3.8 plays AirPlay 1 at 44.1 kHz only, so its run has no skip: on hw: the capture
opens in 44.1 kHz first; carried, the run starts in keepalived's reopen (its stream left in 48 kHz)
and the capture opens in the lead-in, as a skip's. shairport-sync starts, then PulseAudio (its own `module-raop-sink` given the server's
address: no discovery; ALAC over UDP, RSA-encrypted, which shairport-sync decodes bit for bit)
and `paplay` of one 13 s ramp (over three tags) with no silence in it: PulseAudio's sink FLUSHes
when its stream ends, and shairport-sync then drops what it holds (AirPlay's 2 s of latency).
Once paplay has ended and shairport-sync has logged its sync statistics (one line per 1003
packets, 8 s), PulseAudio stops and shairport-sync quits. Its volume is ignored
(`ignore_volume_control`: unity, no dither on the music), S16_LE at 44100 asked for,
interpolation `basic`: to keep in sync it inserts a frame (the mean of its neighbours: with the
ramp, the frame before it again) or drops one at a random place in a packet, which the host
counts, and checks every stretch between two such points bit for bit. Through `keepalived:` it
times by `snd_pcm_delay` (its precision timing is for names beginning with hw:, and the loopback
gives no update timestamps: on `hw:` too). shairport-sync needs Avahi's daemon (its only mDNS
backend; it exits without it): the test starts one on the system bus, masked at boot.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import slimserver
import vmtest as vt

sys.path.insert(0, os.path.join(os.environ.get("VM_REPO", "."), "Tests", "VM"))
import linkcapture as lc  # noqa: E402

from looplink import CAPTURE, HW, PLUGIN, UNIT, Holders, holder, loop, snapserver_rpc, start_service  # noqa: E402
SECONDS = 1.5
SKIP_AT = 0.6  # seconds of the first track on the link before the skip
LEAD_IN = 2
PLAYERS = ["mpv", "squeezelite", "snapclient"]
AIRPLAY = "shairport-sync"
AIRPLAY_SECONDS = 13  # one ramp over three tags (linkcapture: 240000 frames each)
AIRPLAY_TAGS = {False: 13, True: 16}  # its first tag on hw: and carried (the others' end at 12)
AIRPLAY_STATS = 1  # statistics lines to wait for, per run (one per 1003 packets: 8 s)
PLAYER_ENV = dict(vt.ROOT_ENV, KEEPALIVED_RELEASE_TIMEOUT="1000")
MANIFEST = []


def device_rate():
    """The rate device 0 runs at (RUNNING, stereo), or None."""
    p = vt.hw_params(loop, 0, 0)
    if not p or vt.pcm_state(loop, 0, 0) != "RUNNING" or p.get("channels") != "2":
        return None
    return int(p.get("rate", "0 ").split()[0])


def tag(player, carried, track):
    return 1 + 4 * PLAYERS.index(player) + 2 * carried + track


class Capture:
    """arecord on device 1 in `rate` into io/NAME (raw S16_LE stereo)."""

    def __init__(self, name, rate):
        self.path = os.path.join("/tmp", name)
        self.name, self.rate = name, rate
        self.proc = subprocess.Popen(["arecord", "-q", "-D", CAPTURE, "-f", "S16_LE", "-r", str(rate), "-c", "2", "-t", "raw",
                                      "--buffer-time=1000000", self.path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.running = vt.wait_until(lambda: vt.pcm_state(loop, 1, 0, "c") == "RUNNING" or self.proc.poll() is not None, 15, 0.02)

    def last(self, t, span=1):
        """The ramp index n of the last frame captured when it is track `t`'s (a ramp over `span`
        tags from `t`), else None."""
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size // lc.FRAME * lc.FRAME
                if size < lc.FRAME:
                    return None
                f.seek(size - lc.FRAME)
                left, right = int.from_bytes(f.read(2), "little", signed=True), int.from_bytes(f.read(2), "little", signed=True)
        except OSError:
            return None
        if 1 <= left <= lc.SPAN and right >= 1 and t <= (right - 1) // 8 < t + span:
            return ((right - 1) // 8 - t) * 8 * lc.SPAN + (right - 1) % 8 * lc.SPAN + left - 1
        return None

    def close(self):
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        vt.wait_until(lambda: vt.pcm_state(loop, 1, 0, "c") in (None, "CLOSED"), 10, 0.02)
        if os.path.exists(self.path):
            shutil.move(self.path, os.path.join(vt.IO, self.name))
        return out.strip()


def wait_track(cap, t, frames, timeout=30):
    """Until track `t` has reached the link and ended there (its last frame seen, or the link
    past it), bounded."""
    seen = [False]

    def ended():
        n = cap.last(t)
        if n is not None:
            seen[0] = True
        return seen[0] and (n is None or n >= frames - 1)
    return vt.wait_until(ended, timeout, 0.05)


# -- the players: start(track, rate), skip(track, rate), stop(), quit() ------------------------

class Mpv:
    def __init__(self, device):
        self.sock_path = "/tmp/mpv.sock"
        if os.path.exists(self.sock_path):
            os.remove(self.sock_path)
        self.proc = subprocess.Popen(["mpv", "--no-config", "--idle=yes", f"--input-ipc-server={self.sock_path}", "--no-video",
                                      "--ao=alsa", f"--audio-device=alsa/{device}", "--volume=100", "--volume-max=100", "--af=",
                                      "--replaygain=no", "--gapless-audio=no", "--audio-buffer=1", "--alsa-buffer-time=400000",
                                      "--msg-level=all=warn,ao=v"],
                                     stdout=open("/tmp/mpv.log", "a"), stderr=subprocess.STDOUT, env=PLAYER_ENV)
        vt.wait_until(lambda: os.path.exists(self.sock_path) or self.proc.poll() is not None, 30, 0.1)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.sock_path)

    def cmd(self, *args):
        self.sock.sendall(json.dumps({"command": list(args)}).encode() + b"\n")

    def start(self, t, rate):
        # The file's own rate and format, so that mpv converts nothing.
        self.cmd("loadfile", f"/tmp/t{t}.wav", "replace", f"audio-samplerate={rate},audio-format=s16")

    skip = start

    def stop(self):
        self.cmd("stop")

    def quit(self):
        self.cmd("quit")
        return self.proc


class Squeezelite:
    server = None

    def __init__(self, device):
        if Squeezelite.server is None:
            Squeezelite.server = slimserver.SlimServer()
        self.server = Squeezelite.server
        helos = self.server.count("HELO")
        self.proc = subprocess.Popen(["squeezelite", "-s", "127.0.0.1", "-o", device, "-a", "400:4:16:1", "-C", "1", "-r", "44100,48000",
                                      "-n", "link", "-m", "02:00:00:00:00:79", "-f", "/tmp/squeezelite.log"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=PLAYER_ENV)
        self.server.wait_event("HELO", 30, after=helos)

    def start(self, t, rate):
        self.server.play(f"/tmp/t{t}.raw", rate)

    def skip(self, t, rate):
        self.server.stop()
        self.server.play(f"/tmp/t{t}.raw", rate)

    def stop(self):
        self.server.stop()
        self.server.off()

    def quit(self):
        self.proc.terminate()
        return self.proc


def quit_player(p):
    """The player asked to quit (killed if it has not after 15 s), with the link recorded 0.6 s
    before (keepalived's signal after it when carried) and 0.3 s after."""
    time.sleep(0.6)
    proc = p.quit()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    time.sleep(0.3)


SNAPCONF = "/tmp/snapserver.conf"


class Snapclient:
    """snapserver with two pipe sources (44.1 and 48 kHz, PCM codec); the skip moves the
    client's group to the other one (JSON-RPC Group.SetStream), the track is written into it
    once the capture runs."""

    def __init__(self, device):
        with open(SNAPCONF, "w") as f:
            f.write("[server]\ndatadir = /tmp/snapdata\n[http]\nenabled = false\n[stream]\n"
                    "source = pipe:///tmp/snap48?name=s48000&sampleformat=48000:16:2&codec=pcm&mode=create\n"
                    "source = pipe:///tmp/snap44?name=s44100&sampleformat=44100:16:2&codec=pcm&mode=create\n"
                    "[logging]\nsink = file:/tmp/snapserver.log\n")
        # A fresh server state: a client starts in the group's first source (48 kHz).
        shutil.rmtree("/tmp/snapdata", ignore_errors=True)
        os.makedirs("/tmp/snapdata")
        self.server = subprocess.Popen(["snapserver", "-c", SNAPCONF], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        vt.wait_until(lambda: self.rpc("Server.GetStatus") is not None, 30, 0.2)
        self.log_path = f"/tmp/snapclient-{'hw' if device == HW else 'carried'}.log"
        self.proc = subprocess.Popen(["snapclient", "-h", "127.0.0.1", "--player", "alsa:buffer_time=400,fragments=4", "-s", device,
                                      f"--logsink=file:{self.log_path}", "--logfilter=*:notice,Alsa:info"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     env=PLAYER_ENV)
        vt.wait_until(lambda: self.group() is not None, 30, 0.2)
        self.writer = None

    def rpc(self, method, params=None):
        return snapserver_rpc(method, params)

    def group(self):
        status = self.rpc("Server.GetStatus")
        groups = status and [g for g in status["server"]["groups"] if any(c["connected"] for c in g["clients"])]
        return groups[0] if groups else None

    def feed(self, t, rate, go):
        """Into the source's pipe: digital zero until `go` is set, then the track, then 0.5 s of
        zero: snapclient opens its PCM only once audio comes, and plays no last part of a period
        that a stream ends in (on hw: too), so the track is framed by the player's own silence.
        The pipe's reader takes it in real time: a blocking write paces it."""
        piece = bytes(rate // 50 * lc.FRAME)  # 20 ms

        def run():
            with open(f"/tmp/t{t}.raw", "rb") as src, open(f"/tmp/snap{rate // 1000}", "wb", buffering=0) as fifo:
                while not go.is_set():
                    fifo.write(piece)
                fifo.write(src.read())
                for _ in range(25):
                    fifo.write(piece)
        self.writer = threading.Thread(target=run, daemon=True)
        self.writer.start()

    def select(self, rate):
        g = self.group()
        return g and self.rpc("Group.SetStream", {"id": g["id"], "stream_id": f"s{rate}"})

    def start(self, t, rate):
        self.select(rate)
        go = threading.Event()
        go.set()
        self.feed(t, rate, go)

    def skip(self, t, rate):
        # The capture can open only once the device runs in the new rate, which waits for
        # snapclient's PCM, which waits for audio: zero first, the track once the capture runs
        # and snapclient's PCM is set up. Through keepalived its hw_params is answered after the
        # 2 s lead-in, and snapclient skips what is late by the server's clock: a track written
        # before that lost its first 0.36 s once.
        self.select(rate)
        self.seen = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        self.rate = rate
        self.go = threading.Event()
        self.feed(t, rate, self.go)

    def set_up(self):
        """Whether snapclient's log says its PCM is set up in the new rate since the skip."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.seen)
                return f"sample rate: {self.rate} Hz".encode() in f.read()
        except OSError:
            return False

    def after_capture(self):
        vt.wait_until(self.set_up, 20, 0.05)
        self.go.set()

    def stop(self):
        pass

    def quit(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        finally:
            self.server.terminate()
            self.server.wait(timeout=10)
        return self.proc


MAKERS = {"mpv": Mpv, "squeezelite": Squeezelite, "snapclient": Snapclient}

SHAIRPORT_CONF = "/tmp/shairport-sync.conf"
PULSE_SOCKET = "/tmp/pulse-79.sock"


def avahi():
    """Avahi's daemon on the system bus (masked at boot), for shairport-sync's mDNS registration."""
    proc = subprocess.Popen(["avahi-daemon", "--no-chroot", "--no-rlimits"], stdout=open("/tmp/avahi.log", "w"), stderr=subprocess.STDOUT)
    w = vt.wait_until(lambda: "startup complete" in vt.read("/tmp/avahi.log", "") or proc.poll() is not None, 30, 0.1)
    vt.check("avahi", w and proc.poll() is None, "avahi-daemon: " + vt.one_line(vt.read("/tmp/avahi.log", "")[-300:]))
    return proc


def rtsp_sockets():
    """Port 5000's TCP sockets (shairport-sync's RTSP) in /proc/net/tcp: (local, remote, state)."""
    rows = [line.split()[1:4] for line in vt.read("/proc/net/tcp", "").splitlines()[1:]]
    return {tuple(r) for r in rows if r[0].endswith(":1388") or r[1].endswith(":1388")}


def listening():
    return any(state == "0A" for _, _, state in rtsp_sockets())


def rtsp_closed(before):
    """Whether a client's connection to port 5000 that was not there `before` has been closed by
    that client (TIME_WAIT), with none open: the sink's OPTIONS done (a run before leaves its own
    closed connections behind for a minute)."""
    now = rtsp_sockets()
    clients = [(local, state) for local, remote, state in now if remote.endswith(":1388")]
    old = {local for local, remote, _ in before if remote.endswith(":1388")}
    return any(state == "06" and local not in old for local, state in clients) and all(state != "01" for _, state in clients)


class AirPlay:
    """shairport-sync on `device`, fed by PulseAudio's RAOP sink. PulseAudio 16.1's sink
    authenticates once, at its load (an OPTIONS on a connection of its own, then closed), and
    announces a stream only after that succeeded: shairport-sync must listen before the sink
    loads (refused, the sink never plays), and a client may play only once the OPTIONS is done
    (with it still in progress, the sink never announced: "Connection already in progress")."""

    def __init__(self, device, mode):
        self.log_path = f"/tmp/shairport-sync-{mode}.log"
        self.pulse_log = f"/tmp/pulseaudio-{mode}.log"
        # Its UDP ports from 6101: PulseAudio's sink binds its own control and timing ports at 6001
        # and 6002, shairport-sync's default base.
        with open(SHAIRPORT_CONF, "w") as f:
            f.write('general = {\n  name = "link";\n  output_backend = "alsa";\n  ignore_volume_control = "yes";\n  udp_port_base = 6101;\n'
                    '  interpolation = "basic";\n  audio_backend_buffer_desired_length_in_seconds = 0.5;\n};\n'
                    f'alsa = {{\n  output_device = "{device}";\n  output_rate = 44100;\n  output_format = "S16_LE";\n}};\n'
                    'diagnostics = {\n  statistics = "yes";\n  log_verbosity = 2;\n  log_output_to = "stderr";\n};\n')
        self.proc = subprocess.Popen(["shairport-sync", "-c", SHAIRPORT_CONF], stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT,
                                     env=PLAYER_ENV)
        up = vt.wait_until(lambda: self.proc.poll() is not None or listening(), 30, 0.1)
        vt.check(f"shairport-sync-{mode}-listens", up and self.proc.poll() is None,
                 f"shairport-sync on port 5000 after {up.seconds:.1f} s: " + vt.one_line(vt.read(self.log_path, "")[-300:]))
        before = rtsp_sockets()
        if os.path.exists(PULSE_SOCKET):
            os.remove(PULSE_SOCKET)
        with open("/tmp/pulse-79.pa", "w") as f:
            f.write(f"load-module module-native-protocol-unix socket={PULSE_SOCKET} auth-anonymous=1\n"
                    "load-module module-raop-sink server=127.0.0.1:5000 sink_name=airplay protocol=UDP encryption=RSA codec=ALAC\n"
                    "set-default-sink airplay\n")
        self.pulse = subprocess.Popen(["pulseaudio", "-n", "-F", "/tmp/pulse-79.pa", "--daemonize=no", "--exit-idle-time=-1",
                                       "--use-pid-file=no", "--system=no", "--log-target=stderr", "--log-level=info",
                                       # As root it would take a real-time thread, which on the one
                                       # emulated CPU could starve the rest.
                                       "--realtime=no", "--high-priority=no"],
                                      stdout=open(self.pulse_log, "w"), stderr=subprocess.STDOUT, env=vt.ROOT_ENV)
        w = vt.wait_until(lambda: (os.path.exists(PULSE_SOCKET) and rtsp_closed(before)) or self.pulse.poll() is not None, 30, 0.1)
        vt.check(f"pulseaudio-{mode}", w and self.pulse.poll() is None, f"PulseAudio with module-raop-sink, its OPTIONS done after "
                 f"{w.seconds:.1f} s: " + vt.one_line(vt.read(self.pulse_log, "")[-300:]))
        self.paplay = None

    def start(self, t, rate):
        self.paplay = subprocess.Popen(["paplay", "-d", "airplay", f"/tmp/t{t}.wav"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, env=dict(vt.ROOT_ENV, PULSE_SERVER=f"unix:{PULSE_SOCKET}"))

    def statistics(self):
        """shairport-sync's statistics lines so far (sync error in ms first)."""
        return [line for line in vt.read(self.log_path, "").splitlines()
                if line.count(",") >= 16 and "player.c" in line and "sync error" not in line.lower()]

    def stop(self):
        """PulseAudio's end: its RAOP sink's TEARDOWN, on which shairport-sync closes its PCM."""
        out = ""
        if self.paplay:
            try:
                out = self.paplay.communicate(timeout=15)[0]
            except subprocess.TimeoutExpired:
                self.paplay.kill()
                out = "(did not end: killed) " + self.paplay.communicate()[0]
        self.pulse.terminate()
        try:
            self.pulse.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.pulse.kill()
            self.pulse.wait()
        return out

    def quit(self):
        self.proc.terminate()
        return self.proc


def airplay_session(carried, kpid):
    """shairport-sync's run: the capture, one 44.1 kHz track through AirPlay, its statistics."""
    mode = "carried" if carried else "hw"
    name = f"{AIRPLAY}-{mode}"
    rate, t = 44100, AIRPLAY_TAGS[carried]
    frames = rate * AIRPLAY_SECONDS
    if carried:
        # Started in keepalived's reopen, the hard case for a synchronising player: its first
        # frames wait for the 2 s lead-in while its delay must say so (before keepalived counted
        # the lead-in in it, shairport-sync stayed 480 ms out of sync for the whole track). The
        # stream is left in 48 kHz first (the run before leaves 44.1), the capture (the cable's
        # one format) closed until keepalived runs in 44.1 kHz.
        if device_rate() == rate:
            r = vt.run(["aplay", "-q", "-D", PLUGIN, "/tmp/t0.wav"], timeout=60, env=PLAYER_ENV)
            vt.note(f"{name}: aplay of 0.2 s at 48000 Hz first, exit {r.returncode}")
        w = vt.wait_until(lambda: device_rate() == 48000 and holder() == kpid, 15, 0.05)
        vt.check(f"{name}-stream-in-48000", w, f"keepalived's stream before {AIRPLAY}: {vt.hw_params(loop, 0, 0).get('rate')}, "
                 f"held by {holder()} (keepalived {kpid})")
    holders = Holders()
    device = PLUGIN if carried else HW
    p = AirPlay(device, mode)
    vt.note(f"{name}: device 0 in {vt.hw_params(loop, 0, 0).get('rate')} Hz once shairport-sync listens")
    cap = None
    if not carried:
        cap = Capture(f"{name}.raw", rate)
        if not vt.check(f"{name}-capture", cap.running, f"arecord -r {rate}: {vt.pcm_state(loop, 1, 0, 'c')}"):
            cap.close()
            quit_player(p)
            return
        time.sleep(0.5)  # the link before the player
    t0 = time.monotonic()
    p.start(t, rate)
    if carried:
        w = vt.wait_until(lambda: device_rate() == rate and holder() == kpid, 30, 0.02)
        reopened = time.monotonic() - t0
        cap = Capture(f"{name}.raw", rate)
        vt.check(f"{name}-capture-in-lead-in", w and cap.running,
                 f"keepalived in {vt.hw_params(loop, 0, 0).get('rate')} Hz {reopened:.2f} s after paplay's start, the capture "
                 f"{vt.pcm_state(loop, 1, 0, 'c')} {time.monotonic() - t0 - reopened:.2f} s after that (the lead-in: {LEAD_IN} s)")
    w = vt.wait_until(lambda: cap.last(t, 3) is not None, 30, 0.05)
    vt.check(f"{name}-track", w, f"the track ({rate} Hz) through {device} on the link {time.monotonic() - t0:.2f} s after paplay's start")
    # paplay ends when PulseAudio has sent the file; its sink then FLUSHes, and shairport-sync drops
    # what it holds (AirPlay's 2 s of latency) and closes its PCM: the track's last 2 s never play.
    w = vt.wait_until(lambda: p.paplay.poll() is not None, 60, 0.1)
    vt.check(f"{name}-sent", w, f"paplay ended {time.monotonic() - t0:.2f} s after its start ({AIRPLAY_SECONDS} s of track)")
    w = vt.wait_until(lambda: len(p.statistics()) >= AIRPLAY_STATS or p.proc.poll() is not None, 20, 0.2)
    vt.check(f"{name}-statistics", w, f"{len(p.statistics())} lines of shairport-sync's statistics {time.monotonic() - t0:.1f} s after "
             "paplay's start")
    vt.note(f"{name}: stop at {time.monotonic():.2f}")
    out = p.stop()
    closed = vt.wait_until(lambda: holder() != p.proc.pid, 15, 0.02)
    vt.note(f"{name}: shairport-sync's PCM closed {closed.seconds:.2f} s after PulseAudio's end; paplay: {vt.one_line(out, 200)}")
    quit_player(p)
    rec = cap.close()
    seen = holders.stop()
    if carried:
        vt.check(f"{name}-carried", seen <= {kpid}, f"device 0 held by {sorted(map(str, seen))} while {AIRPLAY} ran (keepalived {kpid})")
    else:
        vt.note(f"{name}: device 0 held by {sorted(map(str, seen))} (shairport-sync {p.proc.pid})")
    if rec:
        vt.note(f"{name}: arecord: {vt.one_line(rec, 200)}")
    for log in (p.log_path, p.pulse_log):
        shutil.copy(log, vt.IO)
    stats = p.statistics()
    vt.note(f"{name}: shairport-sync's statistics (sync error ms, net correction ppm, corrections ppm, packets, missing, late, too "
            f"late, resend requests, min DAC queue, min/max buffer, nominal/actual/output fps, drift ppm, samples, correction ppm): "
            + " | ".join(" ".join(line.split('"')[-1].split()) for line in stats))
    MANIFEST.append(f"{AIRPLAY} {mode} {name}.raw {t} {frames} {rate} airplay")
    with open(os.path.join(vt.IO, "runs.txt"), "w") as f:
        f.write("\n".join(MANIFEST) + "\n")


def session(player, carried, kpid):
    """One player's start, mid-track skip to the other rate, end and stop, with the captures."""
    mode = "carried" if carried else "hw"
    name = f"{player}-{mode}"
    first = [48000, 44100][PLAYERS.index(player) % 2]
    second = 48000 if first == 44100 else 44100
    t1, t2 = tag(player, carried, 0), tag(player, carried, 1)
    frames2 = int(second * SECONDS)
    if carried:
        w = vt.wait_until(lambda: device_rate() == first and holder() == kpid, 15, 0.05)
        vt.check(f"{name}-stream-in-{first}", w, f"keepalived's stream before {player}: {vt.hw_params(loop, 0, 0).get('rate')}, "
                 f"held by {holder()} (keepalived {kpid})")
    cap = Capture(f"{name}-1.raw", first)
    if not vt.check(f"{name}-capture-1", cap.running, f"arecord -r {first}: {vt.pcm_state(loop, 1, 0, 'c')}"):
        cap.close()
        return
    time.sleep(0.5)  # the link before the player (keepalived's signal when carried)
    holders = Holders()
    device = PLUGIN if carried else HW
    t0 = time.monotonic()
    vt.note(f"{name}: start at {t0:.2f}")
    p = MAKERS[player](device)
    p.start(t1, first)
    w = vt.wait_until(lambda: (cap.last(t1) or 0) >= SKIP_AT * first, 45, 0.05)
    started = time.monotonic() - t0
    vt.check(f"{name}-start", w, f"{player} on {device}: {SKIP_AT} s of the first track ({first} Hz) on the link "
             f"{started:.2f} s after the player's start")
    rec1 = cap.close()
    vt.note(f"{name}: skip at {time.monotonic():.2f}")
    # The skip, mid-track, to the other rate: on hw: the player opens the device again in it;
    # through keepalived, keepalived's stream is opened again in it and its lead-in plays.
    p.skip(t2, second)
    w = vt.wait_until(lambda: device_rate() == second, 20, 0.02)
    vt.check(f"{name}-skip-reopened", w, f"device 0 in {second} Hz {w.seconds:.2f} s after the skip: {vt.hw_params(loop, 0, 0).get('rate')}")
    cap = Capture(f"{name}-2.raw", second)
    vt.check(f"{name}-capture-2", cap.running, f"arecord -r {second}: {vt.pcm_state(loop, 1, 0, 'c')}")
    if player == "snapclient":
        p.after_capture()
    w = wait_track(cap, t2, frames2, 45)
    vt.check(f"{name}-second-track", w, f"the second track ({second} Hz) on the link and ended {w.seconds:.2f} s after the capture's start")
    vt.note(f"{name}: stop at {time.monotonic():.2f}")
    p.stop()
    quit_player(p)
    rec2 = cap.close()
    seen = holders.stop()
    if carried:
        # None: keepalived's one reopen in the second track's rate.
        vt.check(f"{name}-carried", kpid in seen and seen <= {kpid, None},
                 f"device 0 held by {sorted(map(str, seen))} while {player} ran (keepalived {kpid}; None: its reopen in the new rate)")
    else:
        vt.note(f"{name}: device 0 held by {sorted(map(str, seen))}")
    if rec1 or rec2:
        vt.note(f"{name}: arecord: {vt.one_line(rec1 + ' ' + rec2, 200)}")
    MANIFEST.append(f"{player} {mode} {name}-1.raw {t1} {int(first * SECONDS)} {first} first")
    MANIFEST.append(f"{player} {mode} {name}-2.raw {t2} {frames2} {second} second")
    with open(os.path.join(vt.IO, "runs.txt"), "w") as f:
        f.write("\n".join(MANIFEST) + "\n")


# The tracks, made by the host (Python under TCG would take seconds each).
rc, text = vt.host("player-tracks", SECONDS, *PLAYERS, AIRPLAY)
if not vt.check("tracks", rc == 0, text):
    vt.finish()
for name in os.listdir(vt.IO):
    if name.startswith("t") and (name[1:].split(".")[0].isdigit() or name == "tp.wav"):
        with open(os.path.join(vt.IO, name), "rb") as src, open(os.path.join("/tmp", name), "wb") as dst:
            dst.write(src.read())

# Straight on hw: first: what each player does to its audio by itself.
for player in PLAYERS:
    session(player, False, None)
avahid = avahi()
airplay_session(False, None)

vt.install_package(timeout=180)
# keepalived opens the device with the capture closed, so that it reads every rate the card takes
# (with the capture open, the cable's one format is all the card offers). Its own signal is its
# embedded clip's 44.1 kHz mono: a first carried play (aplay, 0.2 s of stereo at 48 kHz, not
# checked) leaves its stream in the first carried track's format, as a box's last track would.
code, kpid, w = start_service(f"-d {HW} --carry --lead-in {LEAD_IN}s")
if w:
    r = vt.run(["aplay", "-q", "-D", PLUGIN, "/tmp/t0.wav"], timeout=60, env=PLAYER_ENV)
    w = vt.check("primed", r.returncode == 0 and vt.wait_until(lambda: holder() == kpid and device_rate() == 48000, 15, 0.05),
                 f"aplay -D {PLUGIN} (48 kHz stereo): exit {r.returncode} {vt.one_line(r.stdout, 200)}; "
                 f"device 0 held by {holder()}, {vt.hw_params(loop, 0, 0).get('rate')}, {vt.hw_params(loop, 0, 0).get('channels')} channels")
if not vt.check("keepalived-on-the-link", code == 0 and w, f"systemctl enable --now: exit {code}; device 0 held by "
                f"{holder()} (keepalived {kpid}), {vt.hw_params(loop, 0, 0)}"):
    vt.note(vt.one_line(vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "cat"]).stdout[-600:], 600))
    vt.finish()
for player in PLAYERS:
    session(player, True, kpid)
airplay_session(True, kpid)
avahid.terminate()

journal = vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "short-monotonic"]).stdout
print("\n".join(line for line in journal.splitlines() if "carr" in line or "recover" in line)[-4000:])
vt.check("never-recovered", "recovering" not in journal, "keepalived's journal: "
         + ("; ".join(line for line in journal.splitlines() if "recover" in line)[:400] or "no recovery"))
# snapclient starts its PCM before its first write (snd_pcm_start on an empty buffer), which the
# hardware refuses (-EPIPE, still prepared): through keepalived: the same, not an underrun.
xruns = [sum(vt.read(f"/tmp/snapclient-{m}.log", "").count(w) for w in ("Broken pipe", "XRUN")) for m in ("hw", "carried")]
vt.check("snapclient-no-xrun", xruns[1] <= xruns[0], f"underruns in snapclient's log: {xruns[1]} carried, {xruns[0]} on hw:")
for log in ("/tmp/mpv.log", "/tmp/squeezelite.log", "/tmp/snapclient-hw.log", "/tmp/snapclient-carried.log", "/tmp/snapserver.log",
            "/tmp/shairport-sync-hw.log", "/tmp/shairport-sync-carried.log"):
    text = vt.read(log, "")
    with open(os.path.join(vt.IO, os.path.basename(log)), "w") as f:
        f.write(text)
    vt.note(f"{os.path.basename(log)}: " + vt.one_line(" | ".join(l for l in text.splitlines()
                                                                   if any(k in l.lower() for k in ("error", "warn", "underrun", "xrun", "alsa")))[-900:], 900))
vt.finish()
