"""The Raspberry Pi stand-in cards' rig in a guest (Tests/Fixtures/pi-standin, `kmod=pi-standin`),
shared by the scenarios that play on them (pi-standin, pi-carry): loading the module, finding
its cards, reading what they played from debugfs for the host to decode, and a keepalived run
on one of them.

    from pistandin import Capture, Daemon, card, load
    loaded, out = load()
    cap = Capture("vc4hdmi0", "ring", kind="iec958", aes3="rate", rate=48000, alsa="1.2.8")
    ...
    cap.stop()   # io/ring.played, listed in io/phases.json
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time

import vmtest as vt

K = os.environ.get("KEEPALIVED", "keepalived")
KO = os.environ.get("VM_KMOD_PI_STANDIN", "")
SOCKET = "/run/keepalived-test/control.sock"
DBG = "/sys/kernel/debug/pi-standin"
PARAM = "/sys/module/snd_pi_standin/parameters/display"
phases = []  # what the host decodes: one entry per captured file


def sh(*argv, timeout=60, root=None):
    if root:
        argv = ("chroot", root) + argv
    return vt.run(list(argv), timeout=timeout)


def load(params=""):
    r = sh("/bin/sh", "-c", f"modprobe snd-pcm && insmod {KO} {params}")
    return r.returncode == 0, r.stdout


def card(cid):
    for i, (c, _) in vt.cards().items():
        if c == cid:
            return i
    return None


def status(cid):
    d = {}
    for line in (vt.read(f"{DBG}/{cid}/status") or "").splitlines():
        k, _, v = line.partition(":")
        d[k.strip()] = int(v) if v.strip().lstrip("-").isdigit() else v.strip()
    return d


def drain(cid):
    fd = os.open(f"{DBG}/{cid}/played", os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                if not os.read(fd, 1 << 20):
                    break
            except BlockingIOError:
                break
    finally:
        os.close(fd)


class Capture:
    """What a card plays from now on, read continuously into /tmp (the log holds ~10 s), then
    copied to $VM_IO for the host to decode."""

    def __init__(self, cid, name, **meta):
        drain(cid)
        self.cid, self.name, self.meta = cid, name, meta
        self.path = f"/tmp/{name}.played"
        self.before = status(cid)
        self.proc = subprocess.Popen(["cat", f"{DBG}/{cid}/played"], stdout=open(self.path, "wb"))

    def stop(self, **more):
        time.sleep(0.2)  # the last clock tick's frames
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()
        after = status(self.cid)
        shutil.copy(self.path, os.path.join(vt.IO, self.name + ".played"))
        entry = dict(name=self.name, file=self.name + ".played", card=self.cid, **self.meta, **more,
                     lost=after.get("frames_lost", 0) - self.before.get("frames_lost", 0))
        phases.append(entry)
        with open(os.path.join(vt.IO, "phases.json"), "w") as f:
            json.dump(phases, f, indent=1)
        os.unlink(self.path)
        return entry


def owner(index):
    m = re.search(r"owner_pid\s*:\s*(\d+)", vt.read(f"/proc/asound/card{index}/pcm0p/sub0/status", ""))
    return int(m.group(1)) if m else None


class Daemon:
    def __init__(self, device, name, root=None, socket=SOCKET, args=()):
        self.name = name
        self.log_path = f"/tmp/keepalived-{name}.log"
        self.root = root
        self.socket = socket
        # No device: the outputs are chosen by `args` (`--digital`, `--all`).
        argv = [K, "run", *(["-d", device] if device else []), "--socket", socket, *args]
        self.proc = subprocess.Popen((["chroot", root] if root else []) + argv, stdout=open(self.log_path, "w"),
                                     stderr=subprocess.STDOUT)

    def status(self):
        r = sh(K, "status", "--json", "--socket", self.socket, timeout=10, root=self.root)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def output(self):
        s = self.status()
        return s["outputs"][0] if s and s.get("outputs") else {}

    def wait_playing(self, seconds):
        # Polled in its log, not with `status` (a program started under TCG costs the guest a
        # tenth of a second of CPU each time); `status` is asked once it says it plays.
        w = vt.wait_until(lambda: "info: playing device=" in (vt.read(self.log_path) or ""), seconds, 0.2)
        if w:
            w = vt.wait_until(lambda: self.output().get("state") == "playing", 5, 0.2)
        return w

    def log(self, lines=4):
        return " | ".join((vt.read(self.log_path) or "").strip().splitlines()[-lines:])

    def stop(self):
        sh(K, "stop", "--socket", self.socket, timeout=20, root=self.root)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.copy(self.log_path, os.path.join(vt.IO, os.path.basename(self.log_path)))


def process_of(tid):
    """The process of the thread a substream's owner_pid names (the thread that opened it)."""
    m = re.search(r"^Tgid:\s*(\d+)", vt.read(f"/proc/{tid}/status", "") if tid else "", re.M)
    return int(m.group(1)) if m else None


def params_line(index):
    hp = vt.hw_params(index)
    return f"{hp.get('format')} {hp.get('channels')} ch {hp.get('rate')}, buffer {hp.get('buffer_size')}, period {hp.get('period_size')}"


def trixie_root(trixie, *more):
    """Debian 13's root (`chroot=trixie`'s VM_CHROOT_TRIXIE, alsa-lib 1.2.14) set up for running
    keepalived and players over this guest's kernel: /proc, /sys, /dev, the test's control socket's
    directory, keepalived and its Swift runtime and `more` bound in at their own paths, a tmpfs
    /tmp. The root's path, or None (checked as `trixie-root`)."""
    root = "/run/trixie"
    binds = ("/proc", "/sys", "/dev", os.path.dirname(SOCKET), "/opt/swift", *more)
    # The root seen through the host's (read-only, overlaid) root. keepalived is bound in as a
    # file: its directory may be /tmp (`Tests/VM/run --keepalived /tmp/...`), which would hide the
    # root's own tmpfs /tmp behind the guest's.
    k = os.path.abspath(K)
    r = sh("/bin/sh", "-c", f"mkdir -p {root} {os.path.dirname(SOCKET)} && mount --bind {trixie} {root} && mount -t tmpfs tmpfs {root}/tmp"
           + "".join(f" && mkdir -p {root}{p} && mount --bind {p} {root}{p}" for p in binds)
           + f" && mkdir -p {root}{os.path.dirname(k)} && touch {root}{k} && mount --bind {k} {root}{k}")
    version = sh("/bin/sh", "-c", "dpkg-query -W -f '${Version}' libasound2t64", root=root).stdout.strip()
    ok = vt.check("trixie-root", r.returncode == 0 and version.startswith("1.2.14"), f"libasound2t64 {version} {vt.one_line(r.stdout)}")
    return root if ok else None
