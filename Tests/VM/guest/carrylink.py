"""The measured link's cases, for the scenarios whose host side is carry-chaos's judge
(77-carry-chaos.host.py): carry-chaos and carry-handoffs.

`Link.start` installs the package, opens the loopback's capture side (device 1) first and records
it whole (`io/link.raw`), watches the guest's stalls and starts the package's service with the
given options; each case's plays are ramps of their own tags (Tests/VM/linkcapture.py) and
`Link.case` records what the host holds them to (`io/chaos.json`, rewritten as the guest goes).

    link = Link()
    kpid = link.start(f"-d {HW} --carry")           # the service on the link, or the script ends
    frames = ramp_file(1, 1.5)
    holders, out, took = watch(aplay(1), 30)
    carried("mmap", holders, kpid, "aplay")
    link.case("mmap", [1], frames, "exact", padding=True)
    link.finish()
"""

import json
import os
import subprocess
import sys
import time

import vmtest as vt

sys.path.insert(0, os.path.join(os.environ["VM_REPO"], "Tests", "VM"))
import linkcapture as lc  # noqa: E402

from looplink import CAPTURE, CONF, PLUGIN, UNIT, holder, loop, show  # noqa: E402

RATE = lc.RATE
CAPTURED = os.path.join(vt.IO, "link.raw")
PLAYER_ENV = dict(vt.ROOT_ENV, KEEPALIVED_RELEASE_TIMEOUT="1000")
GAP = 1.0  # keepalived's signal between two cases


def ramp_file(tag, seconds, rate=RATE):
    """The ramp tagged `tag`, as /tmp/ramp-TAG.wav and .raw; its frame count."""
    data = lc.ramp(tag, int(rate * seconds))
    with open(f"/tmp/ramp-{tag}.raw", "wb") as f:
        f.write(data)
    with open(f"/tmp/ramp-{tag}.wav", "wb") as f:
        f.write(lc.wav(data, rate))
    return len(data) // lc.FRAME


def start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PLAYER_ENV)


def watch(player, deadline, every=0.02, during=None):
    """Waits for `player` to end (killed past `deadline` seconds); who held device 0 meanwhile,
    its output, its seconds. `during(elapsed)` is called at each look."""
    t = time.monotonic()
    holders = set()
    while player.poll() is None and time.monotonic() - t < deadline:
        holders.add(holder())
        if during:
            during(time.monotonic() - t)
        time.sleep(every)
    if player.poll() is None:
        player.kill()
    out, _ = player.communicate(timeout=10)
    return holders, out, time.monotonic() - t


def aplay(tag, *args):
    return start(["aplay", "-q", *args, "-D", PLUGIN, f"/tmp/ramp-{tag}.wav"])


def on_link(kpid, why):
    """keepalived (`kpid`) holds device 0, running, within 30 s."""
    w = vt.wait_until(lambda: holder() == kpid and vt.pcm_state(loop, 0, 0) == "RUNNING", 30, 0.05)
    return vt.check(why, w, f"device 0 held by {holder()} (keepalived {kpid}), {vt.pcm_state(loop, 0, 0)}, after {w.seconds:.2f} s")


def carried(name, holders, kpid, what):
    vt.check(f"{name}-carried", holders == {kpid}, f"device 0 held by {sorted(map(str, holders))} while {what} played (keepalived {kpid})")


def service_journal():
    return vt.run(["journalctl", "-u", UNIT, "--no-pager", "-o", "cat"]).stdout


def carried_opens(program):
    """How many opens of `program`'s keepalived has carried so far (each its own: a hand-off)."""
    return sum(1 for line in service_journal().splitlines() if line.startswith("carrying a player") and line.endswith(f"program={program}"))


class Link:
    """The capture of the link, the guest's stalls and the cases recorded for the host."""

    def __init__(self):
        self.cases = []
        self.stalls = vt.StallWatch()
        self.rec = None
        self.captured_at = None

    def start(self, options):
        """The package installed, the capture running, then the service with `options` on the
        link: keepalived's pid (the script ends, the capture stopped, when any of it fails)."""
        vt.install_package(timeout=180)
        self.rec = subprocess.Popen(["arecord", "-q", "-D", CAPTURE, "-f", "S16_LE", "-r", str(RATE), "-c", "2", "-t", "raw", CAPTURED],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        w = vt.wait_until(lambda: vt.pcm_state(loop, 1, 0, "c") == "RUNNING", 15, 0.05)
        self.captured_at = time.time()  # the capture's first frame, about
        self.stalls.watching.set()
        if not vt.check("capture-running", w, f"arecord -D {CAPTURE}: {vt.pcm_state(loop, 1, 0, 'c')} after {w.seconds:.2f} s"):
            vt.finish()
        with open(CONF, "w") as f:
            f.write(f'KEEPALIVED_OPTIONS="{options}"\n')
        r = vt.run(["systemctl", "enable", "--now", UNIT], timeout=90)
        kpid = int(show("MainPID") or 0)
        if not on_link(kpid, "keepalived-on-the-link") or r.returncode != 0:
            vt.note(vt.one_line(service_journal()[-600:], 600))
            self.rec.terminate()
            vt.finish()
        time.sleep(GAP)
        return kpid

    def now(self):
        """Seconds into the capture, about (a case's `began`)."""
        return time.time() - self.captured_at

    def case(self, name, tags, frames, expect, **more):
        """Records what the host holds the case's plays to (written out as the guest goes)."""
        self.cases.append(dict(name=name, tags=tags, frames=frames, expect=expect, **more))
        stalls = [(a - self.captured_at, b - self.captured_at) for a, b in self.stalls.between(0, time.time())]
        with open(os.path.join(vt.IO, "chaos.json"), "w") as f:
            json.dump({"rate": RATE, "cases": self.cases, "stalls": stalls}, f)

    def finish(self, seconds):
        """The capture stopped (at least `seconds` of it checked), the stalls recorded, the
        service's journal printed but for its carrying lines; ends the script."""
        self.rec.terminate()
        self.rec.communicate(timeout=10)
        self.case("end", [], 0, "none")  # the guest's stalls up to now
        print("\n".join(line for line in service_journal().splitlines() if "carrying a player" not in line and "carries no player" not in line)[-8000:])
        vt.note(f"the guest stood still {len(self.stalls.stalls)} times: {vt.StallWatch.describe(self.stalls.stalls)[:600]}")
        size = os.path.getsize(CAPTURED) if os.path.exists(CAPTURED) else 0
        vt.check("captured", size > 4 * RATE * seconds, f"{size // 4} frames captured ({size // 4 / RATE:.1f} s)")
        vt.finish()
