#!/usr/bin/python3
# vm: devices=hda,usb,aloop power_save=1 hda_wav=yes mode=systemd timeout=600
"""A headless music box: Debian's own MPD (the host's mpd package, run by its packaged
mpd.service as its system user `mpd`, group audio) plays bit-perfect through the package's ALSA
plugin (`keepalived:CARD=Intel,DEV=0`) on the kernel's HDA driver (snd-hda-intel power_save=1),
while the package's system service (keepalived-audio, installed with dpkg and enabled with
`-d hw:CARD=Intel,DEV=0 -d hw:CARD=Audio,DEV=0`, the HDA card and the USB audio device) keeps
the cards awake between tracks. MPD's output asks for the file's
own format (auto_resample, auto_format and auto_channels off, no mixer). Its music: a 44.1 kHz
WAV and a 48 kHz FLAC, 16-bit stereo sweeps made by sox. One boot:

- while each track plays: the card's hw_params are the file's rate in S16_LE, the substream's
  owner is MPD, `mpc status` says playing, `keepalived status --json` lists MPD (pid, program)
  in `loans`;
- the 44.1 kHz track reached the codec sample for sample (the host finds the whole file as one
  run in QEMU's WAV: 69-box-mpd.host.py);
- after the 44.1 kHz track ends and after `mpc stop` in the 48 kHz one, keepalived holds the card
  again within 1.25 s of MPD's close (its 250 ms reopen grace and 1 s) (takeback_ms=), in the last track's rate, with no loan left;
  keepalived's close to MPD's open is release_ms=;
- while MPD plays, `aplay -D keepalived:…` fails with "busy" as `aplay -D hw:…` does, MPD keeps
  the card and its loan stays the only one;
- MPD killed with SIGKILL mid-track: keepalived holds the card again within 1.25 s;
- the USB audio device (snd-usb-audio, 48 kHz only in QEMU): `aplay -D keepalived:CARD=Audio,DEV=0`
  of a 48 kHz file holds it in the file's format (aplay the owner, no "busy"), and keepalived has
  it back within 1.25 s of aplay's exit, in that format; the HDA card stays MPD's or keepalived's;
- MPD plays three tracks as one queue, the first skipped half a second in (`mpc next`): 44.1 kHz,
  44.1 kHz, 48 kHz; MPD closes and reopens the card for the 48 kHz one and keepalived, waiting
  its grace, never takes it in between, nor does MPD log "busy";
  with `--on-active`/`--on-idle` and `--on-idle-after 3s` (a reload): the queue is one active
  period (`status` says active, by mpd, while it plays): the hook runs once as it starts, with
  the card and device, and once 3 s after MPD's close (its output in the journal), and
  `keepalived events` prints the same two changes; with `--power-on-wait 5s` and an on-active
  hook that takes 1.5 s (an amplifier's relay and its warm-up), MPD's open waits for it: the
  hook starts within 1 s of keepalived hearing MPD's open, keepalived plays on the card until
  the hook has ended (its stream's, not MPD's, until then), and MPD's stream starts on the card
  (the kernel's trigger time) after the hook's end, within 1.5 s of it (the rest of the release
  and MPD's own start on the emulated CPU); the codec never sleeps meanwhile (below);
- a probe (aplay opening `keepalived:` and closing it before any hw_params) leaves keepalived's
  remembered format alone: it comes back at 48 kHz, the last track's rate, not its clip's 44.1;
- two devices of one card (snd-aloop's Loopback, devices 0 and 1, both kept awake): a player
  through `keepalived:CARD=Loopback,DEV=0` gets device 0 while device 1's stream never closes;
- the service configured with `default` (dmix on the card, as the shipped options file says),
  then `sysdefault:` and `front:` names: each output knows it plays on the card's device 0 (its
  handle's, in `status --json`), and MPD through `keepalived:` gets the card in the file's own
  format each time, and keepalived has it back after `mpc stop`;
- the codec never powered down while keepalived was running (power_off_acct unchanged);
- `systemctl restart` in the middle of a 5 s power-on hold (an on-active hook of 4 s): MPD gets
  the card and plays (no "busy" in its log), the new keepalived has it back after `mpc stop`;
  the timings are printed as `restart_in_hold_ms=`;
- keepalived stopped: MPD plays through `keepalived:` as through `hw:` (the file's rate, MPD the
  owner);
- every open MPD logged got `type=HW`: the plugin hands the player the card's own PCM; MPD's log
  has no "busy".

The hand-overs are timed by a thread that polls /proc/asound/…/sub0/status every 10 ms (the
owner's thread → its process), each from the last poll that saw one holder to the first that saw
the next (at most a poll longer than the real gap), and printed as `release_ms=` and
`takeback_ms=` lines.

The guest runs beside another (it ran alone until scripts/test put the host's builds at the
idle scheduling policy). keepalived answers a release on its control socket's own thread, as soon
as its output on the device is closed, and nothing else it does (a reload, a rescan) delays
that; but the plugin's wait for the answer is a bound in the guest's own time, and the emulated
CPU is tens of times slower than a Raspberry Pi's. Beside another guest, on two host cores also
running the sanitizer suites and builds that SwiftPM ran ahead of the guests, one release took
262 ms inside the daemon (its output was recovering from an underrun of the starved guest),
QEMU's capture lost a third of the 44.1 kHz track (a44-bit-perfect), and a take-back took
1.35 s; with the builds at the idle policy the releases took 10-116 ms. The players here (MPD's
unit, the scenario's aplay) get `KEEPALIVED_RELEASE_TIMEOUT=1000`, as docs/players.md advises for
a slow machine; each release's time is still printed (release_ms=, and keepalived's own ms= in
its journal, which io/keepalived-journal.txt keeps whole).

The drivers are loaded by the rig's stage 2 before systemd starts and MPD is the host's (installed
by `scripts/setup --test`); the boot order of a box (udev loading the driver while units start) is
package-boot's and package-late-card's.
"""

import json
import os
import re
import shutil
import signal
import subprocess
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
MUSIC = "/var/lib/mpd/music"
MPD_LOG = "/var/log/mpd/mpd.log"
ROOT_ENV = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "KEEPALIVED_SOCKET")}
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


# -- who holds the card ----------------------------------------------------------------------------
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

    def seen_handover(self, frm, to, after):
        """``handover``, once this thread's own polls show it: the scenario's check may have seen
        the new holder between two of them (up to a second, then None)."""
        found = vt.wait_until(lambda: self.handover(frm, to, after), 1, 0.01)
        return found.value if found else None


names = {}


def name(h):
    return {None: "closed", "open": "opened"}.get(h) or names.get(h, f"pid {h}")


# -- keepalived --------------------------------------------------------------------------------
def status_json():
    r = vt.run([K, "status", "--json"], timeout=15, env=ROOT_ENV)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def loans():
    """The daemon's loans ([] when it lists none), or None when it does not answer."""
    s = status_json()
    return None if s is None else s.get("loans") or []


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


# ==== the box ========================================================================================
card_id = vt.read(f"/proc/asound/card{card}/id", "").strip()
vt.note(f"cards: {vt.one_line(vt.read('/proc/asound/cards', ''))}")
HW = f"hw:CARD={card_id},DEV=0"
PLUGIN_DEV = f"keepalived:CARD={card_id},DEV=0"
usb_id = vt.read(f"/proc/asound/card{usb}/id", "").strip()
USB_HW = f"hw:CARD={usb_id},DEV=0"
USB_STATUS = f"/proc/asound/card{usb}/pcm0p/sub0/status"
LOOP0, LOOP1 = "hw:CARD=Loopback,DEV=0", "hw:CARD=Loopback,DEV=1"
p = vt.codec_power(card)
if not vt.check("codec-power-counters", p is not None, f"/sys/class/sound/hwC{card}D0/power_*_acct: {p}"):
    vt.finish()

# -- the package: the daemon, its unit, the plugin and its configuration --------------------------
vt.install_package(timeout=180)
plugin = sh("sh", "-c", "dpkg -L keepalived-audio | grep -E 'libasound_module_pcm_keepalived.so$|alsa.conf.d/.*keepalived'").stdout.split()
# The plug-in, 50-keepalived.conf and its link, and the front door (60-keepalived-default.conf,
# shipped unlinked: this box's `default` stays the card's own).
if not vt.check("plugin-installed", len(plugin) == 4 and all(os.path.exists(x) for x in plugin), " ".join(plugin) or "no plugin in the package"):
    vt.finish()

# -- the music: sweeps, so every run of frames is the file's alone ---------------------------------
os.makedirs(f"{MUSIC}/box", exist_ok=True)
for track, (path, r, secs, synth) in TRACKS.items():
    res = sh("sox", "-R", "-D", "-n", "-r", str(r), "-b", "16", "-c", "2", "-e", "signed-integer",
             f"{MUSIC}/{path}", "synth", str(secs), *synth, "gain", "-9")
    if res.returncode != 0:
        vt.fail("music", f"sox {path}: {vt.one_line(res.stdout)}")
        vt.finish()
sh("chown", "-R", "mpd:audio", MUSIC)
vt.ok("music", ", ".join(f"{p} {r} Hz {s} s" for p, r, s, _ in TRACKS.values()))

# -- MPD, configured as on a box ----------------------------------------------------------------
with open("/etc/mpd.conf", "w") as f:
    f.write(f'''music_directory "{MUSIC}"
playlist_directory "/var/lib/mpd/playlists"
db_file "/var/lib/mpd/tag_cache"
log_file "{MPD_LOG}"
log_level "verbose"
user "mpd"
bind_to_address "localhost"
port "6600"
audio_output {{
    type "alsa"
    name "box"
    device "{PLUGIN_DEV}"
    auto_resample "no"
    auto_format "no"
    auto_channels "no"
    mixer_type "none"
    buffer_time "2000000"
}}
''')
# The emulated CPU is a slow machine: the plugin waits up to 1 s for keepalived (see above).
os.makedirs("/run/systemd/system/mpd.service.d", exist_ok=True)
with open("/run/systemd/system/mpd.service.d/release-timeout.conf", "w") as f:
    f.write("[Service]\nEnvironment=KEEPALIVED_RELEASE_TIMEOUT=1000\n")
sh("systemctl", "daemon-reload")
# Installed, never enabled (Debian enables neither unit); masked for the rest of this boot so that
# nothing but this scenario starts an MPD.
sh("systemctl", "mask", "--runtime", "mpd.socket")
sh("systemctl", "stop", "mpd.socket", "mpd.service")

# -- keepalived's service, ring-looping on the card ---------------------------------------------------
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="-d {HW} -d {USB_HW} -d {LOOP0} -d {LOOP1}"\n')
r = sh("systemctl", "enable", "--now", UNIT, timeout=90)
w = vt.wait_until(lambda: show(UNIT, "StatusText").startswith("playing") and vt.pcm_state(card) == "RUNNING"
                  and vt.pcm_state(usb) == "RUNNING", 30)
kpid = int(show(UNIT, "MainPID") or 0)
names[kpid] = f"keepalived {kpid}"
errors = [l for l in sh("journalctl", "-u", UNIT, "--no-pager", "-o", "cat").stdout.splitlines() if "error" in l]
if not vt.check("keepalived-playing", w and holder() == kpid,
                f"systemctl enable --now: exit {r.returncode}; {show(UNIT, 'StatusText')!r} after {w.seconds:.1f} s, "
                f"card held by {name(holder())} in {params()}" + (f"; the journal: {errors[-1]}" if errors else "")):
    vt.note(vt.one_line(sh("journalctl", "-u", UNIT, "--no-pager", "-o", "cat").stdout[-600:], 600))
    vt.finish()
time.sleep(0.3)  # the power-up accounting settles once the stream runs
power0 = vt.codec_power(card)
timeline = Timeline()
timeline.start()

pid, r, w = start_mpd()
if not vt.check("mpd-running", pid and w, f"systemctl start mpd: exit {r.returncode}, MainPID {pid}, mpc answers after {w.seconds:.1f} s"):
    vt.note(vt.one_line(sh("journalctl", "-u", "mpd", "--no-pager", "-o", "cat").stdout[-600:], 600))
    vt.finish()
proc = dict(l.split(":", 1) for l in vt.read(f"/proc/{pid}/status", "").splitlines() if ":" in l)
uid = sh("id", "-u", "mpd").stdout.strip()
vt.check("mpd-user", proc.get("Uid", "").split()[:1] == [uid] and "29" in proc.get("Groups", "").split() + proc.get("Gid", "").split()[:1],
         f"Uid {proc.get('Uid', '').split()}, Gid {proc.get('Gid', '').split()}, Groups {proc.get('Groups', '').split()} (mpd is {uid}, audio 29)")
r = mpc("-q", "update", "--wait")
listed = mpc("listall").stdout.split()
vt.check("mpd-database", sorted(listed) == sorted(t[0] for t in TRACKS.values()), f"mpc update: exit {r.returncode}; listall {listed}")


def mpd_plays(track, pid, started, label, repeating=True):
    """MPD holds the card in the track's own format, got it from keepalived, keepalived lists the
    loan, and MPD says it plays; returns the Wait for MPD's stream. MPD answers no command while
    it drains the end of its queue, which for a track queued once is all of it (its buffer holds
    the whole file): there `mpc status` answers once the track is over, so its "playing" is asked
    for last and required of a repeating track only."""
    want = str(TRACKS[track][1])
    w = vt.wait_until(lambda: holder() == pid and rate() == want and vt.pcm_state(card) == "RUNNING", 15, 0.02)
    seen = time.monotonic() - started
    hp = vt.hw_params(card)
    held = f"card held by {name(holder())} {seen:.2f} s after `mpc play`: {params()} (buffer {hp.get('buffer_size')}, period {hp.get('period_size')})"
    vt.check(f"{label}-own-format", w and hp.get("format") == "S16_LE" and hp.get("rate", "").split(" ")[0] == want and hp.get("channels") == "2",
             f"hw_params {hp.get('format')} {hp.get('rate', '').split(' ')[0]} Hz {hp.get('channels')} ch, the file {want} Hz S16_LE 2 ch")
    h = timeline.seen_handover(kpid, pid, started)
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


def taken_back(pid, label, rate_want, mpd_closed_after, bound=GRACE_BOUND):
    """After MPD closed the card: keepalived holds it again within `bound`, in rate_want, no loan."""
    w = vt.wait_until(lambda: holder() == kpid and rate() != "", 15, 0.02)
    h = timeline.seen_handover(pid, kpid, mpd_closed_after)
    if h:
        vt.note(f"takeback_ms={1000 * h[0]:.0f} {label}: MPD's last poll to keepalived's first ({h[1]})")
    vt.check(f"{label}-taken-back", w and h is not None and h[0] <= bound,
             f"card held by {name(holder())}: MPD's close to keepalived's open {1000 * h[0]:.0f} ms ({h[1]})" if h
             else f"card held by {name(holder())} after {w.seconds:.2f} s; no hand-over from MPD to keepalived seen")
    vt.check(f"{label}-last-format", rate() == str(rate_want) and vt.hw_params(card).get("format") == "S16_LE",
             f"keepalived plays {params()}; the last track was {rate_want} Hz S16_LE")
    ls = loans()
    vt.check(f"{label}-no-loan", ls == [], f"loans {json.dumps(ls)}")


# -- 1. the 44.1 kHz track, to its end -----------------------------------------------------------------
t = play("a44")
mpd_plays("a44", pid, t, "a44", repeating=False)
w = vt.wait_until(lambda: holder() != pid, TRACKS["a44"][2] + 15, 0.02)
closed = time.monotonic() - t
st = mpc_state()
vt.check("a44-ends", w and st == "stopped", f"MPD closed the card {closed:.1f} s after `mpc play` (the file is {TRACKS['a44'][2]} s); mpc {st}")
taken_back(pid, "a44-end", 44100, t)
# For the host (69-box-mpd.host.py): the file whose samples the codec must have received.
shutil.copy(f"{MUSIC}/{TRACKS['a44'][0]}", os.path.join(vt.IO, "box-a44.wav"))

# -- 2. the 48 kHz track, stopped midway -----------------------------------------------------------------
t = play("b48", repeat=True)
mpd_plays("b48", pid, t, "b48")
before_stop = mpc_state()
t_stop = time.monotonic()
mpc("-q", "stop")
vt.check("b48-stopped-midway", before_stop == "playing", f"mpc {before_stop} when `mpc stop` ran {t_stop - t:.1f} s after `mpc play` (the track repeats)")
taken_back(pid, "b48-stop", 48000, t_stop - 0.001)

# -- 2b. a probe: opened and closed with no hw_params; the remembered format stays -------------------------
def releases_for(program):
    return sum(1 for l in sh("journalctl", "-u", UNIT, "--no-pager", "-o", "cat").stdout.splitlines()
               if "released a card device for a player" in l and f"player={program} " in l)


before = releases_for("aplay")
t = time.monotonic()
r = vt.run(["aplay", "-q", "-D", PLUGIN_DEV, "/nonexistent/probe.wav"], timeout=30, env=PLAYER_ENV)
vt.note(f"probe: aplay -D {PLUGIN_DEV} /nonexistent/probe.wav: exit {r.returncode}: {vt.one_line(r.stdout, 160)}")
w = vt.wait_until(lambda: holder() == kpid and rate() != "" and loans() == [], 10, 0.02)
lent = releases_for("aplay") - before
vt.check("probe-keeps-format", w and lent == 1 and rate() == "48000", f"the probe's releases: {lent}; after it: card held by "
         f"{name(holder())} in {params()} {time.monotonic() - t:.2f} s later; the last track was 48000 Hz (keepalived's own clip: 44100)")

# -- 2c. two tracks of two rates as one queue: MPD's close and reopen between them stays MPD's ----------------
# With --on-active/--on-idle (--on-idle-after 3s): the queue is one active period, one hook each
# way, named mpd on the card; `keepalived events` and `status` say the same.
HOOK = "/usr/local/bin/vm-activity-hook"
with open(HOOK, "w") as f:
    # Its output goes to the journal (the service's /tmp is its own): one line per run, and on
    # active a second, 1.5 s later: an amplifier switched on and warmed up.
    f.write('#!/bin/sh\nread up _ < /proc/uptime\necho "HOOK $KEEPALIVED_EVENT $KEEPALIVED_OUTPUT $KEEPALIVED_PROGRAM $KEEPALIVED_CARD $KEEPALIVED_DEVICE $up"\n'
            '[ "$KEEPALIVED_EVENT" = active ] || exit 0\nsleep 1.5\nread up _ < /proc/uptime\necho "POWERED $up"\n')
os.chmod(HOOK, 0o755)
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="-d {HW} -d {USB_HW} -d {LOOP0} -d {LOOP1} --on-active {HOOK} --on-idle {HOOK} --on-idle-after 3s --power-on-wait 5s"\n')
r = sh("systemctl", "reload", UNIT, timeout=60)


def activity():
    o = next((o for o in (status_json() or {}).get("outputs", []) if o.get("device") == HW), {})
    return o.get("activity") or {}


def uptime():
    return float(vt.read("/proc/uptime", "0").split()[0])


def hook_lines(since):
    """The hook's runs whose own uptime stamp is `since` or later (journalctl's --since has whole
    seconds, and the reload's own idle, below, may run in the same second)."""
    r = sh("journalctl", "-u", UNIT, "--no-pager", "-o", "cat")
    lines = [l.split("line=", 1)[1].strip() for l in r.stdout.splitlines() if "hook output" in l and "line=HOOK" in l]
    return [l for l in lines if float(l.split()[-1]) >= since]


# The earlier tracks left the card's output active and silent: the reload's 3 s make it idle (its
# on-idle runs then, with the hooks just set), and the queue below starts from there.
w = vt.wait_until(lambda: activity().get("state") == "idle", 10, 0.2)
vt.check("activity-idle-before", r.returncode == 0 and w, f"systemctl reload: exit {r.returncode}; {HW}'s activity {activity()} after {w.seconds:.1f} s")
time.sleep(1)  # the reload's own on-idle, if any, is over
since = uptime()
events = subprocess.Popen([K, "events"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ROOT_ENV, text=True)
time.sleep(0.5)
mpc("-q", "clear")
mpc("-q", "repeat", "off")
# Three tracks, the first skipped: 44.1 kHz (skipped), 44.1 kHz, 48 kHz.
mpc("-q", "add", TRACKS["s44"][0])
mpc("-q", "add", TRACKS["a44"][0])
mpc("-q", "add", TRACKS["b48"][0])
t = time.monotonic()
mpc("-q", "play")
w1 = vt.wait_until(lambda: holder() == pid and rate() == "44100", 15, 0.02)
vt.wait_until(lambda: vt.pcm_state(card) == "RUNNING", 5, 0.01)
# MPD's stream's start on the card, on the guest's monotonic clock: the kernel's trigger time.
# alsa-lib asks the kernel for CLOCK_MONOTONIC timestamps (SNDRV_PCM_IOCTL_TTSTAMP), so it is
# time.monotonic()'s own; a trigger time that is not between `mpc play` and now is on another
# clock, and is moved by the status's tstamp (the same clock's now, or the last period's update:
# 0 before the first one).
read_at = time.monotonic()
pcm = vt.read(STATUS, "")
stamps = dict((k.strip(), v.strip()) for k, _, v in (l.partition(":") for l in pcm.splitlines()) if k.strip() in ("trigger_time", "tstamp"))
try:
    trigger, tstamp = float(stamps["trigger_time"]), float(stamps.get("tstamp", "0"))
    mpd_started = trigger if t <= trigger <= read_at else trigger - tstamp + read_at if tstamp > 0 else None
except (KeyError, ValueError):
    mpd_started = None
playing_activity = activity()
time.sleep(0.5)
skipped = mpc("-q", "next").returncode == 0
after_skip = vt.one_line(mpc("status").stdout, 160)
w2 = vt.wait_until(lambda: holder() == pid and rate() == "48000", TRACKS["a44"][2] + 15, 0.02)
w3 = vt.wait_until(lambda: holder() not in (pid, "open", None), TRACKS["b48"][2] + 15, 0.02)
mpd_done = uptime()
with timeline.lock:
    between = [list(x) for x in timeline.spans if x[2] >= t]
first = next((i for i, x in enumerate(between) if x[0] == pid), None)
last = max((i for i, x in enumerate(between) if x[0] == pid), default=None)
inside = between[first:last + 1] if first is not None and last is not None else []
path = " → ".join(f"{name(x[0])} {1000 * (x[2] - x[1]):.0f} ms" for x in inside)
vt.note(f"queue of two rates: {path[-600:]}")
vt.check("queue-stays-mpds", w1 and w2 and skipped and bool(inside) and all(x[0] in (pid, "open", None) for x in inside),
         f"44.1 kHz after {w1.seconds:.1f} s, skipped (mpc next: {skipped}; then {after_skip}), 48 kHz after {w2.seconds:.1f} s more; between MPD's first and last hold: "
         + (path[-400:] or "MPD never seen"))
vt.check("queue-no-busy", not busy_lines(), vt.one_line(" | ".join(busy_lines()), 300) or "MPD logged no busy")
taken_back(pid, "queue-end", 48000, t + w1.seconds + w2.seconds)
vt.check("activity-while-playing", playing_activity.get("state") == "active" and playing_activity.get("program") == "mpd",
         f"{HW}'s activity while the first track played: {playing_activity}")
w = vt.wait_until(lambda: len(hook_lines(since)) >= 2, 15, 0.3)
lines = hook_lines(since)
want = [f"active {HW} mpd {card} 0", f"idle {HW} mpd {card} 0"]
vt.check("hooks-once-each-way", w and [" ".join(l.split()[1:6]) for l in lines] == want,
         f"hook runs in the journal: {lines} (want {want})")
# --power-on-wait: the hook's start after keepalived heard MPD's open (its journal's monotonic
# stamp of the hold), the hook's end, MPD's stream's start.
journal = sh("journalctl", "-u", UNIT, "--no-pager", "-o", "short-monotonic").stdout.splitlines()
def stamp(l):
    m = re.match(r"\s*\[\s*([0-9.]+)\]", l)
    return float(m.group(1)) if m else None
held = [stamp(l) for l in journal if "a player waits while the power comes on" in l and (stamp(l) or 0) >= since]
powered = [float(l.split("line=POWERED", 1)[1].split()[0]) for l in journal if "line=POWERED" in l and float(l.split("line=POWERED", 1)[1].split()[0]) >= since]
hook_start = float(lines[0].split()[-1]) if lines else None
if held and powered and hook_start is not None and mpd_started is not None:
    to_hook, to_sound = hook_start - held[0], mpd_started - powered[0]
    with timeline.lock:
        kept = [x for x in timeline.spans if x[0] == kpid and x[1] <= hook_start and x[2] >= powered[0]]
    vt.note(f"power_on_ms= open_to_hook={1000 * to_hook:.0f} hook={1000 * (powered[0] - hook_start):.0f} hook_end_to_first_sample={1000 * to_sound:.0f}")
    # The orderings are the requirement (the hook starts after the open is held, the first sample
    # comes after the hook's end, the card held throughout); the upper bounds are --power-on-wait's
    # 5 s, the most a player is held (docs/usage.md), not the emulated CPU's speed (they were 1.0
    # and 1.5 s; CONTRIBUTING, "What a test may bound in time").
    vt.check("power-on-before-the-first-note", len(held) == 1 and len(powered) == 1 and 0 <= to_hook <= 5.0 and 0 < to_sound <= 5.0 and bool(kept),
             f"keepalived heard MPD's open at {held[0]:.3f} s, the hook ran {hook_start:.3f}-{powered[0]:.3f} s, MPD's stream started on "
             f"the card at {mpd_started:.3f} s: {1000 * to_hook:.0f} ms to the hook, {1000 * to_sound:.0f} ms from its end to the first sample "
             f"(holds: {len(held)}, hook ends: {len(powered)}); keepalived held the card through the hook: {bool(kept)}")
else:
    vt.fail("power-on-before-the-first-note", f"not all seen: the hold {held}, the hook's start {hook_start} and end {powered}, "
            f"MPD's trigger {mpd_started} ({vt.one_line(pcm, 200)})")
if len(lines) == 2:
    idle_at = float(lines[1].split()[-1])
    # --on-idle-after 3s from the loan's end, which keepalived's reopen of the card (seen here)
    # follows by its open's time; the hook's own start on the emulated CPU comes on top.
    vt.check("idle-after-the-silence", 2.0 <= idle_at - mpd_done <= 3.0 + 2.0,
             f"on-idle {idle_at - mpd_done:.2f} s after keepalived had the card back (--on-idle-after 3s)")
events.terminate()
out = events.communicate(timeout=10)[0]
seen = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
vt.check("events-each-way", [(e.get("event"), e.get("output"), e.get("program"), e.get("card")) for e in seen]
         == [("active", HW, "mpd", card), ("idle", HW, "mpd", card)], f"keepalived events printed: {vt.one_line(out, 400)}")
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="-d {HW} -d {USB_HW} -d {LOOP0} -d {LOOP1}"\n')
sh("systemctl", "reload", UNIT, timeout=60)

# -- 3. a second player while MPD plays, then MPD killed --------------------------------------------------
t = play("a44", repeat=True)
if mpd_plays("a44", pid, t, "again"):
    aplays = {}
    for dev in (HW, PLUGIN_DEV):
        t0 = time.monotonic()
        r = sh("aplay", "-q", "-D", dev, f"{MUSIC}/{TRACKS['a44'][0]}", timeout=30)
        aplays[dev] = (r.returncode, vt.one_line(r.stdout, 160), time.monotonic() - t0)
    still = holder() == pid
    for dev, (rc, out, secs) in aplays.items():
        vt.check(f"second-player-busy-{dev.split(':')[0]}", rc != 0 and "busy" in out.lower() and still,
                 f"aplay -D {dev}: exit {rc} after {secs:.2f} s: {out}; card still MPD's: {still}")
    ls = loans()
    vt.check("second-player-no-loan", ls is not None and [l.get("pid") for l in ls] == [pid],
             f"after the second player's release request: loans {json.dumps(ls)}")
    if holder() == pid and vt.pcm_state(card) == "RUNNING":
        t_kill = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        vt.note(f"killed MPD {pid} with SIGKILL {t_kill - t:.1f} s into the track")
        taken_back(pid, "kill", 44100, t_kill - 0.001)
    else:
        vt.fail("kill", f"the track ended before MPD could be killed mid-track ({time.monotonic() - t:.1f} s after `mpc play`; "
                f"mpc {mpc_state()}, card {name(holder())})")
vt.wait_until(lambda: mpd_pid() is None, 10)

# -- 4. the USB audio device, lent to aplay -----------------------------------------------------------------
USB_DEV = f"keepalived:CARD={usb_id},DEV=0"
usb_file = f"{MUSIC}/usb48.wav"
sh("sox", "-R", "-D", "-n", "-r", "48000", "-b", "16", "-c", "2", "-e", "signed-integer", usb_file,
   "synth", "3", "sine", "300-1200", "gain", "-9")
vt.check("usb-keepalived-holds", holder(USB_STATUS) == kpid and vt.pcm_state(usb) == "RUNNING",
         f"the USB device held by {name(holder(USB_STATUS))}, {vt.pcm_state(usb)}")
t = time.monotonic()
player = subprocess.Popen(["aplay", "-q", "-D", USB_DEV, usb_file], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PLAYER_ENV)
names[player.pid] = f"aplay {player.pid}"
w = vt.wait_until(lambda: holder(USB_STATUS) == player.pid and vt.hw_params(usb).get("rate", "").startswith("48000"), 10, 0.02)
hp = vt.hw_params(usb)
vt.check("usb-lent", w and hp.get("format") == "S16_LE" and hp.get("channels") == "2",
         f"{time.monotonic() - t:.2f} s after aplay -D {USB_DEV} started: held by {name(holder(USB_STATUS))}, "
         f"{hp.get('format')} {hp.get('rate', '').split(' ')[0]} Hz {hp.get('channels')} ch (the file: S16_LE 48000 Hz 2 ch)")
out, _ = player.communicate(timeout=30)
t_end = time.monotonic()
vt.check("usb-played", player.returncode == 0 and "busy" not in out.lower(), f"aplay exit {player.returncode}: {vt.one_line(out, 160) or 'no output'}")
w = vt.wait_until(lambda: holder(USB_STATUS) == kpid and vt.pcm_state(usb) == "RUNNING", 15, 0.02)
back = time.monotonic() - t_end
vt.note(f"usb_takeback_ms={1000 * back:.0f} (aplay's exit to keepalived running on the USB device, polled)")
hp = vt.hw_params(usb)
vt.check("usb-taken-back", w and back <= GRACE_BOUND and hp.get("rate", "").startswith("48000") and hp.get("format") == "S16_LE",
         f"held by {name(holder(USB_STATUS))} {back:.2f} s after aplay exited, {hp.get('format')} {hp.get('rate', '').split(' ')[0]} Hz")
vt.check("usb-hda-untouched", holder() == kpid, f"the HDA card meanwhile: {name(holder())}")

# -- 4b. two devices of one card: a player on one leaves the other kept awake -------------------------------
L0 = f"/proc/asound/card{loop}/pcm0p/sub0/status"
L1 = f"/proc/asound/card{loop}/pcm1p/sub0/status"


def loop_owner(status):
    return holder(status)


class Watch(threading.Thread):
    """Whether `status`'s owner ever changed from `who`, polled every 10 ms until `done`."""

    def __init__(self, status, who):
        super().__init__(daemon=True)
        self.status, self.who, self.seen, self.done = status, who, set(), threading.Event()

    def run(self):
        while not self.done.is_set():
            self.seen.add(holder(self.status))
            time.sleep(0.01)


w = vt.wait_until(lambda: holder(L0) == kpid and holder(L1) == kpid, 10, 0.05)
if vt.check("loop-kept", w, f"Loopback devices 0 and 1 held by {name(holder(L0))} and {name(holder(L1))}"):
    watch = Watch(L1, kpid)
    watch.start()
    LOOP_DEV = "keepalived:CARD=Loopback,DEV=0"
    t = time.monotonic()
    player = subprocess.Popen(["aplay", "-q", "-D", LOOP_DEV, usb_file], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PLAYER_ENV)
    names[player.pid] = f"aplay {player.pid}"
    # The loan and the outputs from one status, the first that lists this player's loan: the
    # loan lasts as long as the file plays (4 s), and each look under TCG starts a program (about
    # half a second of a busy guest), so a look taken after the wait may come after it ended
    # (seen once: "loans null; starting"). Lent or seen playing, either is the player's loan.
    seen = {}

    def lent_to_player():
        s = status_json() or {}
        if any(l.get("pid") == player.pid for l in s.get("loans") or []):
            seen["status"] = s
            return True
        return False
    got = vt.wait_until(lent_to_player, 10, 0.05)
    st = seen.get("status") or {}
    outs = {o.get("device"): o for o in st.get("outputs", [])}
    vt.check("loop-dev0-lent", got and outs.get(LOOP0, {}).get("state") == "paused" and outs.get(LOOP0, {}).get("reason") == "lent",
             f"{LOOP_DEV}: loans {json.dumps(st.get('loans'))}; {LOOP0}: {outs.get(LOOP0, {}).get('state')} ({outs.get(LOOP0, {}).get('reason')})")
    vt.check("loop-dev1-plays", outs.get(LOOP1, {}).get("state") == "playing" and outs.get(LOOP1, {}).get("hardware") == f"hw:CARD={loop},DEV=1",
             f"{LOOP1}: {outs.get(LOOP1, {}).get('state')} on {outs.get(LOOP1, {}).get('hardware')}")
    out, _ = player.communicate(timeout=30)
    back = vt.wait_until(lambda: holder(L0) == kpid, 10, 0.02)
    watch.done.set()
    watch.join()
    vt.check("loop-dev1-never-closed", watch.seen == {kpid}, f"device 1's substream while device 0 was lent: {sorted(name(x) for x in watch.seen)}")
    vt.check("loop-dev0-back", back and player.returncode == 0, f"aplay exit {player.returncode} ({vt.one_line(out, 120)}); device 0 back to {name(holder(L0))} after {back.seconds:.2f} s")

# -- 4c. outputs named as a box's configuration names them: matched by their handle's device ------------------
pid, r, w = start_mpd()
vt.check("mpd-restarted-names", pid and w, f"MainPID {pid}, mpc answers after {w.seconds:.1f} s")
for label, device in (("default", "default"), ("sysdefault", f"sysdefault:CARD={card_id}"), ("front", f"front:CARD={card_id},DEV=0")):
    with open(CONF, "w") as f:
        f.write(f'KEEPALIVED_OPTIONS="-d {device} -d {USB_HW} -d {LOOP0} -d {LOOP1}"\n')
    r = sh("systemctl", "reload", UNIT, timeout=60)
    want = f"hw:CARD={card},DEV=0"

    def on_card():
        o = next((o for o in (status_json() or {}).get("outputs", []) if o.get("device") == device), None)
        return o if o and o.get("state") == "playing" and o.get("hardware") == want and holder() == kpid else None

    w = vt.wait_until(on_card, 20, 0.1)
    o = w.value or next((o for o in (status_json() or {}).get("outputs", []) if o.get("device") == device), {})
    if not vt.check(f"{label}-knows-its-device", w, f"systemctl reload: exit {r.returncode}; {device}: {o.get('state')} on {o.get('hardware')} "
                    f"(want {want}), card held by {name(holder())} in {params()}"):
        continue
    t = play("b48", repeat=True)
    mpd_plays("b48", pid, t, label)
    t_stop = time.monotonic()
    mpc("-q", "stop")
    w = vt.wait_until(lambda: holder() == kpid, 15, 0.02)
    ls = loans()
    vt.check(f"{label}-taken-back", w and ls == [], f"after `mpc stop`: card held by {name(holder())} in {params()} "
             f"{time.monotonic() - t_stop:.2f} s later; loans {json.dumps(ls)}")
sh("systemctl", "stop", "mpd.service", timeout=60)

# -- the codec over all of it ---------------------------------------------------------------------------
power1 = vt.codec_power(card)
vt.check("codec-never-slept", power1[1] == power0[1],
         f"power_off_acct {power0[1]} -> {power1[1]} ms, power_on_acct {power0[0]} -> {power1[0]} ms over "
         f"{(power1[0] - power0[0]) / 1000:.0f} s of MPD and keepalived")

# -- keepalived's own account of each hand-over (its journal: how long the release and the
# take-back took inside the daemon, from the request to its reply and from the close seen to the
# reopen) --------------------------------------------------------------------------------------------------
journal = sh("journalctl", "-u", UNIT, "--no-pager", "-o", "short-monotonic").stdout.splitlines()
# The whole journal, for the host's results directory (io/): each hand-over's lines in order.
with open(os.path.join(vt.IO, "keepalived-journal.txt"), "w") as f:
    f.write("\n".join(journal) + "\n")
vt.note("keepalived's hand-overs: " + vt.one_line(" | ".join(
    l for l in journal if "card device" in l or "release" in l.lower())[-1500:], 1500))
said = [l for l in sh("journalctl", "-u", "mpd", "--no-pager", "-o", "short-monotonic").stdout.splitlines() if "keepalived" in l]
vt.note("what the plugin told MPD's stderr: " + (vt.one_line(" | ".join(said)[-800:], 800) if said else "nothing"))

# -- 4d. a restart in the middle of a power-on hold: MPD plays, no "busy" --------------------------------
# keepalived stops its outputs before it answers the held player and closes its control socket
# (DaemonRuntime.stop), so the player's open goes on to a free card; the new keepalived finds the
# card MPD's and takes it back after `mpc stop`.
SLOW_HOOK = "/usr/local/bin/vm-slow-hook"
with open(SLOW_HOOK, "w") as f:
    f.write('#!/bin/sh\n[ "$KEEPALIVED_EVENT" = active ] || exit 0\nsleep 4\n')
os.chmod(SLOW_HOOK, 0o755)
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="-d {HW} --on-active {SLOW_HOOK} --on-idle-after 1s --power-on-wait 5s"\n')
r = sh("systemctl", "reload", UNIT, timeout=60)
w = vt.wait_until(lambda: holder() == kpid and activity().get("state") in ("idle", None), 15, 0.2)
pid, _, up = start_mpd()
if vt.check("restart-hold-ready", r.returncode == 0 and w and pid and up,
            f"reload exit {r.returncode}; card held by {name(holder())}, activity {activity()}; MPD {pid}"):
    since = uptime()
    t = play("a44", repeat=True)

    def held_now():
        journal = sh("journalctl", "-u", UNIT, "--no-pager", "-o", "short-monotonic").stdout.splitlines()
        return [l for l in journal if "a player waits while the power comes on" in l and (stamp(l) or 0) >= since]

    held = vt.wait_until(held_now, 15, 0.1)
    # The restart in the background: `systemctl restart` returns once the new keepalived is up
    # (Type=notify), and MPD's open is to be seen while that goes on.
    t_restart = time.monotonic()
    restart = subprocess.Popen(["systemctl", "restart", UNIT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    got = vt.wait_until(lambda: holder() == pid and vt.pcm_state(card) == "RUNNING", 20, 0.02)
    t_mpd = time.monotonic() - t_restart
    out, _ = restart.communicate(timeout=90)
    restarted = time.monotonic() - t_restart
    r = subprocess.CompletedProcess(restart.args, restart.returncode, out)
    new_kpid = int(show(UNIT, "MainPID") or 0)
    names[new_kpid] = f"keepalived {new_kpid} (restarted)"
    plugin_said = [l for l in sh("journalctl", "-u", "mpd", "--no-pager", "-o", "cat").stdout.splitlines() if "keepalived" in l]
    vt.note(f"restart_in_hold_ms= play_to_hold_seen={1000 * (t_restart - t):.0f} "
            f"restart_took={1000 * restarted:.0f} restart_to_mpd_on_card={1000 * t_mpd:.0f}")
    vt.check("restart-in-hold-mpd-plays", held and r.returncode == 0 and got and mpc_state() == "playing" and not busy_lines(),
             f"the hold seen {held.seconds if held else None} s after `mpc play`; systemctl restart: exit {r.returncode} in {restarted:.1f} s; "
             f"MPD on the card {t_mpd:.2f} s after the restart began ({params()}), mpc {mpc_state()}; busy: {busy_lines()[-1:] or 'none'}; "
             f"the plug-in told MPD: {vt.one_line(' | '.join(plugin_said[-2:]), 240) or 'nothing'}")
    with open(os.path.join(vt.IO, "restart-in-hold-journal.txt"), "w") as f:
        f.write(sh("journalctl", "--no-pager", "-o", "short-monotonic", "-u", UNIT, "-u", "mpd").stdout)
    # The new keepalived found the card MPD's: the box's normal state, not a fault (issue 58,
    # item 17): no line of priority warning or worse from it, and status names the holder.
    # The service sees no other user's process (ProtectProc=invisible): MPD is named by the
    # thread that opened the card, which must be one of MPD's.
    out_hw = next((o for o in (status_json() or {}).get("outputs", []) if o.get("device") == HW), {})
    warned = sh("journalctl", "-u", UNIT, "--no-pager", "-o", "cat", "-p", "warning", f"_PID={new_kpid}").stdout.strip()
    held_by = [int(m.group(1)) for h in out_hw.get("heldBy") or []
               for m in [re.match(rf"thread (\d+) of a process hidden from keepalived on card {card}$", h)] if m]
    vt.check("restart-in-hold-no-warning",
             not warned and out_hw.get("reason") == "busy" and held_by and all(tgid(t) == pid for t in held_by),
             f"the new keepalived's lines at warning or worse: {vt.one_line(warned, 240) or 'none'}; {HW}: {out_hw.get('state')} "
             f"({out_hw.get('reason')}), held by {out_hw.get('heldBy')}")
    kpid = new_kpid
    mpc("-q", "stop")
    w = vt.wait_until(lambda: holder() == kpid, 20, 0.05)
    vt.check("restart-in-hold-taken-back", w, f"after `mpc stop`: card held by {name(holder())} ({w.seconds:.1f} s)")
sh("systemctl", "stop", "mpd.service", timeout=60)
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="-d {HW} -d {USB_HW} -d {LOOP0} -d {LOOP1}"\n')
sh("systemctl", "reload", UNIT, timeout=60)

# -- 5. no keepalived: the plugin is only a hw: ------------------------------------------------------------
sh("systemctl", "stop", UNIT, timeout=60)
w = vt.wait_until(lambda: holder() is None, 15)
vt.check("keepalived-stopped", w and show(UNIT, "ActiveState") == "inactive",
         f"{UNIT} {show(UNIT, 'ActiveState')}, card {name(holder())} {w.seconds:.2f} s after stop")
kpid = None
pid, r, w = start_mpd()
vt.check("mpd-restarted", pid and w, f"MainPID {pid}, mpc answers after {w.seconds:.1f} s")
t = play("b48", repeat=True)
w = vt.wait_until(lambda: holder() == pid and rate() == "48000" and vt.pcm_state(card) == "RUNNING", 15, 0.02)
seen = time.monotonic() - t
st = mpc_state()
vt.check("without-keepalived-plays", w and st == "playing" and vt.hw_params(card).get("format") == "S16_LE",
         f"through {PLUGIN_DEV} with no daemon: card held by {name(holder())} {seen:.2f} s after `mpc play`, {params()}, mpc {st}")
mpc("-q", "stop")
w = vt.wait_until(lambda: holder() is None, 10, 0.02)
vt.check("without-keepalived-closes", w, f"card {name(holder())} {w.seconds:.2f} s after `mpc stop`")
sh("systemctl", "stop", "mpd.service", timeout=60)

# -- MPD's own view ------------------------------------------------------------------------------------------
# What MPD got from the plugin is the card's own PCM (snd_pcm_type HW), as from `hw:`: nothing in between.
opened = [l.split("alsa_output: ", 1)[1].strip() for l in vt.read(MPD_LOG, "").splitlines() if "alsa_output: opened" in l]
vt.check("mpd-got-hw", len(opened) >= 4 and all(l.endswith("type=HW") for l in opened),
         f"{len(opened)} opens of {PLUGIN_DEV} in {MPD_LOG}: {sorted(set(opened))}")
busy = busy_lines()
vt.check("mpd-log-no-busy", not busy, f"{MPD_LOG}: {len(vt.read(MPD_LOG, '').splitlines())} lines, "
         + (vt.one_line(' | '.join(busy), 300) if busy else "none says busy"))
vt.note("mpd.log: " + vt.one_line(" | ".join(l for l in vt.read(MPD_LOG, "").splitlines() if "alsa" in l.lower() or "output" in l.lower())[-1200:], 1200))
timeline.done.set()
with timeline.lock:
    vt.note("card: " + ", ".join(f"{name(s[0])} {s[2] - s[1]:.2f} s" for s in timeline.spans)[-1500:])
vt.finish()
