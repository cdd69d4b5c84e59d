#!/usr/bin/python3
# vm: devices=hda power_save=1 hda_wav=yes timeout=150
"""Rig self-test with tools that are not ours: the HDA codec sleeps when idle (power_save=1),
stays awake while aplay plays a known signal through hw:C,0, sleeps again after; the host side
(10-hda-aplay.host.py) then checks the WAV QEMU wrote holds exactly the samples played."""

import array
import os
import subprocess
import time

import vmtest as vt

card = int(os.environ.get("VM_CARD_HDA", "0"))
SECONDS = 4
RATE = 44100
PERIOD = 4410  # frames in one period of the pattern

p = vt.codec_power(card)
if not vt.check("codec-power-counters", p is not None, f"/sys/class/sound/hwC{card}D0/power_*_acct: {p}"):
    vt.finish()

# 1. Idle, the codec powers down (power_save=1: about 1 s after the last use).
off0 = p[1]
w = vt.wait_until(lambda: vt.codec_power(card)[1] >= off0 + 500, 10)
p1 = vt.codec_power(card)
vt.check("idle-codec-sleeps", w,
         f"power_off_acct {off0} -> {p1[1]} ms (+500 ms reached after {w.seconds:.2f} s; on {p1[0]} ms)")

# 2. A signal with no zero frame: left 100+7i, right -(100+5i), i = 0..4409, repeated.
one = array.array("h")
for i in range(PERIOD):
    one.append(100 + 7 * i)
    one.append(-(100 + 5 * i))
data = one.tobytes() * (SECONDS * RATE // PERIOD)
with open("/tmp/pattern.raw", "wb") as f:
    f.write(data)
with open(os.path.join(vt.IO, "hda-aplay.raw"), "wb") as f:
    f.write(data)
frames = len(data) // 4

# 3. Play it with a 2 s buffer; the codec must stay powered while it plays.
t_start = time.monotonic()
ap = subprocess.Popen(["aplay", "-D", f"hw:{card},0", "-t", "raw", "-f", "S16_LE", "-r", str(RATE),
                       "-c", "2", "--buffer-time=2000000", "--period-time=500000", "/tmp/pattern.raw"],
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
w = vt.wait_until(lambda: vt.pcm_state(card) == "RUNNING", 10, 0.02)
if not vt.check("aplay-running", w, f"pcm state RUNNING after {w.seconds:.2f} s"):
    ap.kill()
    vt.note(ap.communicate()[0])
    vt.finish()
hp = vt.hw_params(card)
vt.note(f"hw_params: {hp}")
time.sleep(0.3)  # let the power-up accounting settle: read the baseline once the stream runs
on_start, off_start = vt.codec_power(card)
states = set()
last = (on_start, off_start)
while ap.poll() is None and time.monotonic() - t_start < 60:
    states.add(vt.pcm_state(card))
    cur = vt.codec_power(card)
    if ap.poll() is None:
        last = cur
    time.sleep(0.1)
if ap.poll() is None:
    ap.kill()
out = ap.communicate()[0].strip()
t_end = time.monotonic()
vt.check("aplay-exit", ap.returncode == 0, f"rc {ap.returncode} after {t_end - t_start:.2f} s "
         f"(signal {SECONDS} s); states seen {sorted(s for s in states if s)}; output: {out or '-'}")
vt.check("no-xrun", "underrun" not in out.lower() and "XRUN" not in states, "no underrun reported")
vt.check("playing-codec-awake", last[1] == off_start,
         f"power_off_acct {off_start} -> {last[1]} ms while playing; power_on_acct {on_start} -> {last[0]} ms")
vt.check("hw-params", hp.get("rate", "").startswith("44100") and hp.get("format") == "S16_LE"
         and hp.get("buffer_size") == "88200", f"format {hp.get('format')} rate {hp.get('rate')} "
         f"buffer {hp.get('buffer_size')} period {hp.get('period_size')}")

# 4. After the stream closes the codec sleeps again within 3 s.
w = vt.wait_until(lambda: vt.codec_power(card)[1] > last[1], 3.0, 0.02)
p2 = vt.codec_power(card)
vt.check("after-codec-sleeps", w, f"power_off_acct {last[1]} -> {p2[1]} ms, grew {w.seconds:.2f} s after aplay exited")
vt.note(f"codec power at end: on={p2[0]} ms off={p2[1]} ms; frames played {frames}")
with open(os.path.join(vt.IO, "hda-aplay.frames"), "w") as f:
    f.write(f"{frames}\n")
vt.finish()
