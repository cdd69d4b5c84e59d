#!/usr/bin/python3
# vm: devices=aloop mode=systemd options=snd_aloop:pcm_substreams=1 timeout=400
"""The link a receiver sees across a player's plays through `keepalived:` (issue 60): the
kernel's loopback card with one subdevice per device, so `hw:CARD=Loopback,DEV=0` is exclusive
like a real card's; its capture side (device 1), opened first, records in real time what a
receiver on that link gets, and digital zero there is a dropped link (no stream on device 0).

The package's service keeps device 0 awake (`-d hw:CARD=Loopback,DEV=0 --no-carry`); aplay plays a
2 s ramp through `keepalived:CARD=Loopback,DEV=0` three times with the hand-over (keepalived closes
its stream, the player opens the card; the player's `KEEPALIVED_RELEASE_TIMEOUT=1000`, as
box-mpd's: the emulated CPU is a slow machine), then, after a reload without `--no-carry` (carrying
is the default), three times carried on
keepalived's own running stream, and Debian's MPD once, carried, and once more paused mid-ramp for
1.5 s and resumed, carried throughout; then keepalived is SIGKILLed
while it carries aplay (aplay must end with an error at once, systemd starts keepalived again)
and one more play is carried by the new process. The host
(76-link-handoff.host.py) checks that every play reaches the link bit-exact, keepalived's signal
(-1 LSB) before the first and after the last, and that no carried play drops the link (no zero
run of 1 ms or more besides the player's own padding of its last period); it prints the zero
runs around each play, `handoff_zero_ms=`, the hand-over's gaps and the carried plays' side by
side.

The ramp never holds a zero frame and no frame repeats (left: 1 + n mod 30000, right:
1 + n div 30000), so a gap and the alignment are unambiguous.
"""

import json
import os
import shutil
import signal
import struct
import subprocess
import time

import vmtest as vt

from looplink import CAPTURE, CONF, HW, MUSIC, PLUGIN, UNIT, holder, loop, show, start_mpd, start_service  # noqa: E402
RATE, SECONDS, PLAYS, PAUSE = 44100, 2, 3, 2.0
STALL = 0.2  # seconds the whole guest stood still that excuse an underrun in the second after
RAMP = "/tmp/ramp.wav"
CAPTURED = os.path.join(vt.IO, "link.raw")
PLAYER_ENV = dict(vt.ROOT_ENV, KEEPALIVED_RELEASE_TIMEOUT="1000")


frames = RATE * SECONDS
with open(RAMP, "wb") as f:
    data = b"".join(struct.pack("<hh", 1 + n % 30000, 1 + n // 30000) for n in range(frames))
    f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 2, RATE, RATE * 4, 4, 16)
            + b"data" + struct.pack("<I", len(data)) + data)
with open(os.path.join(vt.IO, "ramp.raw"), "wb") as f:
    f.write(data)

vt.install_package(timeout=180)
# The capture first: the cable then runs in its format, which the playback side must match.
rec = subprocess.Popen(["arecord", "-q", "-D", CAPTURE, "-f", "S16_LE", "-r", str(RATE), "-c", "2", "-t", "raw", CAPTURED],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
w = vt.wait_until(lambda: vt.pcm_state(loop, 1, 0, "c") == "RUNNING", 15, 0.05)
captured_at = time.time()  # the capture's first frame, within the wait's 50 ms
# The guest's own stalls (the whole machine standing still under TCG while the host runs other
# work), from the carried part on: an underrun right after one is the machine's, not keepalived's.
stalls = vt.StallWatch()
if not vt.check("capture-running", w, f"arecord -D {CAPTURE}: {vt.pcm_state(loop, 1, 0, 'c')} after {w.seconds:.2f} s"):
    vt.finish()
code, kpid, w = start_service(f"-d {HW} --no-carry")
if not vt.check("keepalived-on-the-link", code == 0 and w, f"systemctl enable --now: exit {code}; device 0 held by "
                f"{holder()} (keepalived {kpid}), {vt.pcm_state(loop, 0, 0)}; {vt.hw_params(loop, 0, 0)}"):
    vt.note(vt.one_line(vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "cat"]).stdout[-600:], 600))
    rec.terminate()
    vt.finish()
time.sleep(2)  # keepalived's signal on the link before the first play

def plays(first, carried, count=PLAYS):
    """`count` plays of the ramp through the plug-in, numbered from `first`."""
    for play in range(first, first + count):
        t = time.monotonic()
        player = subprocess.Popen(["aplay", "-q", "-D", PLUGIN, RAMP], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PLAYER_ENV)
        # Who holds device 0 while the player plays: keepalived throughout when it carries the
        # player; the player itself after a hand-over.
        holders = set()
        second = None
        while player.poll() is None and time.monotonic() - t < 60:
            holders.add(holder())
            # A second player while the first is carried: "busy", as a second open of the card.
            if carried and play == first + 1 and second is None and time.monotonic() - t > 0.7:
                second = vt.run(["aplay", "-q", "-D", PLUGIN, RAMP], timeout=30, env=PLAYER_ENV)
            time.sleep(0.01)
        out, _ = player.communicate(timeout=10)
        if second is not None:
            vt.check(f"play{play}-second-player-busy", second.returncode != 0 and "busy" in second.stdout.lower(),
                     f"a second aplay meanwhile: exit {second.returncode}: {vt.one_line(second.stdout, 240)}")
        vt.check(f"play{play}", player.returncode == 0, f"aplay -D {PLUGIN}: exit {player.returncode} after {time.monotonic() - t:.2f} s"
                 + (f": {vt.one_line(out, 200)}" if out.strip() else ""))
        if carried:
            vt.check(f"play{play}-carried", holders == {kpid}, f"device 0 held by {sorted(map(str, holders))} while aplay played (keepalived {kpid})")
        else:
            back = vt.wait_until(lambda: holder() == kpid, 10, 0.02)
            vt.check(f"play{play}-taken-back", back and player.pid in holders,
                     f"device 0 held by {sorted(map(str, holders))} while aplay ({player.pid}) played; back to keepalived after {back.seconds:.2f} s")
        time.sleep(PAUSE)


# The hand-over first (the player has the card itself), then the same plays carried.
plays(1, carried=False)
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="-d {HW}"\n')
stalls.watching.set()
r = vt.run(["systemctl", "reload", UNIT], timeout=30)
# Carrying changes no output: the stream keeps running through the reload.
time.sleep(1)
vt.check("reload-carry", r.returncode == 0 and holder() == kpid and vt.pcm_state(loop, 0, 0) == "RUNNING",
         f"systemctl reload without --no-carry: exit {r.returncode}; device 0 held by {holder()} (keepalived {kpid}), {vt.pcm_state(loop, 0, 0)}")
plays(1 + PLAYS, carried=True)

# Debian's MPD, carried: a poll-driven player in non-blocking mode, which drains and closes.
os.makedirs(MUSIC, exist_ok=True)
shutil.copy(RAMP, f"{MUSIC}/ramp.wav")
code, w = start_mpd()
t = time.monotonic()
vt.run(["mpc", "-q", "play"], timeout=30)
holders = set()
while time.monotonic() - t < 30:
    holders.add(holder())
    if time.monotonic() - t > 1 and "[playing]" not in vt.run(["mpc", "status"], timeout=30).stdout:
        break
    time.sleep(0.05)
took = time.monotonic() - t
vt.check("mpd-played", code == 0 and w and took < 10, f"systemctl start mpd: exit {code}; the 2 s ramp played in {took:.2f} s")
vt.check("mpd-carried", holders == {kpid}, f"device 0 held by {sorted(map(str, holders))} while MPD played (keepalived {kpid})")
time.sleep(PAUSE)

# MPD paused mid-ramp for 1.5 s and resumed: what it had queued at the pause may be dropped (as
# on the hardware), the link carries keepalived's signal meanwhile, the rest of the ramp follows.
t = time.monotonic()
vt.run(["mpc", "-q", "play"], timeout=30)
started = vt.wait_until(lambda: holder() == kpid and "[playing]" in vt.run(["mpc", "status"], timeout=30).stdout, 10, 0.05)
time.sleep(0.6)
vt.run(["mpc", "-q", "pause"], timeout=30)
paused_status = vt.run(["mpc", "status"], timeout=30).stdout
holders = {holder()}
paused_at = time.monotonic()
while time.monotonic() - paused_at < 1.5:
    holders.add(holder())
    time.sleep(0.05)
vt.run(["mpc", "-q", "play"], timeout=30)
while time.monotonic() - t < 30:
    holders.add(holder())
    if "[playing]" not in vt.run(["mpc", "status"], timeout=30).stdout:
        break
    time.sleep(0.05)
vt.check("mpd-paused-resumed", started and "[paused]" in paused_status and time.monotonic() - t < 15,
         f"MPD playing {bool(started)}, then {vt.one_line(paused_status, 120)}; the ramp ended {time.monotonic() - t:.2f} s after play")
vt.check("mpd-paused-carried", holders == {kpid}, f"device 0 held by {sorted(map(str, holders))} while MPD played, paused and resumed (keepalived {kpid})")
vt.run(["systemctl", "stop", "mpd.service"], timeout=60)
time.sleep(PAUSE)

# A bad day: keepalived SIGKILLed while it carries aplay. aplay ends with an error of its own at
# once (no hang), systemd starts keepalived again (RestartSec=5s), and the next play is carried
# again by the new process.
t = time.monotonic()
player = subprocess.Popen(["aplay", "-q", "-D", PLUGIN, RAMP], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PLAYER_ENV)
time.sleep(0.8)
os.kill(kpid, signal.SIGKILL)
killed = time.monotonic()
try:
    out, _ = player.communicate(timeout=20)
except subprocess.TimeoutExpired:
    player.kill()
    out, _ = player.communicate()
vt.check("killed-player-ends", player.returncode != 0 and time.monotonic() - killed < 5,
         f"aplay carried when keepalived was SIGKILLed: exit {player.returncode} {time.monotonic() - killed:.2f} s later: {vt.one_line(out, 200)}")
old = kpid
w = vt.wait_until(lambda: show("MainPID") not in ("", "0", str(old)) and holder() == int(show("MainPID") or 0)
                  and vt.pcm_state(loop, 0, 0) == "RUNNING", 30, 0.1)
kpid = int(show("MainPID") or 0)
vt.check("killed-restarted", w, f"keepalived again as {kpid} after {w.seconds:.1f} s (systemd's RestartSec=5s), device 0 held by {holder()}")
time.sleep(1)
plays(2 * PLAYS + 3, carried=True, count=1)

rec.terminate()
out, _ = rec.communicate(timeout=10)
stalls.watching.clear()
with open(os.path.join(vt.IO, "stalls.json"), "w") as f:
    json.dump([(a - captured_at, b - captured_at) for a, b in stalls.between(0, time.time())], f)
vt.note(f"the guest stood still {len(stalls.stalls)} times (0.1 s or more): {vt.StallWatch.describe(stalls.stalls)[:600]}")
journal = vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "short-unix"]).stdout
print("\n".join(line for line in journal.splitlines() if "carr" in line or "recover" in line)[-20000:])
# A recovery within a second after the guest stood still 0.2 s or more is the machine's (keepalived
# keeps 250 ms of its signal queued at the least); any other is keepalived's.
recoveries = [line for line in journal.splitlines() if "recovering" in line]


def excused(line):
    try:
        at = float(line.split()[0])
    except (ValueError, IndexError):
        return None
    stall = stalls.explains(at, before=1.0)
    return stall if stall and stall[1] - stall[0] >= STALL else None


unexplained = [line for line in recoveries if not excused(line)]
explained = [f"after the guest stood still {excused(line)[1] - excused(line)[0]:.2f} s: {vt.one_line(line, 120)}"
             for line in recoveries if excused(line)]
vt.check("never-recovered", not unexplained, "keepalived's journal (both processes): "
         + ("; ".join(line for line in journal.splitlines() if "recover" in line)[:400] or "no recovery")
         + "".join(f"; {e}" for e in explained))
size = os.path.getsize(CAPTURED) if os.path.exists(CAPTURED) else 0
vt.check("captured", size > 4 * RATE * ((2 * PLAYS + 4) * (SECONDS + PAUSE)), f"{size // 4} frames captured ({size // 4 / RATE:.1f} s)")
vt.finish()
