#!/usr/bin/python3
# vm: devices=aloop mode=systemd options=snd_aloop:pcm_substreams=1 timeout=1200 release=yes
"""The network players' own pauses and hand-offs on the measured link (issue 60: "for each
player ... pause/resume ... and 100 hand-offs in a row"): snapclient (fed by Debian's snapserver)
and shairport-sync (fed by PulseAudio's RAOP sink), carried by the package's service
(`-d hw:CARD=Loopback,DEV=0 --carry`).

The rig and the host's judge are carry-chaos's (guest/carrylink.py, 77-carry-chaos.host.py):
`snd-aloop` with `pcm_substreams=1`, its capture side recorded whole, every play a ramp of its
own tag, the host finding each on the link bit for bit and what lies between them. Both players
write their own digital silence around their audio, on `hw:` as well (snapclient while its
source has no chunk for it, shairport-sync to reach its latency before the first frame), so
these cases allow zero runs: that a hand-off was carried is asserted by keepalived holding the
device throughout and by its count of carried opens.

1. snapclient (its server's two pipe sources, both 44.1 kHz S16_LE, PCM codec, unity volume),
   its source paused 2 s mid-track (nothing written into the pipe: snapclient gets no chunk
   and writes its own silence, and closes its output only after 5 s of that): every frame once
   and in order.
2. snapclient, a hundred 0.3 s tracks, its group moved to the other source before each (a
   stream switch: snapclient closes its output and opens it again for the new stream's
   codec header; both sources play zeros between tracks): a hundred carried opens, each track
   bit-exact.
3. shairport-sync (AirPlay 1, 44.1 kHz; unity volume, no drift correction within 0.5 s), a
   5.4 s track sent by `paplay` in two halves 2 s apart (PulseAudio's sink FLUSHes at each half's
   end and RECORDs at the next: AirPlay's pause; shairport-sync drops the two seconds it holds
   at the flush and closes its output): the frames that play, each once and in order.
4. shairport-sync, a hundred 3 s tracks, one `paplay` each: at each end a flush and a close,
   at each start a carried open; each track's first half second or more bit-exact, from within
   its first ten packets (shairport-sync never plays a stream's first packets, its dithered
   silence before them; and the flush drops the last two seconds it holds: on `hw:` too,
   docs/players.md).
"""

import os
import shutil
import subprocess
import threading
import time

import vmtest as vt
from carrylink import GAP, PLAYER_ENV, RATE, Link, carried, carried_opens, ramp_file

import linkcapture as lc  # noqa: E402  (its path put first by carrylink)
from looplink import HW, PLUGIN, Holders, snapserver_rpc  # noqa: E402

SNAP_HANDOFFS = 100
AIRPLAY_HANDOFFS = 100

link = Link()
kpid = link.start(f"-d {HW} --carry")


# snapserver: two pipe sources at the link's rate, each fed by a thread of the test that writes
# digital zero in 20 ms pieces (a blocking write: the server reads the pipe in real time) but
# where a track is queued for it.
SNAPCONF = "/tmp/snapserver-84.conf"
with open(SNAPCONF, "w") as f:
    f.write("[server]\ndatadir = /tmp/snapdata\n[http]\nenabled = false\n[stream]\n"
            f"source = pipe:///tmp/snapA?name=A&sampleformat={RATE}:16:2&codec=pcm&mode=create\n"
            f"source = pipe:///tmp/snapB?name=B&sampleformat={RATE}:16:2&codec=pcm&mode=create\n"
            "[logging]\nsink = file:/tmp/snapserver.log\n")
shutil.rmtree("/tmp/snapdata", ignore_errors=True)
os.makedirs("/tmp/snapdata")
snapserver = subprocess.Popen(["snapserver", "-c", SNAPCONF], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


rpc = snapserver_rpc


class Feeder:
    """One pipe source's writer: zero, or the queued tracks (each written once, whole), or
    nothing while paused."""

    PIECE = bytes(RATE // 50 * 4)  # 20 ms

    def __init__(self, name):
        self.path = f"/tmp/snap{name}"
        self.queue = []
        self.lock = threading.Lock()
        self.written = threading.Condition(self.lock)
        self.done = 0
        self.paused = threading.Event()
        self.paused.set()  # set: writing
        self.running = True
        vt.wait_until(lambda: os.path.exists(self.path), 30, 0.1)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        with open(self.path, "wb", buffering=0) as fifo:
            while self.running:
                self.paused.wait()
                with self.lock:
                    data = self.queue.pop(0) if self.queue else None
                if data is None:
                    fifo.write(self.PIECE)
                    continue
                for at in range(0, len(data), len(self.PIECE)):
                    self.paused.wait()
                    fifo.write(data[at:at + len(self.PIECE)])
                with self.lock:
                    self.done += 1
                    self.written.notify_all()

    def play(self, data):
        """Queues `data`; the count of tracks written once it is."""
        with self.lock:
            self.queue.append(data)
            return self.done + len(self.queue)

    def wait_written(self, count, timeout):
        with self.lock:
            return self.written.wait_for(lambda: self.done >= count, timeout)


up = vt.wait_until(lambda: rpc("Server.GetStatus") is not None, 30, 0.2)
feeders = {name: Feeder(name) for name in ("A", "B")}
SNAPLOG = "/tmp/snapclient-84.log"
snap_began = link.now()  # its source's zeros play from its first open: its own, case 1's
snapclient = subprocess.Popen(["snapclient", "-h", "127.0.0.1", "--player", "alsa:buffer_time=400,fragments=4", "-s", PLUGIN,
                               f"--logsink=file:{SNAPLOG}", "--logfilter=*:notice,Alsa:info"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=PLAYER_ENV)


def group():
    status = rpc("Server.GetStatus")
    groups = status and [g for g in status["server"]["groups"] if any(c["connected"] for c in g["clients"])]
    return groups[0] if groups else None


def select(stream):
    g = group()
    return bool(g and rpc("Group.SetStream", {"id": g["id"], "stream_id": stream}) is not None)


joined = vt.wait_until(lambda: group() is not None, 30, 0.2)
vt.check("snapclient-connects", up and joined and select("A"), f"snapserver up {bool(up)}, snapclient in a group {bool(joined)}")
# snapclient's first open (its source plays zeros), then the cases on its running output.
vt.wait_until(lambda: carried_opens("snapclient") > 0, 20, 0.1)
time.sleep(1.0)

# 1. snapclient's source paused 2 s mid-track: tag 700.
frames = ramp_file(700, 3)
with open("/tmp/ramp-700.raw", "rb") as f:
    track = f.read()
holders = Holders()
opens_before = carried_opens("snapclient")
count = feeders["A"].play(track[:RATE * 4])  # its first second
written = feeders["A"].wait_written(count, 30)
feeders["A"].paused.clear()
time.sleep(2.0)
count = feeders["A"].play(track[RATE * 4:])
feeders["A"].paused.set()
written = feeders["A"].wait_written(count, 30) and written
time.sleep(2.0)  # snapclient's buffer (1 s) and its ALSA buffer, played out
seen = holders.stop()
vt.check("snapclient-pause-played", written, f"the track written into source A, 2 s of nothing after its first second: {written}")
vt.note(f"keepalived carried {carried_opens('snapclient') - opens_before} opens of snapclient's for the paused track")
carried("snapclient-pause", seen, kpid, "snapclient paused and resumed")
link.case("snapclient-pause", [700], frames, "split", player_silence=True, zeros_ok=True, began=snap_began)

# 2. snapclient, a hundred tracks, a stream switch before each: tags 800..899.
for i in range(SNAP_HANDOFFS):
    snap_frames = ramp_file(800 + i, 0.3)
holders = Holders()
opens_before = carried_opens("snapclient")
failed, t = [], time.monotonic()
for i in range(SNAP_HANDOFFS):
    if len(failed) >= 3:
        break
    stream = "B" if i % 2 == 0 else "A"
    before = carried_opens("snapclient")
    if not select(stream):
        failed.append(f"{i}: Group.SetStream {stream} refused")
        continue
    # Its output opened again for the new stream before the track comes.
    if not vt.wait_until(lambda: carried_opens("snapclient") > before, 10, 0.05):
        failed.append(f"{i}: no new open of snapclient's in 10 s after the switch to {stream}")
    with open(f"/tmp/ramp-{800 + i}.raw", "rb") as f:
        count = feeders[stream].play(f.read())
    if not feeders[stream].wait_written(count, 10):
        failed.append(f"{i}: track not written in 10 s")
    time.sleep(1.6)  # the server's 1 s buffer and snapclient's 0.4 s one, played out
took = time.monotonic() - t
seen = holders.stop()
opens = carried_opens("snapclient") - opens_before
vt.check("snapclient-handoffs-played", not failed, f"{SNAP_HANDOFFS} tracks in {took:.1f} s; failed: {'; '.join(failed[:4]) or 'none'}")
vt.check("snapclient-handoffs-opens", opens >= SNAP_HANDOFFS, f"keepalived carried {opens} opens of snapclient's for its {SNAP_HANDOFFS} stream switches")
carried("snapclient-handoffs", seen, kpid, "snapclient's hundred tracks")
link.case("snapclient-handoffs", list(range(800, 800 + SNAP_HANDOFFS)), snap_frames, "exact", signal_between=True, player_silence=True,
          zeros_ok=True, late_start_ok=1)
snapclient.terminate()
try:
    snapclient.wait(timeout=15)
except subprocess.TimeoutExpired:
    snapclient.kill()
for feeder in feeders.values():
    feeder.running = False
snapserver.terminate()
snapserver.wait(timeout=15)
shutil.copy(SNAPLOG, vt.IO)
time.sleep(GAP)

# shairport-sync, fed by PulseAudio's RAOP sink (as in carry-players: Avahi's daemon for its
# mDNS registration, masked at boot; its UDP ports from 6101, PulseAudio's sink binds 6001-6002).
avahi = subprocess.Popen(["avahi-daemon", "--no-chroot", "--no-rlimits"], stdout=open("/tmp/avahi.log", "w"), stderr=subprocess.STDOUT)
vt.wait_until(lambda: "startup complete" in vt.read("/tmp/avahi.log", "") or avahi.poll() is not None, 30, 0.1)
SHAIRPORT_CONF = "/tmp/shairport-sync-84.conf"
SHAIRPORT_LOG = "/tmp/shairport-sync-84.log"
with open(SHAIRPORT_CONF, "w") as f:
    f.write('general = {\n  name = "link";\n  output_backend = "alsa";\n  ignore_volume_control = "yes";\n  udp_port_base = 6101;\n'
            '  interpolation = "basic";\n  drift_tolerance_in_seconds = 0.5;\n  audio_backend_buffer_desired_length_in_seconds = 0.5;\n};\n'
            f'alsa = {{\n  output_device = "{PLUGIN}";\n  output_rate = 44100;\n  output_format = "S16_LE";\n}};\n'
            'diagnostics = {\n  log_verbosity = 1;\n  log_output_to = "stderr";\n};\n')
shairport = subprocess.Popen(["shairport-sync", "-c", SHAIRPORT_CONF], stdout=open(SHAIRPORT_LOG, "w"), stderr=subprocess.STDOUT, env=PLAYER_ENV)


def rtsp_sockets():
    rows = [line.split()[1:4] for line in vt.read("/proc/net/tcp", "").splitlines()[1:]]
    return {tuple(r) for r in rows if r[0].endswith(":1388") or r[1].endswith(":1388")}


listens = vt.wait_until(lambda: shairport.poll() is not None or any(s == "0A" for _, _, s in rtsp_sockets()), 30, 0.1)
before = rtsp_sockets()
PULSE_SOCKET = "/tmp/pulse-84.sock"
with open("/tmp/pulse-84.pa", "w") as f:
    f.write(f"load-module module-native-protocol-unix socket={PULSE_SOCKET} auth-anonymous=1\n"
            "load-module module-raop-sink server=127.0.0.1:5000 sink_name=airplay protocol=UDP encryption=RSA codec=ALAC\n"
            "set-default-sink airplay\n")
pulse = subprocess.Popen(["pulseaudio", "-n", "-F", "/tmp/pulse-84.pa", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                          "--system=no", "--log-target=stderr", "--log-level=info", "--realtime=no", "--high-priority=no"],
                         stdout=open("/tmp/pulseaudio-84.log", "w"), stderr=subprocess.STDOUT, env=vt.ROOT_ENV)


def options_done():
    """The sink's OPTIONS (its authentication, on a connection of its own) done and closed."""
    clients = [(local, state) for local, remote, state in rtsp_sockets() if remote.endswith(":1388")]
    old = {local for local, remote, _ in before if remote.endswith(":1388")}
    return any(state == "06" and local not in old for local, state in clients) and all(state != "01" for _, state in clients)


ready = vt.wait_until(lambda: (os.path.exists(PULSE_SOCKET) and options_done()) or pulse.poll() is not None, 30, 0.1)
vt.check("shairport-sync-ready", listens and ready and shairport.poll() is None and pulse.poll() is None,
         f"shairport-sync listening {bool(listens)}, PulseAudio's RAOP sink authenticated {bool(ready)}: "
         + vt.one_line(vt.read(SHAIRPORT_LOG, "")[-300:]))
PULSE_ENV = dict(vt.ROOT_ENV, PULSE_SERVER=f"unix:{PULSE_SOCKET}")


def paplay(path):
    return subprocess.run(["paplay", "-d", "airplay", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PULSE_ENV,
                          timeout=60)


def released(opens):
    """keepalived carries no shairport-sync now and has carried `opens` or more of its opens."""
    journal = vt.run(["journalctl", "-u", "keepalived-audio", "--no-pager", "-o", "cat"]).stdout.splitlines()
    last = [line for line in journal if line.startswith("carrying a player") or line.startswith("carries no player now")]
    return carried_opens("shairport-sync") >= opens and bool(last) and last[-1].startswith("carries no player now")


# 3. shairport-sync paused: one track in two halves, 2 s apart: tag 900.
frames = ramp_file(900, 5.4)  # the longest ramp (Tests/VM/linkcapture.py), in two halves
with open("/tmp/ramp-900.raw", "rb") as f:
    track = f.read()
for half, part in enumerate((track[:len(track) // 2], track[len(track) // 2:])):
    with open(f"/tmp/ramp-900-{half}.wav", "wb") as f:
        f.write(lc.wav(part, RATE))
holders = Holders()
air_began = link.now()  # its own dithered silence comes before its first frame: case 3's
opens_before = carried_opens("shairport-sync")
first = paplay("/tmp/ramp-900-0.wav")
closed = vt.wait_until(lambda: released(opens_before + 1), 15, 0.05)
time.sleep(2.0)
second = paplay("/tmp/ramp-900-1.wav")
closed = vt.wait_until(lambda: released(opens_before + 2), 15, 0.05) and closed
seen = holders.stop()
vt.check("shairport-sync-pause-played", first.returncode == 0 and second.returncode == 0 and closed,
         f"paplay exits {first.returncode} {second.returncode}; shairport-sync's output closed after each half: {bool(closed)}; "
         f"{carried_opens('shairport-sync') - opens_before} carried opens")
carried("shairport-sync-pause", seen, kpid, "shairport-sync paused and resumed")
link.case("shairport-sync-pause", [900], frames, "no-repeat", zeros_ok=True, player_dither=True, began=air_began)

# 4. shairport-sync, a hundred tracks, each its own paplay: tags 1000..1099.
for i in range(AIRPLAY_HANDOFFS):
    air_frames = ramp_file(1000 + i, 3)
holders = Holders()
air_began = link.now()
opens_before = carried_opens("shairport-sync")
failed, t = [], time.monotonic()
for i in range(AIRPLAY_HANDOFFS):
    if len(failed) >= 3:
        break
    r = paplay(f"/tmp/ramp-{1000 + i}.wav")
    if r.returncode != 0:
        failed.append(f"{i}: paplay exit {r.returncode} {vt.one_line(r.stdout, 100)}")
    # The flush at its end closes shairport-sync's output: the next track is a new open.
    # 16.9 s once, after an underrun of shairport-sync's own ("alsa: underrun while writing").
    if not vt.wait_until(lambda: released(opens_before + i + 1), 60, 0.05):
        failed.append(f"{i}: shairport-sync's output not carried and closed in 60 s")
took = time.monotonic() - t
seen = holders.stop()
opens = carried_opens("shairport-sync") - opens_before
vt.check("shairport-sync-handoffs-played", not failed, f"{AIRPLAY_HANDOFFS} tracks in {took:.1f} s; failed: {'; '.join(failed[:4]) or 'none'}")
vt.check("shairport-sync-handoffs-opens", opens >= AIRPLAY_HANDOFFS,
         f"keepalived carried {opens} opens of shairport-sync's for its {AIRPLAY_HANDOFFS} tracks")
carried("shairport-sync-handoffs", seen, kpid, "shairport-sync's hundred tracks")
link.case("shairport-sync-handoffs", list(range(1000, 1000 + AIRPLAY_HANDOFFS)), air_frames, "prefix", min_frames=RATE // 2,
          start_within=3520, signal_between=True, player_silence=True, zeros_ok=True, player_dither=True, began=air_began)
pulse.terminate()
pulse.wait(timeout=15)
shairport.terminate()
shairport.wait(timeout=15)
avahi.terminate()
for log in (SHAIRPORT_LOG, "/tmp/pulseaudio-84.log"):
    shutil.copy(log, vt.IO)
print((vt.read(SHAIRPORT_LOG, "") or "")[-2000:])
link.finish(30)
