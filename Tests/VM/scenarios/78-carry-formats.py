#!/usr/bin/python3
# vm: devices=aloop mode=systemd options=snd_aloop:pcm_substreams=1 timeout=300
"""Carried plays in every format keepalived opens (issue 60 item 3): S16_LE, S24_3LE, S24_LE and
S32_LE; 2, 6 and 8 channels; 44.1, 96 and 192 kHz, and 384 kHz where the loopback card takes it
(Debian 12's snd-aloop stops at 192 kHz, its rate_max: left out, a note says so; Debian 13's 6.12
takes up to 768 kHz, and with `kernel=trixie` in the header the 384 kHz case ran bit-exact). The
kernel's loopback card with one subdevice per device (`hw:CARD=Loopback,DEV=0` exclusive like a
real card's); the package's service plays on device 0 with `--carry --lead-in 1s`; aplay plays a
short test signal through `keepalived:CARD=Loopback,DEV=0` in each case's format.

The loopback's cable takes one format while either side is open (its capture side cannot open in
another than the playback's, and the playback in another than the capture's), so a case whose
format differs from the stream's goes: the capture closed, aplay started (keepalived opens the
device again in its format, the one break, then plays its own signal in it for the 1 s
lead-in), the capture (device 1) opened in that format once keepalived's stream runs in it,
recording the lead-in and the music after it; a case in the stream's own format (the last: the
one before it again) opens the capture first and shows the carried play start without a break. Each capture is `io/case-N.raw`, the cases `io/cases.txt`; the host
(78-carry-formats.host.py) finds each case's signal on the link bit for bit, keepalived's signal
before it and no zero run besides aplay's padding of its last period.

The signal (made by the host side) never holds a zero frame and no frame repeats; its channels
differ, some are negative, and its 24- and 32-bit samples use every byte, so a byte lost or
moved, a sign or a channel swapped shows.
"""

import json
import os
import shutil
import socket
import subprocess
import time

import vmtest as vt

from looplink import CAPTURE, HW, PLUGIN, UNIT, holder, loop, start_service  # noqa: E402
CONTROL = "/run/keepalived-audio/control.sock"
LEAD_IN = 1.0
SECONDS = 0.5
PLAYER_ENV = dict(vt.ROOT_ENV, KEEPALIVED_RELEASE_TIMEOUT="1000")
# (format, channels, rate): every format, channel count and rate at least once; each case's
# format but the last differs from the one before it (a format change each time), S24_3LE in
# every channel count and rate.
CASES = [
    ("S16_LE", 2, 44100),
    ("S24_3LE", 2, 96000),
    ("S24_3LE", 6, 44100),
    ("S24_LE", 8, 192000),
    ("S32_LE", 6, 96000),
    ("S24_3LE", 8, 192000),
    ("S16_LE", 8, 96000),
    ("S32_LE", 2, 192000),
    ("S24_LE", 2, 44100),
    ("S24_3LE", 6, 96000),
    # The stream's own format: the capture first, no reopen, no lead-in, no break.
    ("S24_3LE", 6, 96000),
]
# carry-384k runs this scenario on Debian 13's kernel for the 384 kHz cases alone: the rate
# reached with a reopen (from the service's first 44.1 kHz stream), another format at it, then
# its own format again without a break.
ONLY_384K = os.environ.get("CARRY_FORMATS_384K") == "1"
if ONLY_384K:
    CASES = [("S24_3LE", 2, 384000), ("S32_LE", 2, 384000), ("S32_LE", 2, 384000)]


def stream_format():
    """keepalived's stream on device 0: (format, channels, rate), or None."""
    p = vt.hw_params(loop, 0, 0)
    if not p or vt.pcm_state(loop, 0, 0) != "RUNNING":
        return None
    return (p.get("format"), int(p.get("channels", "0")), int(p.get("rate", "0 ").split()[0]))


def capture_closed():
    return vt.pcm_state(loop, 1, 0, "c") in (None, "CLOSED")


vt.install_package(timeout=180)
code, kpid, w = start_service(f"-d {HW} --carry --lead-in {LEAD_IN:g}s")
if not vt.check("keepalived-on-the-link", code == 0 and w, f"systemctl enable --now: exit {code}; device 0 held by "
                f"{holder()} (keepalived {kpid}), {vt.pcm_state(loop, 0, 0)}; {vt.hw_params(loop, 0, 0)}"):
    vt.note(vt.one_line(vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "cat"]).stdout[-600:], 600))
    vt.finish()
vt.note(f"keepalived's own stream: {stream_format()}")


def recoveries():
    """keepalived's recoveries so far (every output's), from its control socket: no program started."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(10)
            c.connect(CONTROL)
            c.sendall(b'{"request":"status"}\n')
            data = b""
            while not data.endswith(b"\n"):
                chunk = c.recv(65536)
                if not chunk:
                    break
                data += chunk
        return sum(o.get("recoveries", 0) for o in json.loads(data)["status"]["outputs"])
    except (OSError, ValueError, KeyError):
        return None


def attempt(number, name, fmt, channels, rate, path):
    """One carried play of `path` with the capture around it; its report, or why to try again."""
    captured = f"/tmp/case-{number}.raw"
    want = (fmt, channels, rate)
    # keepalived's stream running (after a recovery too), the capture of the case before
    # closed: the cable is free for keepalived's reopen.
    vt.wait_until(lambda: stream_format() is not None, 15, 0.02)
    same = stream_format() == want

    def record():
        return subprocess.Popen(["arecord", "-q", "-D", CAPTURE, "-f", fmt, "-r", str(rate), "-c", str(channels), "-t", "raw",
                                 "--buffer-time=1000000", captured], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    recovered0 = recoveries()
    t0_wall = time.time()
    stalls.watching.set()
    rec = record() if same else None
    if same:
        vt.wait_until(lambda: vt.pcm_state(loop, 1, 0, "c") == "RUNNING", 15, 0.02)
    t = time.monotonic()
    player = subprocess.Popen(["aplay", "-q", "-D", PLUGIN, "-t", "raw", "-f", fmt, "-c", str(channels), "-r", str(rate), path],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PLAYER_ENV)
    holders = set()
    lead_in = None
    if not same:
        # keepalived opens the device again in the player's format, then plays its signal in it
        # for the lead-in: the capture opens meanwhile, in the same format.
        w = vt.wait_until(lambda: stream_format() == want or player.poll() is not None, 15, 0.02)
        reopened = time.monotonic() - t
        holders.add(holder())
        rec = record()
        vt.wait_until(lambda: vt.pcm_state(loop, 1, 0, "c") == "RUNNING" or rec.poll() is not None, 15, 0.02)
        capture_at = time.monotonic() - t
        lead_in = (bool(w), reopened, capture_at)
    while player.poll() is None and time.monotonic() - t < 60:
        holders.add(holder())
        time.sleep(0.02)
    out, _ = player.communicate(timeout=10)
    took = time.monotonic() - t
    after = stream_format()
    time.sleep(0.4)  # keepalived's signal after the music
    rec.terminate()
    rout, _ = rec.communicate(timeout=10)
    vt.wait_until(capture_closed, 10, 0.02)
    stalls.watching.clear()
    shutil.copy(captured, os.path.join(vt.IO, f"case-{number}.raw"))
    os.remove(captured)
    recovered = (recoveries() or 0) - (recovered0 or 0)
    stood = stalls.between(t0_wall, time.time())
    return dict(same=same, lead_in=lead_in, holders=holders, out=out, code=player.returncode, took=took, after=after, rout=rout,
                recovered=recovered, stalls=stood)


# 384 kHz where the loopback card takes it: not Debian 12's (6.1: 8 to 192 kHz, its rate_max),
# Debian 13's (6.12: up to 768 kHz). Asked of device 1's playback side, whose cable (to device 0's
# capture) nobody else uses: hw: does not resample, so aplay says what it got instead.
probe = "/tmp/probe.raw"
with open(probe, "wb") as f:
    f.write(b"\1\0\0\0" * 2 * 64)
r = vt.run(["aplay", "-D", "hw:CARD=Loopback,DEV=1", "-t", "raw", "-f", "S32_LE", "-c", "2", "-r", "384000", probe], timeout=30)
takes = r.returncode == 0 and "not accurate" not in r.stdout
if ONLY_384K:
    # carry-384k (landing, on Debian 13's kernel): 384 kHz must play there.
    vt.check("loopback-takes-384k", takes, f"aplay at 384 kHz on {os.uname().release}: exit {r.returncode} {vt.one_line(r.stdout, 200)}")
elif takes:
    CASES.insert(len(CASES) - 2, ("S24_3LE", 2, 384000))
else:
    vt.note(f"no 384 kHz case: the loopback card does not take it on {os.uname().release}: {vt.one_line(r.stdout, 200)}")
os.remove(probe)

vt.check("status-recoveries", recoveries() == 0, f"keepalived's recoveries on its control socket before the plays: {recoveries()}")
stalls = vt.StallWatch(threshold=0.04)
manifest = []
for number, (fmt, channels, rate) in enumerate(CASES, 1):
    name = f"case{number}-{fmt}-{channels}ch-{rate}"
    frames = int(rate * SECONDS)
    path = f"/tmp/{name}.raw"
    # Made by the host (78-carry-formats.host.py: Python under TCG would take seconds a case),
    # copied into memory here: aplay reads it at up to 6 MB/s.
    rc, text = vt.host("carry-signal", number, fmt, channels, rate, frames)
    if not vt.check(f"{name}-signal", rc == 0, text):
        continue
    shutil.copy(os.path.join(vt.IO, f"signal-{number}.raw"), path)
    a = attempt(number, name, fmt, channels, rate, path)
    retried = ""
    # A recovery (an underrun): keepalived woke later than the signal it keeps queued (50 to
    # 150 ms on the small ring a 192 kHz 8-channel stream gets). Seen while the whole guest stood
    # still (QEMU's thread not run) and, once in about ten runs, with the emulated CPU saturated
    # by a 4.6 MB/s stream beside the capture (no stall seen): the case is played once more (in
    # the format the stream now runs at: without a reopen), said in its check, and that play must
    # be clean. An open defect (docs/players.md: "Not yet"), counted, never hidden.
    # Likewise a capture that opened only after the lead-in had played (the guest's own slowness
    # on a loaded host: 1.34-1.40 s after the reopen, beside three other guests on two CPUs): the
    # music then began before the link was recorded, and the case is played once more.
    late = a["lead_in"] and a["lead_in"][0] and a["lead_in"][2] - a["lead_in"][1] >= LEAD_IN
    if a["recovered"] or late:
        why = f"after the guest stood still ({vt.StallWatch.describe(a['stalls'])})" if a["stalls"] else "with no stall of the guest seen"
        retried = (f"played again: {a['recovered']} recovery(ies) {why}; aplay exited {a['code']}: {vt.one_line(a['out'], 160)}" if a["recovered"]
                   else f"played again: the capture ran {a['lead_in'][2] - a['lead_in'][1]:.2f} s after the reopen, the lead-in {LEAD_IN:g} s {why}")
        vt.note(f"{name}: {retried}")
        a = attempt(number, name, fmt, channels, rate, path)
    os.remove(path)
    want = (fmt, channels, rate)
    if a["lead_in"]:
        reached, reopened, capture_at = a["lead_in"]
        # The capture must run before the lead-in ends (the music follows it): 0.2-0.3 s after
        # the reopen on an idle host, against the 1 s lead-in.
        vt.check(f"{name}-capture-in-lead-in", reached and capture_at - reopened < LEAD_IN,
                 f"keepalived in {want} {reopened:.2f} s after aplay's start, the capture running {capture_at - reopened:.2f} s "
                 f"after that (the lead-in: {LEAD_IN:g} s)")
    how = "in the stream's own format" if a["same"] else (f"keepalived reopened in it {a['lead_in'][1]:.2f} s after aplay's start, "
                                                         f"the capture running {a['lead_in'][2]:.2f} s after it")
    vt.check(f"{name}-played", a["code"] == 0 and "overrun" not in a["rout"],
             f"aplay -f {fmt} -c {channels} -r {rate}: exit {a['code']} after {a['took']:.2f} s ({how})"
             + (f": {vt.one_line(a['out'], 200)}" if a["out"].strip() else "")
             + (f"; arecord: {vt.one_line(a['rout'], 200)}" if a["rout"].strip() else "") + (f"; {retried}" if retried else ""))
    vt.check(f"{name}-carried", a["holders"] == {kpid} and a["after"] == want,
             f"device 0 held by {sorted(map(str, a['holders']))} while aplay played (keepalived {kpid}); keepalived's stream after it: {a['after']}")
    vt.check(f"{name}-no-recovery", not a["recovered"], f"keepalived's recoveries during the play: {a['recovered']}; "
             f"the guest stood still: {vt.StallWatch.describe(a['stalls'])}")
    manifest.append(f"{number} {fmt} {channels} {rate} {frames} {'same' if a['same'] else 'reopened'}")
    with open(os.path.join(vt.IO, "cases.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")

journal = vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "cat"]).stdout
print("\n".join(line for line in journal.splitlines() if "carr" in line or "recover" in line or "open" in line)[-6000:])
vt.note("keepalived's recoveries: " + ("; ".join(line for line in journal.splitlines() if "recover" in line)[:400] or "none"))
vt.finish()
