#!/usr/bin/python3
"""Guest side of bench/carry: what carrying a player costs keepalived (issue 60 item 7), on the
kernel's loopback card (`hw:CARD=Loopback,DEV=0`, one subdevice: exclusive like real hardware) at
192 kHz, S32_LE, stereo, the issue's worst case. For the whole process (every thread): context
switches (wakeups) and CPU time from schedstat (ns, exact), over the window, in three runs:

1. aplay alone on `hw:` (the player's own cost, the reference);
2. keepalived alone, in the ring loop it keeps between players, already in that format;
3. keepalived with `--carry` carrying the same aplay through `keepalived:CARD=Loopback,DEV=0`:
   both processes measured.

aplay plays /dev/zero with a 500 ms buffer of 125 ms periods in both runs: digital zero is the
costliest input for keepalived, which reads every sample of a silent write to tell silence from
sound (docs/players.md), while a sound's first sample ends that read. Writes $VM_IO/results.json."""

import glob
import json
import os
import shutil
import signal
import subprocess
import time

import vmtest as vt

K = os.environ["KEEPALIVED"]
SECONDS = float(os.environ.get("BENCH_SECONDS", "30"))
WARMUP = float(os.environ.get("BENCH_WARMUP", "3"))
SOCKET = "/run/bench/control.sock"
HW = "hw:CARD=Loopback,DEV=0"
PLUGIN = "keepalived:CARD=Loopback,DEV=0"
RATE, FORMAT, CHANNELS = 192000, "S32_LE", 2
APLAY = ["aplay", "-q", "-f", FORMAT, "-r", str(RATE), "-c", str(CHANNELS), "-t", "raw",
         "--buffer-time=500000", "--period-time=125000", "/dev/zero"]
loop = int(os.environ.get("VM_CARD_ALOOP", "0"))
PLAYER_ENV = dict(os.environ, KEEPALIVED_SOCKET=SOCKET, KEEPALIVED_RELEASE_TIMEOUT="1000")


def threads(pid):
    """Each thread's name (with its id: keepalived names several alike) → its context switches,
    (voluntary: the thread slept, its own wakeups; involuntary: the scheduler took the CPU from it)."""
    counts = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        text = vt.read(f"/proc/{pid}/task/{task}/status", "") or ""
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        counts[f"{fields.get('Name', '?').strip()} {task}"] = (int(fields.get("voluntary_ctxt_switches", "0")),
                                                               int(fields.get("nonvoluntary_ctxt_switches", "0")))
    return counts


def measure(label, pids):
    """Counters of each of `pids` (name → pid) over the window, after the warm-up; keepalived's
    wakeups by thread too (where a wakeup beyond one per player period comes from)."""
    time.sleep(WARMUP)
    before = {name: vt.process_counters(pid) for name, pid in pids.items()}
    before_threads = {name: threads(pid) for name, pid in pids.items()}
    t0 = time.monotonic()
    time.sleep(SECONDS)
    after = {name: vt.process_counters(pid) for name, pid in pids.items()}
    after_threads = {name: threads(pid) for name, pid in pids.items()}
    elapsed = time.monotonic() - t0
    row = {"run": label, "seconds": elapsed}
    for name in pids:
        row[name] = {"wakeups": (after[name][0] - before[name][0]) / elapsed, "cpu_us": (after[name][1] - before[name][1]) / 1000 / elapsed,
                     "threads": {t: [(n[0] - before_threads[name].get(t, (0, 0))[0]) / elapsed, (n[1] - before_threads[name].get(t, (0, 0))[1]) / elapsed]
                                 for t, n in after_threads[name].items() if n != before_threads[name].get(t, (0, 0))}}
    vt.note(json.dumps(row))
    return row


def status():
    r = vt.run([K, "status", "--json", "--socket", SOCKET], timeout=20)
    try:
        return json.loads(r.stdout)["outputs"][0]
    except (ValueError, KeyError, IndexError):
        return {}


# The plug-in from the package scripts/package built of this tree (dist/).
arch = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE, text=True).stdout.strip()
debs = sorted(glob.glob(os.path.join(os.environ["VM_REPO"], "dist", f"keepalived-audio_*_{arch}.deb")), key=os.path.getmtime)
if not vt.check("plugin-from-package", bool(debs) and vt.run(["dpkg-deb", "-x", debs[-1], "/tmp/keepalived-deb"], timeout=120).returncode == 0,
                debs[-1] if debs else "no dist/*.deb: run scripts/package first"):
    vt.finish()
plugin = glob.glob("/tmp/keepalived-deb/usr/lib/*/alsa-lib/libasound_module_pcm_keepalived.so")[0]
os.makedirs(os.path.dirname(plugin.replace("/tmp/keepalived-deb", "")), exist_ok=True)
shutil.copy(plugin, os.path.dirname(plugin.replace("/tmp/keepalived-deb", "")))
os.makedirs("/etc/alsa/conf.d", exist_ok=True)
shutil.copy(os.path.join(os.environ["VM_REPO"], "packaging/alsa/50-keepalived.conf"), "/etc/alsa/conf.d/")
os.makedirs(os.path.dirname(SOCKET), exist_ok=True)

results = []

# 1. aplay alone on the card.
aplay = subprocess.Popen(APLAY[:1] + ["-D", HW] + APLAY[1:], stderr=subprocess.DEVNULL)
vt.check("aplay-alone-running", vt.wait_until(lambda: vt.pcm_state(loop) == "RUNNING", 20, 0.05), vt.pcm_state(loop))
results.append(measure("aplay alone on hw:", {"aplay": aplay.pid}))
aplay.send_signal(signal.SIGTERM)
aplay.wait(timeout=15)
vt.wait_until(lambda: vt.pcm_state(loop) in ("CLOSED", None), 10)

# 2. keepalived alone, in the player's format: a short carried play switches it there, and it stays.
daemon = subprocess.Popen([K, "run", "-d", HW, "--carry", "--socket", SOCKET], stdout=subprocess.DEVNULL, stderr=open("/tmp/keepalived.err", "w"))
vt.check("keepalived-running", vt.wait_until(lambda: status().get("state") == "playing", 30, 0.2), json.dumps(status()))
first = vt.run(["timeout", "-s", "INT", "3"] + APLAY[:1] + ["-D", PLUGIN] + APLAY[1:], env=PLAYER_ENV, timeout=60)
hp = vt.hw_params(loop)
vt.check("keepalived-in-format", hp.get("rate", "").split(" ")[0] == str(RATE) and hp.get("format") == FORMAT,
         f"after a carried play of {RATE} Hz {FORMAT}: the card runs {hp}; aplay: {vt.one_line(first.stdout, 200)}")
time.sleep(2)  # the ring loop takes over again after the player
results.append(measure("keepalived alone (ring loop)", {"keepalived": daemon.pid}))

# 3. keepalived carrying aplay.
aplay = subprocess.Popen(APLAY[:1] + ["-D", PLUGIN] + APLAY[1:], env=PLAYER_ENV, stderr=open("/tmp/aplay.err", "w"))
carried = vt.wait_until(lambda: status().get("carrying") == "aplay", 30, 0.2)
vt.check("aplay-carried", carried, json.dumps(status()))
results.append(measure("keepalived carrying aplay", {"keepalived": daemon.pid, "aplay": aplay.pid}))
results[-1]["recoveries"] = status().get("recoveries")
aplay.send_signal(signal.SIGTERM)
aplay.wait(timeout=15)
results[-1]["aplay_underruns"] = (vt.read("/tmp/aplay.err", "") or "").count("underrun")
vt.run([K, "stop", "--socket", SOCKET], timeout=20)
daemon.wait(timeout=20)

with open(os.path.join(vt.IO, "results.json"), "w") as f:
    json.dump({"rate": RATE, "format": FORMAT, "channels": CHANNELS, "runs": results}, f)
print("ok bench: done")
