"""The music box of 69-box-mpd: Debian's MPD through the package's plug-in, beside the package's
system service, in one boot. This module is the box (its cards, who holds them, MPD, the
daemon's status) and the two checks every part makes of a hand-over; each part is a module of
its own, named for what it proves, run in order by the scenario on one `Box`:

- `handovers`: MPD gets the card in each file's own format and gives it back (end, stop, kill),
  a probe leaves the remembered format alone, a second player gets "busy";
- `power`: a queue of two rates is one active period (hooks, `--power-on-wait`, events);
- `devices`: a USB device lent to aplay, two devices of one card, outputs named by ALSA names;
- `carried`: with `--carry`, a queue of two rates carried on keepalived's running stream;
- `restart`: a restart inside a power-on hold leaves MPD playing, with no warning;
- `plain`: with no daemon the plug-in is only a `hw:`, and MPD's own log.
"""

import json
import os
import re
import threading
import time

import vmtest as vt

card = int(os.environ.get("VM_CARD_HDA", "0"))
usb = int(os.environ.get("VM_CARD_USB", "1"))
loop = int(os.environ.get("VM_CARD_ALOOP", "2"))
UNIT = "keepalived-audio"
K = "/usr/bin/keepalived"
CONF = "/etc/keepalived-audio/keepalived-audio.conf"
STATUS = f"/proc/asound/card{card}/pcm0p/sub0/status"
USB_STATUS = f"/proc/asound/card{usb}/pcm0p/sub0/status"
L0 = f"/proc/asound/card{loop}/pcm0p/sub0/status"
L1 = f"/proc/asound/card{loop}/pcm1p/sub0/status"
LOOP0, LOOP1 = "hw:CARD=Loopback,DEV=0", "hw:CARD=Loopback,DEV=1"
MUSIC = "/var/lib/mpd/music"
MPD_LOG = "/var/log/mpd/mpd.log"
ROOT_ENV = vt.ROOT_ENV
# The scenario's own players (aplay) wait as MPD does (below): the emulated CPU is a slow machine.
PLAYER_ENV = dict(ROOT_ENV, KEEPALIVED_RELEASE_TIMEOUT="1000")
# name -> (file, rate, seconds, sox's synth for the two channels: sweeps, so no run of frames
# repeats, at -9 dBFS: far above keepalived's -1 LSB, far below clipping)
TRACKS = {
    "a44": ("box/a44.wav", 44100, 4, ["sine", "220-1760", "sine", "330-2640"]),
    "b48": ("box/b48.flac", 48000, 5, ["sine", "440-3520", "sine", "550-110"]),
    # The queue's first track, skipped. Long, so the skip lands in it: MPD's player runs up to
    # its output's 2 s buffer and 64 chunks (1.5 s) ahead of the sound, and its queue moves on
    # when the player, not the sound, passes a track's end. A 3 s track was behind the player by
    # the stream's start, so `mpc next` skipped the second; on a loaded guest (ci43) MPD played
    # both 44.1 kHz tracks whole and stopped: the skip had come after the player passed the
    # second's end too.
    "s44": ("box/s44.wav", 44100, 20, ["sine", "660-220", "sine", "880-330"]),
    # Played carried (--carry) only: its own sweep, so its run in QEMU's capture is its play's.
    "c44": ("box/c44.wav", 44100, 4, ["sine", "300-3000", "sine", "3000-300"]),
}
BOUND = 1.0  # s from keepalived's close to MPD's open
# From a player's close to keepalived's open: keepalived first waits its 250 ms reopen grace
# (LoanStateMachine.reopenGrace: MPD closes and reopens the card between tracks of different
# formats) unless the player's process is gone (its pidfd; MPD's threads take a few hundred ms
# to exit after a SIGKILL on the emulated CPU, aplay exits just after its close).
GRACE_BOUND = BOUND + 0.25


def sh(*argv, timeout=60):
    return vt.run(list(argv), timeout=timeout)


def show(unit, prop):
    return sh("systemctl", "show", "-p", prop, "--value", unit).stdout.strip()


def uptime():
    return float(vt.read("/proc/uptime", "0").split()[0])


def stamp(line):
    """The guest's monotonic time of a `journalctl -o short-monotonic` line, or None."""
    m = re.match(r"\s*\[\s*([0-9.]+)\]", line)
    return float(m.group(1)) if m else None


def journal(*units, form="short-monotonic"):
    argv = ["journalctl", "--no-pager", "-o", form] + [a for u in units or (UNIT,) for a in ("-u", u)]
    return sh(*argv).stdout.splitlines()


def set_options(options):
    """The service's options file, then a reload (its exit code)."""
    with open(CONF, "w") as f:
        f.write(f'KEEPALIVED_OPTIONS="{options}"\n')
    return sh("systemctl", "reload", UNIT, timeout=60).returncode


# -- who holds a card ----------------------------------------------------------------------------
_tgids = {}


def tgid(tid):
    if tid not in _tgids:
        m = re.search(r"^Tgid:\s*(\d+)", vt.read(f"/proc/{tid}/status", ""), re.M)
        if not m:
            return tid
        _tgids[tid] = int(m.group(1))
    return _tgids[tid]


def holder(status=STATUS):
    """None when the substream is closed, "open" while it has no hw_params yet, else the process
    (thread group) of the thread that opened it."""
    text = vt.read(status, "closed")
    if text.strip() == "closed":
        return None
    m = re.search(r"owner_pid\s*:\s*(\d+)", text)
    return tgid(int(m.group(1))) if m else "open"


def rate():
    return vt.hw_params(card).get("rate", "").split(" ")[0]


def params():
    hp = vt.hw_params(card)
    return f"{hp.get('format')} {hp.get('rate', '').split(' ')[0]} Hz {hp.get('channels')} ch" if hp else "closed"


names = {}


def name(h):
    return {None: "closed", "open": "opened"}.get(h) or names.get(h, f"pid {h}")


class Timeline(threading.Thread):
    """Who held the card when: [holder, first seen, last seen] spans, polled every 10 ms."""

    def __init__(self):
        super().__init__(daemon=True)
        self.spans = []
        self.lock = threading.Lock()
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            h, t = holder(), time.monotonic()
            with self.lock:
                if self.spans and self.spans[-1][0] == h:
                    self.spans[-1][2] = t
                else:
                    self.spans.append([h, t, t])
            time.sleep(0.01)

    def handover(self, frm, to, after):
        """(seconds, path) from the last poll that saw `frm` to the first that saw `to`, for the
        first span of `to` that starts after `after` and follows a span of `frm`; None if none."""
        with self.lock:
            spans = [list(s) for s in self.spans]
        for i, (h, t1, _) in enumerate(spans):
            if h != to or t1 <= after:
                continue
            prev = [j for j in range(i) if spans[j][0] == frm]
            if prev:
                j = prev[-1]
                path = " → ".join(f"{name(s[0])} {1000 * (s[2] - s[1]):.0f} ms" for s in spans[j + 1:i])
                return t1 - spans[j][2], path or "directly"
        return None

    def between(self, after):
        """The spans that lasted until `after` or later, copied."""
        with self.lock:
            return [list(x) for x in self.spans if x[2] >= after]

    def seen_handover(self, frm, to, after):
        """``handover``, once this thread's own polls show it: the scenario's check may have seen
        the new holder between two of them (up to a second, then None)."""
        found = vt.wait_until(lambda: self.handover(frm, to, after), 1, 0.01)
        return found.value if found else None


# -- keepalived --------------------------------------------------------------------------------
def status_json():
    return vt.keepalived_status(K, env=ROOT_ENV)


def loans():
    """The daemon's loans ([] when it lists none), or None when it does not answer."""
    s = status_json()
    return None if s is None else s.get("loans") or []


def output(device):
    """`device`'s output in `status --json` ({} when none)."""
    return next((o for o in (status_json() or {}).get("outputs", []) if o.get("device") == device), {})


# -- MPD -----------------------------------------------------------------------------------------
def mpc(*args):
    return sh("mpc", *args, timeout=30)


def mpc_state():
    r = mpc("status")
    m = re.search(r"^\[(\w+)\]", r.stdout, re.M)
    return m.group(1) if m else "stopped" if r.returncode == 0 else f"unknown (mpc status: exit {r.returncode}: {vt.one_line(r.stdout, 100)})"


def mpd_pid():
    p = show("mpd.service", "MainPID")
    return int(p) if p.isdigit() and int(p) else None


def busy_lines():
    return [l for l in vt.read(MPD_LOG, "").splitlines() if "busy" in l.lower()]


def start_mpd():
    sh("systemctl", "reset-failed", "mpd.service")
    r = sh("systemctl", "start", "mpd.service", timeout=120)
    pid = mpd_pid()
    if pid:
        names[pid] = f"mpd {pid}"
    w = vt.wait_until(lambda: mpc("status").returncode == 0, 30, 0.2)
    return pid, r, w


def play(track, repeat=False):
    """Queues `track` alone and plays it (over and over with `repeat`); returns the time just
    before `mpc play`. MPD answers no command while it drains its outputs at the end of the queue
    (here most of a short track: `mpc status` took 3.5 s), so a track that must still be playing
    when the scenario acts on it repeats."""
    mpc("-q", "clear")
    mpc("-q", "repeat", "on" if repeat else "off")
    mpc("-q", "add", TRACKS[track][0])
    t = time.monotonic()
    mpc("-q", "play")
    return t


class Box:
    """What the parts share: the cards' names, the daemon's and MPD's processes (each part may
    restart them), the timeline of the HDA card's holders."""

    def __init__(self):
        self.card_id = vt.read(f"/proc/asound/card{card}/id", "").strip()
        self.usb_id = vt.read(f"/proc/asound/card{usb}/id", "").strip()
        self.HW = f"hw:CARD={self.card_id},DEV=0"
        self.PLUGIN_DEV = f"keepalived:CARD={self.card_id},DEV=0"
        self.USB_HW = f"hw:CARD={self.usb_id},DEV=0"
        # The service's outputs between the parts: both cards and both Loopback devices, each
        # player handed the card (--no-carry: the hand-over these parts time and check; the
        # carried part says --carry).
        self.DEVICES = f"-d {self.HW} -d {self.USB_HW} -d {LOOP0} -d {LOOP1}"
        self.OUTPUTS = f"{self.DEVICES} --no-carry"
        self.kpid = None
        self.pid = None
        self.timeline = Timeline()

    def activity(self):
        return output(self.HW).get("activity") or {}

    def mpd_plays(self, track, started, label, repeating=True):
        """MPD holds the card in the track's own format, got it from keepalived, keepalived lists
        the loan, and MPD says it plays; returns the Wait for MPD's stream. MPD answers no
        command while it drains the end of its queue, which for a track queued once is all of it
        (its buffer holds the whole file): there `mpc status` answers once the track is over, so
        its "playing" is asked for last and required of a repeating track only."""
        pid = self.pid
        want = str(TRACKS[track][1])
        w = vt.wait_until(lambda: holder() == pid and rate() == want and vt.pcm_state(card) == "RUNNING", 15, 0.02)
        seen = time.monotonic() - started
        hp = vt.hw_params(card)
        held = f"card held by {name(holder())} {seen:.2f} s after `mpc play`: {params()} (buffer {hp.get('buffer_size')}, period {hp.get('period_size')})"
        vt.check(f"{label}-own-format", w and hp.get("format") == "S16_LE" and hp.get("rate", "").split(" ")[0] == want and hp.get("channels") == "2",
                 f"hw_params {hp.get('format')} {hp.get('rate', '').split(' ')[0]} Hz {hp.get('channels')} ch, the file {want} Hz S16_LE 2 ch")
        h = self.timeline.seen_handover(self.kpid, pid, started)
        if h:
            vt.note(f"release_ms={1000 * h[0]:.0f} {label}: keepalived's last poll to MPD's first ({h[1]})")
        vt.check(f"{label}-released", h is not None and h[0] <= BOUND,
                 f"keepalived's close to MPD's open: {1000 * h[0]:.0f} ms ({h[1]})" if h else "no hand-over from keepalived to MPD seen")
        # The loan's format comes from the card's hw_params once the player set them.
        ls = vt.wait_until(lambda: (x := loans()) and x[0].get("state") == "playing" and x[0].get("rate") and x, 15).value or loans()
        mine = [l for l in ls or [] if l.get("pid") == pid]
        vt.check(f"{label}-loan", ls is not None and len(ls) == 1 and len(mine) == 1 and mine[0].get("program") == "mpd"
                 and mine[0].get("state") == "playing" and mine[0].get("card") == card and mine[0].get("device") == 0
                 and mine[0].get("rate") == int(want) and mine[0].get("format") == "S16_LE" and mine[0].get("channels") == 2,
                 f"loans {json.dumps(ls)}")
        st = mpc_state()
        vt.check(f"{label}-plays", w and (st == "playing" or not repeating),
                 f"{held}; then mpc {st}" + ("" if repeating or st == "playing" else " (queued once: mpc answered after MPD drained it)"))
        return w

    def taken_back(self, label, rate_want, mpd_closed_after, bound=GRACE_BOUND):
        """After MPD closed the card: keepalived holds it again within `bound`, in rate_want, no loan."""
        kpid = self.kpid
        w = vt.wait_until(lambda: holder() == kpid and rate() != "", 15, 0.02)
        h = self.timeline.seen_handover(self.pid, kpid, mpd_closed_after)
        if h:
            vt.note(f"takeback_ms={1000 * h[0]:.0f} {label}: MPD's last poll to keepalived's first ({h[1]})")
        vt.check(f"{label}-taken-back", w and h is not None and h[0] <= bound,
                 f"card held by {name(holder())}: MPD's close to keepalived's open {1000 * h[0]:.0f} ms ({h[1]})" if h
                 else f"card held by {name(holder())} after {w.seconds:.2f} s; no hand-over from MPD to keepalived seen")
        vt.check(f"{label}-last-format", rate() == str(rate_want) and vt.hw_params(card).get("format") == "S16_LE",
                 f"keepalived plays {params()}; the last track was {rate_want} Hz S16_LE")
        ls = loans()
        vt.check(f"{label}-no-loan", ls == [], f"loans {json.dumps(ls)}")
