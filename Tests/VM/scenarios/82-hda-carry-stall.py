#!/usr/bin/python3
# vm: devices=hda hda_wav=yes mode=systemd timeout=300
"""Never a loop of music on a card whose period interrupts are off (issue 60 item 6): the HDA
card's ring loop runs without them (keepalived switches them off where the driver allows), so
the kernel sees where the card is only when someone asks. A carried player's frames lie in that
ring; were keepalived to stop running while it carries them (SIGSTOP, a hang, a starved
machine), the card would play on round its ring, the last of the player's music again and again
(once every 4 s), until keepalived runs again or dies. The player's PCM watches for that: while
keepalived's position stands still it asks the kernel where the card is (the card's status in
/proc), which stops the stream once everything written has played (an underrun), the way a card
with interrupts stops by itself.

The package's service on `hw:CARD=Intel,DEV=0` (carrying is the default); aplay plays a 5 s ramp
(linkcapture.py: no zero frame, no frame repeated) through `keepalived:CARD=Intel,DEV=0`; 1.5 s
into it, once keepalived carries it, keepalived is SIGSTOPped for 10 s (two and a half of its 4 s
rings), then continued. The host (82-hda-carry-stall.host.py) reads QEMU's WAV of what the codec
got (unscaled: mixer=off) and checks that no frame of the ramp reached it twice.
"""

import os
import signal
import subprocess
import sys
import time

import vmtest as vt

sys.path.insert(0, os.path.join(os.environ.get("VM_REPO", "."), "Tests", "VM"))
import linkcapture as lc  # noqa: E402

UNIT = "keepalived-audio"
CONF = "/etc/keepalived-audio/keepalived-audio.conf"
TAG = 30
SECONDS = 5
STOPPED = 10.0
PLAYER_ENV = dict(vt.ROOT_ENV, KEEPALIVED_RELEASE_TIMEOUT="1000")

card = int(os.environ.get("VM_CARD_HDA", "0"))
card_id = vt.read(f"/proc/asound/card{card}/id", "").strip()
HW = f"hw:CARD={card_id},DEV=0"
PLUGIN = f"keepalived:CARD={card_id},DEV=0"

vt.install_package(timeout=180)
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="-d {HW}"\n')
r = vt.run(["systemctl", "enable", "--now", UNIT], timeout=90)
kpid = int(vt.run(["systemctl", "show", "-p", "MainPID", "--value", UNIT]).stdout.strip() or 0)
w = vt.wait_until(lambda: vt.pcm_holder(card, 0) == kpid and vt.pcm_state(card, 0) == "RUNNING", 30, 0.05)
if not vt.check("keepalived-on-the-card", r.returncode == 0 and w,
                f"systemctl enable --now: exit {r.returncode}; card held by {vt.pcm_holder(card, 0)} (keepalived {kpid}), "
                f"{vt.pcm_state(card, 0)}; {vt.hw_params(card, 0)}"):
    vt.finish()
vt.note(f"keepalived's stream: {vt.hw_params(card, 0)}; sw_params: {vt.one_line(vt.read(f'/proc/asound/card{card}/pcm0p/sub0/sw_params', ''), 300)}")

track = "/tmp/stall-ramp.wav"
with open(track, "wb") as f:
    f.write(lc.wav(lc.ramp(TAG, lc.RATE * SECONDS)))


def carrying():
    s = vt.keepalived_status("/usr/bin/keepalived", env=vt.ROOT_ENV) or {}
    return any(o.get("carrying") for o in s.get("outputs", []))


t = time.monotonic()
player = subprocess.Popen(["aplay", "-q", "-D", PLUGIN, track], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=PLAYER_ENV)
w = vt.wait_until(lambda: carrying() or player.poll() is not None, 15, 0.1)
vt.check("carried", w and player.poll() is None and vt.pcm_holder(card, 0) == kpid,
         f"keepalived carries aplay {w.seconds:.2f} s after its start; card held by {vt.pcm_holder(card, 0)} (keepalived {kpid})")
time.sleep(max(0.0, 1.5 - (time.monotonic() - t)))
os.kill(kpid, signal.SIGSTOP)
stopped_at = time.monotonic() - t
# Nothing here reads the card's status meanwhile: that read makes the kernel look at the card,
# as the player's PCM is to.
time.sleep(STOPPED)
os.kill(kpid, signal.SIGCONT)
vt.note(f"keepalived stopped at {stopped_at:.2f} s for {STOPPED:g} s")
try:
    out, _ = player.communicate(timeout=30)
except subprocess.TimeoutExpired:
    player.kill()
    out, _ = player.communicate()
vt.note(f"aplay: exit {player.returncode} {time.monotonic() - t:.1f} s after its start: {vt.one_line(out, 300)}")
# keepalived back on the card after its repair, its signal playing on: the WAV's end.
w = vt.wait_until(lambda: vt.pcm_holder(card, 0) == kpid and vt.pcm_state(card, 0) == "RUNNING", 20, 0.1)
vt.check("keepalived-back", w, f"card held by {vt.pcm_holder(card, 0)} (keepalived {kpid}), {vt.pcm_state(card, 0)}, "
         f"{w.seconds:.2f} s after aplay's end; keepalived's journal: "
         + vt.one_line(" | ".join(line for line in vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "cat"]).stdout.splitlines()
                                  if "recover" in line or "carr" in line or "underrun" in line)[-600:], 600))
time.sleep(1)
vt.run(["systemctl", "stop", UNIT], timeout=60)
vt.finish()
