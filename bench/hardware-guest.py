#!/usr/bin/python3
"""Guest side of bench/hardware: runs each program on the VM's HDA card for the window (which,
3 s after the start, takes in the ring loop's health check at 60 s) and
records, for the whole process (every thread): context switches (wakeups), CPU time from
schedstat (ns, exact), underruns (keepalived's recoveries; aplay's "underrun!!!" lines), and how
long the codec spent powered off during the window. Writes $VM_IO/results.json."""

import json
import os
import signal
import subprocess
import time

import vmtest as vt

K = os.environ["KEEPALIVED"]
SECONDS = float(os.environ.get("BENCH_SECONDS", "60"))
WARMUP = float(os.environ.get("BENCH_WARMUP", "3"))
SOCKET = "/run/bench/control.sock"

PROGRAMS = [
    # (device class, label, command)
    ("hw", "keepalived (ring loop)", [K, "run", "-d", "hw:0,0", "--socket", SOCKET]),
    ("hw", "keepalived --no-ring-loop", [K, "run", "-d", "hw:0,0", "--no-ring-loop", "--socket", SOCKET]),
    ("hw", "aplay, 2 s buffer, 1 s periods", ["aplay", "-q", "-D", "hw:0,0", "-f", "S16_LE", "-r", "44100", "-c", "2",
                                               "--buffer-time=2000000", "--period-time=1000000", "/dev/zero"]),
    ("plughw", "keepalived (ring loop)", [K, "run", "-d", "plughw:0,0", "--socket", SOCKET]),
    ("plughw", "aplay, 2 s buffer, 1 s periods", ["aplay", "-q", "-D", "plughw:0,0", "-f", "S16_LE", "-r", "44100", "-c", "1",
                                                   "--buffer-time=2000000", "--period-time=1000000", "/dev/zero"]),
    ("dmix", "keepalived", [K, "run", "-d", "default", "--socket", SOCKET]),
    ("dmix", "aplay", ["aplay", "-q", "-D", "default", "-f", "S16_LE", "-r", "48000", "-c", "2", "/dev/zero"]),
]


def keepalived_recoveries():
    r = vt.run([K, "status", "--json", "--socket", SOCKET], timeout=10)
    try:
        return sum(o["recoveries"] for o in json.loads(r.stdout)["outputs"])
    except (ValueError, KeyError):
        return None


results = []
# QEMU translates guest code the first time it runs, and bills that time to the guest task that
# runs it: a first ring loop would pay for translating its own health check. One discarded run
# through a health check (every 60 s) first.
if not os.environ.get("BENCH_NO_WARMUP"):
    warm = subprocess.Popen([K, "run", "-d", "hw:0,0", "--socket", SOCKET], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(65)
    vt.run([K, "stop", "--socket", SOCKET], timeout=20)
    warm.wait(timeout=15)
    vt.wait_until(lambda: vt.pcm_state(0) in ("CLOSED", None), 10)

for device, label, command in PROGRAMS:
    only = os.environ.get("BENCH_ONLY")
    if only and only not in device:
        continue
    err = open("/tmp/bench.err", "w")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    running = vt.wait_until(lambda: vt.pcm_state(0) == "RUNNING", 20, 0.05)
    if not running:
        process.kill()
        results.append({"device": device, "program": label, "error": "never reached RUNNING"})
        continue
    time.sleep(WARMUP)
    off0 = vt.codec_power(0)[1]
    s0, c0 = vt.process_counters(process.pid)
    t0 = time.monotonic()
    time.sleep(SECONDS)
    s1, c1 = vt.process_counters(process.pid)
    elapsed = time.monotonic() - t0
    off1 = vt.codec_power(0)[1]
    if command[0] == K:
        underruns = keepalived_recoveries()
        vt.run([K, "stop", "--socket", SOCKET], timeout=20)
    else:
        process.send_signal(signal.SIGTERM)
        underruns = None
    process.wait(timeout=15)
    err.close()
    if underruns is None:
        underruns = (vt.read("/tmp/bench.err", "") or "").count("underrun")
    results.append({
        "device": device, "program": label, "seconds": elapsed,
        "wakeups": (s1 - s0) / elapsed, "cpu_us": (c1 - c0) / 1000 / elapsed,
        "underruns": underruns, "codec_off_ms": off1 - off0,
    })
    vt.note(json.dumps(results[-1]))
    # The codec must see the program go before the next one starts.
    vt.wait_until(lambda: vt.pcm_state(0) in ("CLOSED", None), 10)

with open(os.path.join(vt.IO, "results.json"), "w") as f:
    json.dump(results, f)
print("ok bench: done")
