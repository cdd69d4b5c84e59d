"""Helpers for test scripts that run inside the VM rig's guest (python3, standard library).

The rig puts this directory on PYTHONPATH, so a guest script does `import vmtest as vt`.

Reporting: every test prints one line, `ok NAME: detail`, `FAIL NAME: detail` or
`SKIP NAME: detail`; Tests/VM/run counts them.  End the script with `vt.finish()` (exit 1 if
any test failed).

Waiting: never sleep and hope.  `vt.wait_until(predicate, timeout)` polls an observable state
with a bounded deadline and returns a Wait (truthy when the predicate held; .value, .seconds).

The host: `vt.host("unplug", "usbaudio")` asks the rig on the host to act (QMP device_del,
device_add, system_wakeup, ...) and returns (rc, text) once it has; see HOST VERBS in
Tests/VM/README.md.
"""

import glob
import json
import os
import re
import subprocess
import sys
import threading
import time

SERIAL = os.environ.get("VM_SERIAL", "/dev/ttyS1")
IO = os.environ.get("VM_IO", "/run/vm-io")
_counts = {"ok": 0, "FAIL": 0, "SKIP": 0}
_polls = {"n": 0, "seconds": 0.0}  # every wait_until poll, and the CPU its programs took


# -- reporting -------------------------------------------------------------------------------

def _report(kind, name, detail):
    _counts[kind] += 1
    print(f"{kind} {name}: {detail}", flush=True)


def ok(name, detail=""):
    _report("ok", name, detail)
    return True


def fail(name, detail=""):
    _report("FAIL", name, detail)
    return False


def skip(name, detail=""):
    _report("SKIP", name, detail)


def check(name, condition, detail=""):
    """ok or FAIL depending on condition; returns condition."""
    return ok(name, detail) if condition else fail(name, detail)


def note(text):
    """A line of information (not a test result)."""
    print(f"# {text}", flush=True)


def failed():
    return _counts["FAIL"]


def finish():
    with open("/proc/stat") as f:
        user, nice, system = (int(x) for x in f.readline().split()[1:4])
    t = os.times()
    note(f"cpu: the guest busy {(user + nice + system) // 100} s, the test's commands "
         f"{int(t.children_user + t.children_system)} s, {int(_polls['seconds'])} s of it in {_polls['n']} polls")
    sys.exit(1 if _counts["FAIL"] else 0)


# -- time and waiting ------------------------------------------------------------------------

def uptime():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


class Wait:
    def __init__(self, value, seconds):
        self.value = value
        self.seconds = seconds

    def __bool__(self):
        return bool(self.value)

    def __repr__(self):
        return f"Wait({self.value!r}, {self.seconds:.2f} s)"


def wait_until(predicate, timeout, interval=0.05):
    """Poll predicate() until it returns something truthy or `timeout` seconds pass, sleeping
    `interval` between polls, or as long as the last poll took when that is longer (at most 0.4 s).
    Returns a Wait: truthy with .value on success, falsy on timeout; .seconds waited."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    c0 = os.times()
    try:
        while True:
            _polls["n"] += 1
            p0 = time.monotonic()
            v = predicate()
            now = time.monotonic()
            if v or now >= deadline:
                return Wait(v, now - t0)
            # Why: under TCG a predicate that starts a program costs tens to hundreds of ms of
            # the guest's CPU; polled every `interval` regardless, a wait took the vCPU the system
            # under test needed. It sleeps about as long as the predicate took (at most 0.4 s), so
            # waiting costs at most half the vCPU; a predicate that only reads files keeps
            # `interval`.
            time.sleep(max(interval, min(now - p0, 0.4)))
    finally:
        c1 = os.times()
        _polls["seconds"] += (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system)


class StallWatch(threading.Thread):
    """The guest's own stalls: while ``watching``, a thread asks to sleep 50 ms and records every
    wake that came `threshold` seconds or more late, as (start, end) in time.time(). Under TCG the
    whole guest stops while the host runs other work (another guest, the test suites), and its
    clocks go on: an audio stream then drains with nobody to refill it. A check that counts
    underruns asks ``explains`` whether the machine was stopped just before each: an underrun
    with no stall before it is the program's. Python waking under TCG is not free (at 50 wakeups
    a second for the whole of keepalived-hda, with a debug keepalived, QEMU's CPU rose from 19 s
    to 59 s), so it watches only the windows asked for."""

    def __init__(self, threshold=0.1, interval=0.05):
        super().__init__(daemon=True)
        self.threshold = threshold
        self.interval = interval
        self.stalls = []
        self.lock = threading.Lock()
        self.watching = threading.Event()
        self.start()

    def run(self):
        while True:
            self.watching.wait()
            last = time.time()
            while self.watching.is_set():
                time.sleep(self.interval)
                now = time.time()
                if now - last - self.interval >= self.threshold:
                    with self.lock:
                        self.stalls.append((last, now))
                last = now

    def between(self, t0, t1):
        """The stalls that overlap [t0, t1]."""
        with self.lock:
            return [(a, b) for a, b in self.stalls if b >= t0 and a <= t1]

    def explains(self, instant, before=2.0):
        """The stall that ended within `before` seconds ahead of `instant` (or spans it), or None."""
        found = self.between(instant - before, instant)
        return found[-1] if found else None

    @staticmethod
    def describe(stalls):
        return ", ".join(f"{1000 * (b - a):.0f} ms at {time.strftime('%H:%M:%S', time.gmtime(a))}.{int(a * 1000) % 1000:03d}"
                         for a, b in stalls) or "none"


# -- sound state -----------------------------------------------------------------------------

def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def codec_power(card=0, codec=0):
    """(power_on_acct, power_off_acct) of an HDA codec in ms, or None without the counters."""
    base = f"/sys/class/sound/hwC{card}D{codec}"
    on, off = read(f"{base}/power_on_acct"), read(f"{base}/power_off_acct")
    if on is None or off is None:
        return None
    return int(on), int(off)


def cards():
    """{index: (id, description)} from /proc/asound/cards."""
    out = {}
    for m in re.finditer(r"^\s*(\d+)\s+\[(\S+)\s*\]:\s*(.*)$", read("/proc/asound/cards", ""), re.M):
        out[int(m.group(1))] = (m.group(2), m.group(3).strip())
    return out


def card_index(pattern):
    """Index of the first card whose id or description matches the regex, or None."""
    for i, (cid, desc) in cards().items():
        if re.search(pattern, cid) or re.search(pattern, desc):
            return i
    return None


def pcm_status(card=0, device=0, sub=0, stream="p"):
    """/proc/asound/cardC/pcmD{p,c}/subS/status as a dict ({'state': 'CLOSED'} when closed,
    None when the substream does not exist)."""
    text = read(f"/proc/asound/card{card}/pcm{device}{stream}/sub{sub}/status")
    if text is None:
        return None
    if text.strip() == "closed":
        return {"state": "CLOSED"}
    d = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            d[k.strip()] = v.strip()
    return d


def pcm_state(card=0, device=0, sub=0, stream="p"):
    s = pcm_status(card, device, sub, stream)
    return s.get("state") if s else None


def process_counters(pid):
    """A process's context switches (its wakeups) and CPU time in ns (schedstat, exact), summed
    over its threads: what the benchmarks measure."""
    switches, cpu = 0, 0
    for task in os.listdir(f"/proc/{pid}/task"):
        for line in (read(f"/proc/{pid}/task/{task}/status", "") or "").splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                switches += int(line.split()[1])
        cpu += int((read(f"/proc/{pid}/task/{task}/schedstat", "0") or "0").split()[0])
    return switches, cpu


def pcm_holder(card=0, device=0, sub=0, stream="p"):
    """The process holding a substream open (the Tgid of its status's owner_pid: a player's
    thread may own it), None when it is closed, "open" when the status names no owner."""
    text = read(f"/proc/asound/card{card}/pcm{device}{stream}/sub{sub}/status", "closed")
    if text.strip() == "closed":
        return None
    for line in text.splitlines():
        if line.strip().startswith("owner_pid"):
            tid = int(line.split(":")[1])
            for status in read(f"/proc/{tid}/status", "").splitlines():
                if status.startswith("Tgid:"):
                    return int(status.split()[1])
            return tid
    return "open"


def hw_params(card=0, device=0, sub=0, stream="p"):
    """/proc/asound/cardC/pcmD{p,c}/subS/hw_params as a dict ({} when closed)."""
    text = read(f"/proc/asound/card{card}/pcm{device}{stream}/sub{sub}/hw_params", "")
    d = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            d[k.strip()] = v.strip()
    return d


# -- the host --------------------------------------------------------------------------------

_seq = [0]


def host(verb, *args, timeout=60.0):
    """Ask the rig on the host to do something; returns (rc, text) once it has.
    Verbs: unplug ID, replug ID, wakeup [DELAY], wake-on-suspend DELAY|off, hmp CMD...,
    qmp COMMAND [JSON], events, time (and any the scenario's host side adds)."""
    _seq[0] += 1
    rid = f"{os.getpid()}-{_seq[0]}-{time.monotonic_ns()}"
    line = " ".join(["@@HOST", rid, verb] + [str(a) for a in args]) + "\n"
    fd = os.open(SERIAL, os.O_WRONLY | os.O_NOCTTY)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    ack = os.path.join(IO, ".ack", rid)
    w = wait_until(lambda: os.path.exists(ack), timeout, 0.02)
    if not w:
        return 124, f"no answer from the host within {timeout} s"
    text = read(ack, "")
    rc, _, rest = text.partition("\n")
    return int(rc or 1), rest


# -- processes -------------------------------------------------------------------------------

def run(cmd, timeout=60, **kw):
    """subprocess.run with text output captured (stdout and stderr together)."""
    if isinstance(cmd, str):
        cmd = ["/bin/sh", "-c", cmd]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, **kw)


def one_line(text, limit=300):
    """`text` squeezed onto one line of at most `limit` characters, for a report's detail."""
    return " ".join(str(text).split())[:limit]


# -- keepalived ------------------------------------------------------------------------------

def install_package(timeout=180):
    """Installs the newest dist/keepalived-audio_*_ARCH.deb of the host's tree (ARCH: this
    machine's; dist/ may also hold a package built for another) with dpkg, reported as
    `package-built` and `dpkg-install`; ends the script when either fails."""
    arch = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE, text=True).stdout.strip()
    pattern = f"keepalived-audio_*_{arch}.deb"
    debs = sorted(glob.glob(os.path.join(os.environ["VM_REPO"], "dist", pattern)), key=os.path.getmtime)
    if not check("package-built", bool(debs), debs[-1] if debs else f"no dist/{pattern}: run scripts/package first"):
        finish()
    # The host's policy-rc.d (a container's "never start services") would hide what the package's
    # scripts do; a real box has none. mandb over 9p under TCG takes minutes: the index is not tested.
    for path in ("/usr/sbin/policy-rc.d", "/var/lib/man-db/auto-update"):
        if os.path.exists(path):
            os.remove(path)
    r = run(["dpkg", "-i", debs[-1]], timeout=timeout)
    if not check("dpkg-install", r.returncode == 0, one_line(r.stdout[-300:])):
        finish()
    return debs[-1]


# The environment of a system service's caller: no user runtime directory or socket variable, so
# `keepalived status` asks the system daemon (/run/keepalived-audio), as root's shell would.
ROOT_ENV = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "KEEPALIVED_SOCKET")}


def keepalived_status(keepalived, socket=None, env=None, runner=None, timeout=15):
    """`keepalived status --json` as a dict, or None when no daemon answers (or not in JSON, or
    not within `timeout` s: on a guest the host starves, the client's own start can take that
    long, and a wait_until around this call keeps its own deadline).

    `socket`: the daemon's control socket (default: the one the environment names); `env`: the
    caller's environment (default: this process's); `runner`: runs the argv and returns a
    CompletedProcess (another user's: `lambda argv: as_user(argv)`)."""
    argv = [keepalived, "status", "--json"] + (["--socket", socket] if socket else [])
    try:
        r = (runner or (lambda a: run(a, timeout=timeout, env=env)))(argv)
        return json.loads(r.stdout)
    except (ValueError, subprocess.TimeoutExpired):
        return None
