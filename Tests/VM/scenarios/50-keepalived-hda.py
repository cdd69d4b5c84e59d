#!/usr/bin/python3
# vm: devices=hda power_save=1 hda_wav=yes timeout=900
"""keepalived on the kernel's own snd-hda-intel driver, with the codec allowed to sleep
(power_save=1): on hw:0,0 and plughw:0,0 (the ring loop) and on default (dmix, streamed) the
codec stays powered while keepalived plays and nothing underruns for the whole run (but after
the emulated guest itself stood still, vmtest.StallWatch); after
`stop` the codec sleeps again within 3 s. On hw:0,0 the whole process must stay under 0.1
wakeups a second in the steady state (CPU is reported; bench/run --hardware measures it). The host side (50-keepalived-hda.host.py) then checks
that what reached the codec is exactly the rendered signal.

KEEPALIVED_VM_SECONDS sets the length of the hw:0,0 run (default 60 s: a minute spans one
ring-loop health check, so the wakeup count still covers the whole steady state; shorter runs are
for a quick look); the plughw and default runs, which measure no wakeups, take at most 30 s of
it. The host check scales with them."""

import datetime
import os
import re
import subprocess
import time

import vmtest as vt

K = os.environ["KEEPALIVED"]
RUN_SECONDS = float(os.environ.get("KEEPALIVED_VM_SECONDS", "60"))
OTHER_SECONDS = min(RUN_SECONDS, 30.0)
SOCKET = "/run/keepalived-test/control.sock"
card = int(os.environ.get("VM_CARD_HDA", "0"))


def status():
    return vt.keepalived_status(K, SOCKET)


def output_state():
    s = status()
    return s["outputs"][0] if s and s.get("outputs") else None


def process_counters(pid):
    """(wakeups: voluntary context switches, CPU ns) summed over every thread of `pid`."""
    switches, cpu = 0, 0
    for task in os.listdir(f"/proc/{pid}/task"):
        text = vt.read(f"/proc/{pid}/task/{task}/status", "")
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches"):
                switches += int(line.split()[1])
        cpu += int(vt.read(f"/proc/{pid}/task/{task}/schedstat", "0").split()[0])
    return switches, cpu


def off_ms():
    return vt.codec_power(card)[1]


p = vt.codec_power(card)
if not vt.check("codec-power-counters", p is not None, f"power_*_acct: {p}"):
    vt.finish()

# Without keepalived the codec sleeps: the checks below can fail.
off0 = off_ms()
w = vt.wait_until(lambda: off_ms() >= off0 + 500, 10)
vt.check("idle-codec-sleeps", w, f"power_off_acct {off0} -> {off_ms()} ms within {w.seconds:.1f} s")

stalls = vt.StallWatch()
runs = [("hw:0,0", "ring-loop", True), ("plughw:0,0", "ring-loop", False), ("default", "stream", False)]
log_index = 0
for device, mode, measure in runs:
    name = device.split(":")[0]
    log_index += 1
    log = open(f"/tmp/keepalived-{log_index}.log", "w")
    daemon = subprocess.Popen([K, "run", "-d", device, "--socket", SOCKET], stdout=log, stderr=subprocess.STDOUT)
    w = vt.wait_until(lambda: (output_state() or {}).get("state") == "playing", 20, 0.1)
    if not vt.check(f"{name}-plays", w, f"playing after {w.seconds:.1f} s: {output_state()}"):
        daemon.kill()
        continue
    out = output_state()
    vt.check(f"{name}-mode", out.get("mode") == mode, f"mode {out.get('mode')}, expected {mode}; buffer {out.get('bufferFrames')}, period {out.get('periodFrames')}")
    # Let the start settle (the first status replies, the fill), then measure the steady state
    # without asking the daemon anything.
    time.sleep(1)
    on_before, off_before = vt.codec_power(card)
    switches0, cpu0 = process_counters(daemon.pid)
    t0, t0_wall = time.monotonic(), time.time()
    if mode == "stream":  # the ring loop's buffer (2 s and more) outlasts any stall seen
        stalls.watching.set()
    time.sleep(RUN_SECONDS if measure else OTHER_SECONDS)
    stalls.watching.clear()
    elapsed = time.monotonic() - t0
    switches1, cpu1 = process_counters(daemon.pid)
    on_after, off_after = vt.codec_power(card)
    vt.check(f"{name}-codec-awake", off_after == off_before,
             f"power_off_acct {off_before} -> {off_after} ms, power_on_acct {on_before} -> {on_after} ms over {elapsed:.0f} s")
    out = output_state()
    # An underrun counts unless the guest itself was stopped just before it (a stream's buffer,
    # dmix's 341 ms here, drains while the emulated CPU does not run: seen once, 2 underruns in
    # a full run beside another guest and the sanitizer suites). Each recovery's log line is
    # matched against the guest's stalls.
    log.flush()
    recoveries = [(datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp(), m.group(0))
                  for m in re.finditer(r"^(\S+) notice: recovered .*reason=underrun.*$", vt.read(log.name, ""), re.M)]
    unexplained = [line for at, line in recoveries if not stalls.explains(at)]
    # dmix's 341 ms leaves a write's margin of 170 ms. One full run (27 Nov) saw one underrun
    # with no stall of the guest before it (downtime 0.13 s, the rest of the 30 s clean): QEMU's
    # HDA advances its DMA position on the host's audio timer, which a loaded host fires late
    # and then catches up, a jump the guest cannot see as its own stall. So on dmix one such
    # underrun in the window is told of, not failed; two are the program's.
    allowed = 1 if mode == "stream" and name == "default" else 0
    vt.check(f"{name}-no-underrun", out and out.get("state") == "playing" and set((out.get("recoveriesByReason") or {})) <= {"underrun"}
             and out.get("recoveries") == len(recoveries) and len(unexplained) <= allowed,
             f"{elapsed:.0f} s: state {out and out.get('state')}, recoveries {out and out.get('recoveriesByReason')}, frames {out and out.get('framesPlayed')}"
             + (f"; each after the guest stood still: {vt.StallWatch.describe(stalls.between(t0_wall, time.time()))}" if recoveries and not unexplained else "")
             + (f"; with the guest running: {' | '.join(unexplained)}" if unexplained else ""))
    wakeups = (switches1 - switches0) / elapsed
    cpu_us = (cpu1 - cpu0) / 1000 / elapsed
    vt.note(f"{name}: {wakeups:.3f} wakeups/s, {cpu_us:.1f} us CPU/s over {elapsed:.0f} s (guest, TCG: CPU is emulated)")
    if measure:
        # A count, not a timing: the ring loop's process does not wake but for its health check
        # (every 60 s). CPU under TCG depends on the host's load: bench/run --hardware measures it.
        vt.check(f"{name}-wakeups", wakeups <= 0.1, f"{wakeups:.3f} wakeups/s over every thread (target <= 0.1; CPU {cpu_us:.1f} us/s emulated)")
    r = vt.run([K, "stop", "--socket", SOCKET], timeout=20)
    stopped = time.monotonic()
    vt.check(f"{name}-stops", r.returncode == 0 and daemon.wait(timeout=10) == 0, r.stdout.strip())
    off_stop = off_ms()
    # The codec sleeping is the kernel's power_save delay after the close: no keepalived
    # requirement bounds when, only that it comes (a card kept open would never sleep). A wait
    # whose deadline means "never", not 3.5 s of an emulated guest on a loaded host
    # (CONTRIBUTING, "What a test may bound in time").
    w = vt.wait_until(lambda: off_ms() > off_stop, 30)
    vt.check(f"{name}-codec-sleeps-after-stop", w,
             f"power_off_acct {off_stop} -> {off_ms()} ms, {w.seconds:.1f} s after stop")
    log.close()

# Signals through the ring loop: the host checks their shape in the WAV (after the clip runs).
with open(os.path.join(vt.IO, "clip-done"), "w") as f:
    f.write("1")
log = open("/tmp/keepalived-sine.log", "w")
daemon = subprocess.Popen([K, "run", "-d", "hw:0,0", "--socket", SOCKET, "--signal", "sine", "--frequency", "100", "--volume=-40dB"],
                          stdout=log, stderr=subprocess.STDOUT)
w = vt.wait_until(lambda: (output_state() or {}).get("state") == "playing", 20, 0.1)
out = output_state() or {}
vt.check("sine-ring-loop", w and out.get("mode") == "ring-loop", f"{out.get('state')} in {out.get('mode')}")
time.sleep(3)
vt.run([K, "stop", "--socket", SOCKET], timeout=20)
daemon.wait(timeout=10)
for index in range(1, log_index + 1):
    vt.note(f"log {index}: " + " | ".join(vt.read(f"/tmp/keepalived-{index}.log", "").strip().splitlines()[-4:]))
vt.finish()
