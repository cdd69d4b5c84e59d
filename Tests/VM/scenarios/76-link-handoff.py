#!/usr/bin/python3
# vm: devices=aloop mode=systemd options=snd_aloop:pcm_substreams=1 release=yes timeout=400
"""The link a receiver sees across a player's hand-off through `keepalived:` (issue 60's
measurement, on today's hand-off): the kernel's loopback card with one subdevice per device, so
`hw:CARD=Loopback,DEV=0` is exclusive like a real card's; its capture side (device 1), opened
first, records in real time what a receiver on that link gets, and digital zero there is a
dropped link (no stream running on device 0).

The package's service keeps device 0 awake (`-d hw:CARD=Loopback,DEV=0`); aplay plays a 2 s
ramp through `keepalived:CARD=Loopback,DEV=0` three times, 3 s apart (the player's
`KEEPALIVED_RELEASE_TIMEOUT=1000`, as box-mpd's: the emulated CPU is a slow machine). The host
(76-link-handoff.host.py) reads the capture and checks what holds today: each play reaches the
link bit-exact, and keepalived's signal (-1 LSB) is on the link before the first play and after
the last. It prints the zero runs around each play, `handoff_zero_ms=`: today's hand-off closes
keepalived's stream before the player opens the card, and keepalived opens again 250 ms after
the player's close, so the link drops at both ends. Issue 60 (one running stream) makes "no zero
run of 1 ms or more" this scenario's check and moves it into the landing's scenarios.

The ramp never holds a zero frame and no frame repeats (left: 1 + n mod 30000, right:
1 + n div 30000), so a gap and the alignment are unambiguous.
"""

import os
import struct
import subprocess
import time

import vmtest as vt

loop = int(os.environ.get("VM_CARD_ALOOP", "0"))
UNIT = "keepalived-audio"
CONF = "/etc/keepalived-audio/keepalived-audio.conf"
HW = "hw:CARD=Loopback,DEV=0"
PLUGIN = "keepalived:CARD=Loopback,DEV=0"
CAPTURE = "hw:CARD=Loopback,DEV=1"
STATUS = f"/proc/asound/card{loop}/pcm0p/sub0/status"
RATE, SECONDS, PLAYS, PAUSE = 44100, 2, 3, 3.0
RAMP = "/tmp/ramp.wav"
CAPTURED = os.path.join(vt.IO, "link.raw")
PLAYER_ENV = dict(vt.ROOT_ENV, KEEPALIVED_RELEASE_TIMEOUT="1000")


def holder():
    text = vt.read(STATUS, "closed")
    if text.strip() == "closed":
        return None
    for line in text.splitlines():
        if line.strip().startswith("owner_pid"):
            tid = int(line.split(":")[1])
            for l in vt.read(f"/proc/{tid}/status", "").splitlines():
                if l.startswith("Tgid:"):
                    return int(l.split()[1])
            return tid
    return "open"


def show(prop):
    return vt.run(["systemctl", "show", "-p", prop, "--value", UNIT]).stdout.strip()


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
if not vt.check("capture-running", w, f"arecord -D {CAPTURE}: {vt.pcm_state(loop, 1, 0, 'c')} after {w.seconds:.2f} s"):
    vt.finish()
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="-d {HW}"\n')
r = vt.run(["systemctl", "enable", "--now", UNIT], timeout=90)
kpid = int(show("MainPID") or 0)
w = vt.wait_until(lambda: holder() == kpid and vt.pcm_state(loop, 0, 0) == "RUNNING", 30, 0.05)
if not vt.check("keepalived-on-the-link", r.returncode == 0 and w, f"systemctl enable --now: exit {r.returncode}; device 0 held by "
                f"{holder()} (keepalived {kpid}), {vt.pcm_state(loop, 0, 0)}; {vt.hw_params(loop, 0, 0)}"):
    vt.note(vt.one_line(vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "cat"]).stdout[-600:], 600))
    rec.terminate()
    vt.finish()
time.sleep(2)  # keepalived's signal on the link before the first play

for play in range(1, PLAYS + 1):
    t = time.monotonic()
    p = vt.run(["aplay", "-q", "-D", PLUGIN, RAMP], timeout=60, env=PLAYER_ENV)
    vt.check(f"play{play}", p.returncode == 0, f"aplay -D {PLUGIN}: exit {p.returncode} after {time.monotonic() - t:.2f} s"
             + (f": {vt.one_line(p.stdout, 200)}" if p.stdout.strip() else ""))
    back = vt.wait_until(lambda: holder() == kpid, 10, 0.02)
    vt.check(f"play{play}-taken-back", back, f"device 0 back to keepalived after {back.seconds:.2f} s (held by {holder()})")
    time.sleep(PAUSE)

rec.terminate()
out, _ = rec.communicate(timeout=10)
size = os.path.getsize(CAPTURED) if os.path.exists(CAPTURED) else 0
vt.check("captured", size > 4 * RATE * (PLAYS * (SECONDS + PAUSE)), f"{size // 4} frames captured ({size // 4 / RATE:.1f} s)")
vt.finish()
