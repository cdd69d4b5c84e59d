#!/usr/bin/python3
# vm: devices=aloop mode=systemd options=snd_aloop:pcm_substreams=1 timeout=600 release=yes
"""Real players' hand-offs and pauses on the measured link, beyond carry-chaos's aplay and MPD
(issue 60: "for each player ... pause/resume ... and 100 hand-offs in a row"): mpv and
squeezelite, carried by the package's service (`-d hw:CARD=Loopback,DEV=0 --carry`).

The rig and the host's judge are carry-chaos's (guest/carrylink.py, 77-carry-chaos.host.py):
`snd-aloop` with `pcm_substreams=1`, its capture side recorded whole, every play a ramp of its
own tag, the host finding each on the link bit for bit and what lies between them; no zero run
of 1 ms or more on the link but where a case says why. The cases:

1. mpv, a hundred 0.15 s files in one process, `--gapless-audio=no` (mpv closes its output at
   each file's end and opens it for the next: a hundred carried opens), unity and no conversion
   as carry-chaos's mpv: each file bit-exact, only keepalived's signal between two (mpv's own
   padding of its last period allowed right after a file's last frame).
2. squeezelite (fed by guest/slimserver.py; unity gain, S16_LE, no resampling, its output
   closed 1 s after it idles: `-C 1`) paused 2 s mid-track (`strm p`) and resumed (`strm u`):
   every frame once and in order. A paused squeezelite writes its own digital silence until
   its idle time closes its output (on `hw:` too: that is the player's, not a dropped link);
   keepalived's signal follows the close, and the resume is a new carried open.
3. squeezelite, a hundred 1.2 s tracks in a row (squeezelite starts its output once it holds a
   second of the track, "start buffer frames: 44100" in its log: a 0.6 s track never started,
   STMd and no STMs, on ALSA's `null` too), each started (`strm s`), played to its end
   (STMu: its output ran dry) and its output closed by squeezelite itself a second later (-C 1)
   before the next: a hundred carried opens, each track bit-exact, only keepalived's signal
   (and squeezelite's own silence before its close) between two.
"""

import subprocess
import time

import slimserver
import vmtest as vt
from carrylink import GAP, PLAYER_ENV, RATE, Link, carried, carried_opens, ramp_file, start, watch

from looplink import HW, PLUGIN, holder  # noqa: E402

link = Link()
kpid = link.start(f"-d {HW} --carry")

# 1. mpv, a hundred files, each its own open: tags 400..499.
FILES = 100
for i in range(FILES):
    mpv_frames = ramp_file(400 + i, 0.15)
opens_before = carried_opens("mpv")
player = start(["mpv", "--no-config", "--no-video", "--ao=alsa", f"--audio-device=alsa/{PLUGIN}", "--gapless-audio=no",
                "--volume=100", "--volume-max=100", "--af=", "--replaygain=no", "--audio-format=s16", f"--audio-samplerate={RATE}",
                "--msg-level=all=warn", *[f"/tmp/ramp-{400 + i}.wav" for i in range(FILES)]])
holders, out, took = watch(player, 400, every=0.05)
opens = carried_opens("mpv") - opens_before
vt.check("mpv-handoffs-played", player.returncode == 0, f"mpv, {FILES} files: exit {player.returncode} after {took:.1f} s {vt.one_line(out, 200)}")
vt.check("mpv-handoffs-opens", opens >= FILES, f"keepalived carried {opens} opens of mpv's for its {FILES} files (--gapless-audio=no: one each)")
carried("mpv-handoffs", holders, kpid, "mpv's hundred files")
link.case("mpv-handoffs", list(range(400, 400 + FILES)), mpv_frames, "exact", signal_between=True, padding=True, late_start_ok=1)
time.sleep(GAP)

# squeezelite, its server the test's own.
server = slimserver.SlimServer()
squeezelite = subprocess.Popen(["squeezelite", "-s", "127.0.0.1", "-o", PLUGIN, "-a", "400:4:16:1", "-C", "1", "-r", "44100",
                                "-n", "link", "-m", "02:00:00:00:00:83", "-f", "/tmp/squeezelite.log"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=PLAYER_ENV)
if not vt.check("squeezelite-connects", server.wait_player(30), f"squeezelite's HELO: {server.count('HELO')}"):
    squeezelite.kill()
    link.finish(10)


def no_player_lines():
    """How many times keepalived has said it carries no player now (a carried player's end)."""
    journal = vt.run(["journalctl", "-u", "keepalived-audio", "--no-pager", "-o", "cat"]).stdout
    return sum(1 for line in journal.splitlines() if line.startswith("carries no player now"))


# 2. squeezelite paused 2 s mid-track and resumed: tag 500.
frames = ramp_file(500, 3)
holders = set()
opens_before = carried_opens("squeezelite")
stm = server.count("STMs")
server.play("/tmp/ramp-500.raw", RATE)
started = vt.wait_until(lambda: server.count("STMs") > stm, 30, 0.05)
# Paused once 0.75 s of the track has played at the output (its elapsed milliseconds).
playing = vt.wait_until(lambda: (server.heartbeat(), holders.add(holder()), server.elapsed_ms() >= 750)[-1], 30, 0.05)
server.pause()
paused_at = time.monotonic()
while time.monotonic() - paused_at < 2.0:
    holders.add(holder())
    time.sleep(0.05)
server.unpause()
ended = vt.wait_until(lambda: (holders.add(holder()), server.count("STMu") > 0)[-1], 30, 0.05)
time.sleep(0.5)
server.off()
opens = carried_opens("squeezelite") - opens_before
vt.check("squeezelite-pause-played", bool(started and playing and ended),
         f"started {bool(started)}, paused at {server.elapsed_ms()} ms of elapsed {bool(playing)}, resumed and played to its end {bool(ended)}")
vt.note(f"keepalived carried {opens} opens of squeezelite's for the paused track (its output closes 1 s into the pause, -C 1, and opens again at the resume)")
carried("squeezelite-pause", holders, kpid, "squeezelite")
link.case("squeezelite-pause", [500], frames, "split", player_silence=True, zeros_ok=True)
time.sleep(GAP + 1.0)
server.on()

# 3. squeezelite, a hundred tracks, each its own open: tags 600..699.
TRACKS = 100
for i in range(TRACKS):
    sq_frames = ramp_file(600 + i, 1.2)
opens_before = carried_opens("squeezelite")
holders, failed, t = set(), [], time.monotonic()
for i in range(TRACKS):
    if len(failed) >= 3:
        break  # the case has failed; the scenario's other cases still get their time
    dry = server.count("STMu")
    before = no_player_lines()
    server.play(f"/tmp/ramp-{600 + i}.raw", RATE)
    if not vt.wait_until(lambda: (holders.add(holder()), server.count("STMu") > dry)[-1], 20, 0.02):
        failed.append(f"{i}: no STMu in 20 s")
    # Its output closes itself once idle for a second (-C 1), after its own silence. Not `aude 0`:
    # squeezelite then closes its device at once, and what it had queued in ALSA past STMu (its
    # buffer is 400 ms) never plays: the first run of this case lost 150-200 ms of every end.
    if not vt.wait_until(lambda: (holders.add(holder()), no_player_lines() > before)[-1], 10, 0.1):
        failed.append(f"{i}: its output not closed in 10 s")
took = time.monotonic() - t
opens = carried_opens("squeezelite") - opens_before
vt.check("squeezelite-handoffs-played", not failed, f"{TRACKS} tracks in {took:.1f} s; failed: {'; '.join(failed[:4]) or 'none'}")
vt.check("squeezelite-handoffs-opens", opens >= TRACKS, f"keepalived carried {opens} opens of squeezelite's for its {TRACKS} tracks")
carried("squeezelite-handoffs", holders, kpid, "squeezelite's hundred tracks")
link.case("squeezelite-handoffs", list(range(600, 600 + TRACKS)), sq_frames, "exact", signal_between=True, player_silence=True,
          zeros_ok=True, late_start_ok=1)
time.sleep(GAP)
squeezelite.terminate()
try:
    squeezelite.wait(timeout=15)
except subprocess.TimeoutExpired:
    squeezelite.kill()
print((vt.read("/tmp/squeezelite.log", "") or "")[-3000:])
link.finish(30)
