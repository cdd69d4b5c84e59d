#!/usr/bin/python3
# vm: devices=hda timeout=900
"""--cec on the kernel's own CEC framework: keepalived (`run -d hw:0,0 --cec /dev/cec2`) on an
emulated HDMI-CEC bus of Debian's `vivid` driver (CONFIG_VIDEO_VIVID_CEC: one HDMI input, the TV
at 0.0.0.0 on /dev/cec0, and two HDMI outputs on the same bus, /dev/cec1 at 1.0.0.0 and
/dev/cec2 at 2.0.0.0). v4l-utils' `cec-ctl --tv` and `cec-follower` play the TV on cec0,
`cec-ctl --audio` and `cec-follower` the audio system (logical address 5) on cec1; keepalived
is a Playback device on cec2, and `cec-ctl --monitor-all` on cec0 records the bus
($VM_IO/cec-monitor.txt). A player is `aplay -D keepalived:CARD=0` (the plug-in from the package
scripts/package built of this tree, installed in the guest's overlay) of a 1.5 s WAV. One boot:

- keepalived starts before the adapter exists (`modprobe vivid` comes after): `status` says it
  waits, its `keepalive-cec` thread asleep (at most one context switch in 5 s: /dev is watched
  with inotify, not polled), and once the module is loaded it claims a Playback logical address
  (4, 8 or 11) at 2.0.0.0 within 15 s;
- at start and on a reload (SIGHUP) while nothing plays, keepalived sends nothing but the
  kernel's own claim (its polls and Report Physical Address);
- asked by the TV, keepalived's address reports power status on (keepalived's answer), its OSD
  name `keepalived` (the kernel's), and Feature Abort for Give Device Vendor ID (the kernel's: no
  vendor id) and for User Control Pressed (keepalived's: a follower refuses what it does not do);
- the audio system put in standby (the TV's Standby to 5), the player makes the box active:
  Give Device Power Status to 5 first, then System Audio Mode Request (2.0.0.0) from keepalived
  to 5 within 10 s, no Image View On nor Active Source; the audio system's follower answers (Set
  System Audio Mode on) but stays in standby (Debian 12's follower), so keepalived asks its power
  status again and sends User Control Pressed [Power On Function], which `status --json` shows
  acknowledged;
- 3 s after the player's end (--on-idle-after 3s), with --cec-standby: Standby to 5 only;
- the TV put in standby too, the options file gains --cec-wake-tv, a reload sends nothing; the
  next player: System Audio Mode Request to 5, Image View On to 0 and Active Source broadcast;
  idle: Standby to 5 and 0;
- the TV on and on another source (Image View On and Active Source 1.0.0.0 from cec1) while a 6 s
  track plays: keepalived wakes only the audio system (no Image View On to a TV that is on),
  answers Request Active Source while it is the source, stops answering once cec1 says Active
  Source again, and at idle sends no Standby to anyone (the `--monitor-all` record);
- the user's broadcast Standby during an active period: nothing woken again, no Standby at idle;
- `cec-ctl -d2 --clear` (another program gives keepalived's address up): keepalived says so once
  and claims a Playback address again within 15 s;
- with --power-on-wait 5s --power-on-settle 1s (no --on-active) the player's open is held until
  the receiver's wake is confirmed (here by the power-on key), then 1 s: the wake and the key
  are in keepalived's log before the open goes on;
- a Kodi-like program takes the adapter in the middle of an active period (as libcec: exclusive
  follower with passthrough, keepalived's configuration cleared, `cec-ctl --playback -o Kodi`):
  keepalived says so once and `status` shows it left alone, nothing is announced from a Playback
  address afterwards and no Standby at idle (the monitor's record of that period is in the
  result); that program gone and its configuration left, the TV's Give Device Power Status to
  its address gets the kernel's Feature Abort (keepalived follows nothing it does not own), and
  cec-compliance's summary against that address and, once keepalived claims again, against
  keepalived's own is noted;
- HDMI unplugged (the TV input's EDID cleared: no physical address) keepalived waits for a
  logical address; a player then (--cec-wake-tv) sends Image View On from Unregistered (15 to 0),
  as for a TV in standby that pulls hotplug low: the kernel transmits it from the unconfigured
  adapter (vivid has the outputs off the bus then, so nobody acknowledges it); plugged back with another address (`v4l2-ctl --set-edid pa=1.3.0.0`: vivid's
  second output is then 1.2.0.0) the kernel's state change has it ready again at 1.2.0.0
  within 15 s, without a message;
- the adapter unplugged (vivid unbound from its platform device; ENODEV): keepalived says it
  waits for the adapter and keeps playing; bound again, it is back on the bus within 15 s,
  still without a message;
- no audio system on the bus (its logical address cleared), two active periods: `status` shows
  the System Audio Mode Request not acknowledged, the log says so once, at notice, and nothing
  is put in standby at idle (only an acknowledged wake counts);
- an audio system with no follower (the kernel then answers Feature Abort for it): keepalived
  logs the refusal of its System Audio Mode Request at notice, and `status` does not show it
  acknowledged;
- keepalived restarted on an adapter another program configured (`cec-ctl -d2 --playback -o
  Kodi`): left alone without --cec-take-over (`status` and one notice say so), and no follower
  (the TV's Give Device Power Status to that address gets the kernel's Feature Abort); a reload naming
  another adapter (/dev/cec9) and adding --cec-take-over leaves Kodi's configuration on cec2 as it
  is; back on cec2, left alone again; once that program clears it, keepalived claims its own
  address within 15 s.

Every wait has a deadline; the monitor's record and keepalived's log are in $VM_IO.
"""

import glob
import os
import re
import shutil
import signal
import struct
import subprocess
import time
import wave

import vmtest as vt

K = os.environ["KEEPALIVED"]
REPO = os.environ["VM_REPO"]
IO = os.environ["VM_IO"]
SOCKET = "/run/keepalived-cec/control.sock"
CONF = "/tmp/keepalived-cec.conf"
MONITOR = os.path.join(IO, "cec-monitor.txt")
LOG = os.path.join(IO, "keepalived.log")
KEPT = "/dev/cec2"
ANNOUNCEMENTS = ("SYSTEM_AUDIO_MODE_REQUEST", "IMAGE_VIEW_ON", "ACTIVE_SOURCE", "STANDBY")
# What keepalived asks before and after a wake, and the receiver's power-on key.
QUESTIONS = ("GIVE_DEVICE_POWER_STATUS", "USER_CONTROL_PRESSED", "USER_CONTROL_RELEASED")
# vivid: one HDMI input (2 bits per input, 3 = HDMI), two HDMI outputs (1 bit each), all on one bus.
VIVID = ["vivid", "n_devs=1", "num_inputs=1", "input_types=0x3", "num_outputs=2", "output_types=0x3"]
PLAYER_ENV = dict(os.environ, KEEPALIVED_SOCKET=SOCKET, KEEPALIVED_RELEASE_TIMEOUT="1000")


def status():
    return vt.keepalived_status(K, SOCKET) or {}


def cec():
    return status().get("cec") or {}


def bus():
    """The monitor's messages so far: (initiator, destination, opcode name, line)."""
    found = []
    for line in vt.read(MONITOR, "").splitlines():
        m = re.search(r"\((\d+) to (\d+)\): ([A-Z_]+)", line)
        if m:
            found.append((int(m.group(1)), int(m.group(2)), m.group(3), line.strip()))
    return found


def keepalived_said(since, own):
    """What keepalived's logical address announced after the first `since` monitor lines."""
    return [(d, op) for i, d, op, _ in bus()[since:] if i == own and op in ANNOUNCEMENTS]


def write_conf(extra=""):
    with open(CONF, "w") as f:
        f.write(f'KEEPALIVED_OPTIONS="--cec {KEPT} --cec-standby --on-idle-after 3s {extra}"\n')


def make_wav(path, seconds=1.5, rate=44100):
    with wave.open(path, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(rate)
        frame = struct.pack("<hh", 300, 300)
        w.writeframes(frame * int(seconds * rate))


def play(wav):
    r = vt.run(["aplay", "-q", "-D", "keepalived:CARD=0", wav], timeout=30, env=PLAYER_ENV)
    vt.check("aplay-through-keepalived", r.returncode == 0, vt.one_line(r.stdout) or "played")


helpers = []


def start_bus(load):
    """Loads vivid (or binds it again: `load`), starts the monitor, the TV and the audio system;
    True once all are up."""
    r = vt.run(load)
    w = vt.wait_until(lambda: all(os.path.exists(f"/dev/cec{n}") for n in range(3)), 10)
    if not vt.check("vivid-cec-adapters", r.returncode == 0 and w, f"{' '.join(load)}: {vt.one_line(r.stdout)} /dev/cec0-2 after {w.seconds:.1f} s"):
        return False
    monitor = open(MONITOR, "a")
    helpers.append(subprocess.Popen(["stdbuf", "-oL", "cec-ctl", "-d", "/dev/cec0", "--monitor-all", "-s"], stdout=monitor, stderr=subprocess.STDOUT))
    time.sleep(0.5)
    tv = vt.run(["cec-ctl", "-d", "/dev/cec0", "--tv", "-o", "TV", "-s"])
    audio = vt.run(["cec-ctl", "-d", "/dev/cec1", "--audio", "-o", "Receiver", "-s"])
    for n in (0, 1):
        out = open(os.path.join(IO, f"cec-follower-{n}.txt"), "a")
        helpers.append(subprocess.Popen(["stdbuf", "-oL", "cec-follower", "-d", f"/dev/cec{n}", "-m"], stdout=out, stderr=subprocess.STDOUT))
    return vt.check("tv-and-audio-system", tv.returncode == 0 and audio.returncode == 0,
                    f"cec-ctl --tv: {tv.returncode}, --audio: {audio.returncode} {vt.one_line(audio.stdout[-200:])}")


def stop_bus():
    for p in helpers:
        p.terminate()
    for p in helpers:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
    helpers.clear()


# -- the plug-in, from the package scripts/package built of this tree (dist/; compiling it in the
# guest took 10-25 s of the emulated CPU) --------------------------------------------------------
arch = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE, text=True).stdout.strip()
debs = sorted(glob.glob(os.path.join(REPO, "dist", f"keepalived-audio_*_{arch}.deb")), key=os.path.getmtime)
r = vt.run(["dpkg-deb", "-x", debs[-1], "/tmp/keepalived-deb"], timeout=60) if debs else None
plugin = f"/tmp/keepalived-deb/usr/lib/{os.uname().machine}-linux-gnu/alsa-lib/libasound_module_pcm_keepalived.so"
if vt.check("plugin-from-package", r is not None and r.returncode == 0 and os.path.exists(plugin),
            f"{debs[-1] if debs else 'no dist/*.deb: run scripts/package first'}: {plugin}"):
    plugin_dir = os.path.dirname(plugin.replace("/tmp/keepalived-deb", ""))
    os.makedirs(plugin_dir, exist_ok=True)
    shutil.copy(plugin, plugin_dir)
    os.makedirs("/etc/alsa/conf.d", exist_ok=True)
    shutil.copy(os.path.join(REPO, "packaging/alsa/50-keepalived.conf"), "/etc/alsa/conf.d/")
else:
    vt.finish()
wav = "/tmp/cec-track.wav"
make_wav(wav)

# -- keepalived first, the adapter later ------------------------------------------------------
write_conf()
os.makedirs(os.path.dirname(SOCKET), exist_ok=True)
log = open(LOG, "w")
daemon = subprocess.Popen([K, "run", "-d", "hw:0,0", "--socket", SOCKET, "--config", CONF, "-v"], stdout=log, stderr=subprocess.STDOUT)
w = vt.wait_until(lambda: cec().get("state") == "waiting for the adapter", 20, 0.2)
vt.check("waits-for-missing-adapter", w and daemon.poll() is None, f"status after {w.seconds:.1f} s: {cec()}")


def cec_thread_switches():
    for task in os.listdir(f"/proc/{daemon.pid}/task"):
        if vt.read(f"/proc/{daemon.pid}/task/{task}/comm", "").strip() == "keepalive-cec":
            text = vt.read(f"/proc/{daemon.pid}/task/{task}/status", "")
            return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("voluntary_ctxt_switches"))
    return None


# Waiting costs no wakeups: the node's directory is watched (inotify), not polled.
before = cec_thread_switches()
time.sleep(5)
after = cec_thread_switches()
vt.check("waits-asleep", before is not None and after is not None and after - before <= 1,
         f"the keepalive-cec thread switched {None if before is None or after is None else after - before} times in 5 s while waiting")

if not start_bus(["modprobe"] + VIVID):
    daemon.kill()
    vt.finish()
w = vt.wait_until(lambda: cec().get("state") == "ready", 15, 0.2)
report = cec()
own = report.get("logicalAddress")
vt.check("claims-playback-address", w and own in (4, 8, 11) and report.get("physicalAddress") == "2.0.0.0",
         f"after {w.seconds:.1f} s: {report}")
if own is None:
    daemon.kill()
    stop_bus()
    vt.finish()

# -- nothing at start, nothing at a reload ----------------------------------------------------
time.sleep(2)
claim = [line for i, _, _, line in bus() if i == own]
vt.check("silent-at-start", not keepalived_said(0, own), f"keepalived's own lines (the kernel's claim): {claim[:4]}")
mark = len(bus())
daemon.send_signal(signal.SIGHUP)
w = vt.wait_until(lambda: "reloaded" in vt.read(LOG, ""), 10, 0.2)
time.sleep(2)
vt.check("silent-at-reload", w and not keepalived_said(mark, own), f"reloaded after {w.seconds:.1f} s; announced: {keepalived_said(mark, own)}")

# -- the follower's answers: the kernel's (OSD name, vendor id) and keepalived's own ---------------
mark = len(bus())
asked = {}
for what in ("--give-device-power-status", "--give-osd-name", "--give-device-vendor-id", "--user-control-pressed"):
    argv = ["cec-ctl", "-d", "/dev/cec0", "-s", "--to", str(own), what] + (["ui-cmd=play"] if what == "--user-control-pressed" else [])
    asked[what] = vt.run(argv, timeout=20).stdout
time.sleep(1)
answers = [(op, line) for i, d, op, line in bus()[mark:] if i == own and d == 0]
vt.check("answers-power-status", "pwr-state: on" in asked["--give-device-power-status"], vt.one_line(asked["--give-device-power-status"][-200:]))
vt.check("answers-osd-name", "keepalived" in asked["--give-osd-name"], vt.one_line(asked["--give-osd-name"][-200:]))
aborts = [op for op, _ in answers if op == "FEATURE_ABORT"]
vt.check("feature-aborts-the-rest", len(aborts) == 2 and not keepalived_said(mark, own),
         f"keepalived's address to the TV: {[op for op, _ in answers]} (Feature Abort for Give Device Vendor ID, the kernel's: no vendor id; and for User Control Pressed, keepalived's)")


def stamp(text):
    """Seconds of the day of a log line's timestamp (2026-12-02T03:24:24.026Z)."""
    h, m, sec = text.rstrip("Z").split("T")[1].split(":")
    return int(h) * 3600 + int(m) * 60 + float(sec)


def active_period(name, expect_wake, expect_standby, last, held=None):
    mark = len(bus())
    logged = len(vt.read(LOG, ""))
    started = time.monotonic()
    play(wav)
    ended = time.monotonic()
    if held is not None:
        # --power-on-wait with --cec alone: the wake, its confirmation (here the power-on key:
        # the follower stays in standby), then the open held the settle (issue 58: not the
        # settle from the player's arrival).
        log = vt.read(LOG, "")[logged:]
        woke = log.find("System Audio Mode Request")
        key = re.search(r"^(\S+) notice: CEC: \d+→5 User Control Pressed", log, re.M)
        went = re.search(r"^(\S+) info: the player's open goes on: the power is on.* ms=(\d+)", log, re.M)
        # The settle runs from the confirmation, so the go-on is logged at least the settle
        # after the key (both timestamps from the daemon's own clock; a busy guest only adds).
        after_key = stamp(went.group(1)) - stamp(key.group(1)) if key and went else None
        vt.check(f"{name}-open-held-until-the-receiver-wake-is-confirmed", key is not None and went is not None and 0 <= woke < key.start() < went.start()
                 and after_key >= held / 1000 - 0.002,
                 f"the wake at {woke}, the power-on key at {key and key.start()}, the open's go-on at {went and went.start()} in the log's new text, "
                 f"{after_key if after_key is None else round(after_key, 3)} s after the key; held {went and went.group(2)} ms "
                 f"(--power-on-settle {held} ms, --power-on-wait 5 s); aplay took {ended - started:.2f} s for a 1.5 s file")
    w = vt.wait_until(lambda: len(keepalived_said(mark, own)) >= len(expect_wake), 10, 0.1)
    said = keepalived_said(mark, own)
    vt.check(f"{name}-active-messages", w and said[:len(expect_wake)] == expect_wake,
             f"{said} within {time.monotonic() - started:.1f} s of the player's start (expected {expect_wake})")
    # The receiver's answer, and the acknowledgement in status.
    w = vt.wait_until(lambda: last in (cec().get("lastMessage") or "") and cec().get("acknowledged") is True, 5, 0.2)
    answer = [line for i, d, op, line in bus()[mark:] if i == 5 and op == "SET_SYSTEM_AUDIO_MODE"]
    vt.check(f"{name}-acknowledged", w and bool(answer), f"status: {cec()}; the audio system: {answer[:1]}")
    w = vt.wait_until(lambda: len(keepalived_said(mark, own)) >= len(expect_wake) + len(expect_standby), 3 + 1.25 + 6, 0.1)
    said = keepalived_said(mark, own)
    vt.check(f"{name}-idle-standby", w and said[len(expect_wake):] == expect_standby,
             f"{said[len(expect_wake):]} {time.monotonic() - ended:.1f} s after the player's end (expected {expect_standby}; --on-idle-after 3s)")
    time.sleep(1)
    vt.check(f"{name}-nothing-more", keepalived_said(mark, own) == expect_wake + expect_standby, f"{keepalived_said(mark, own)}")


def cec_ctl(adapter, *args):
    r = vt.run(["cec-ctl", "-d", f"/dev/cec{adapter}", "-s"] + list(args), timeout=20)
    return r.returncode == 0


def asked(since, own):
    """keepalived's questions and keys after the first `since` monitor lines."""
    return [(d, op) for i, d, op, _ in bus()[since:] if i == own and op in QUESTIONS]


# The receiver in standby: what keepalived wakes is what it may put in standby again.
mark = len(bus())
cec_ctl(0, "--to", "5", "--standby")
time.sleep(2)
active_period("audio-only", [(5, "SYSTEM_AUDIO_MODE_REQUEST")], [(5, "STANDBY")], "User Control Pressed")
q = asked(mark, own)
vt.check("audio-only-asks-then-powers-on", q[:1] == [(5, "GIVE_DEVICE_POWER_STATUS")] and (5, "USER_CONTROL_PRESSED") in q,
         f"keepalived's questions and keys: {q} (the follower stays in standby after System Audio Mode Request)")
cec_ctl(1, "--to", "0", "--standby")
time.sleep(2)

# -- --cec-wake-tv on a reload ----------------------------------------------------------------
write_conf("--cec-wake-tv --power-on-wait 5s --power-on-settle 1s")
mark = len(bus())
reloads = vt.read(LOG, "").count("reloaded")
daemon.send_signal(signal.SIGHUP)
w = vt.wait_until(lambda: vt.read(LOG, "").count("reloaded") > reloads, 10, 0.2)
time.sleep(2)
vt.check("silent-at-wake-tv-reload", w and not keepalived_said(mark, own), f"announced: {keepalived_said(mark, own)}")
active_period("wake-tv", [(5, "SYSTEM_AUDIO_MODE_REQUEST"), (0, "IMAGE_VIEW_ON"), (15, "ACTIVE_SOURCE")], [(5, "STANDBY"), (0, "STANDBY")], "User Control Pressed",
              held=1000)

# -- the TV on another source: nothing keepalived did not wake is put in standby ------------------
long_wav = "/tmp/cec-track-6s.wav"
make_wav(long_wav, seconds=6)
cec_ctl(1, "--to", "0", "--image-view-on")
cec_ctl(1, "--active-source", "phys-addr=1.0.0.0")
time.sleep(2)
mark = len(bus())
player = subprocess.Popen(["aplay", "-q", "-D", "keepalived:CARD=0", long_wav], env=PLAYER_ENV)
w = vt.wait_until(lambda: (15, "ACTIVE_SOURCE") in keepalived_said(mark, own), 15, 0.1)
said = keepalived_said(mark, own)
vt.check("tv-on-wakes-only-the-receiver", w and said == [(5, "SYSTEM_AUDIO_MODE_REQUEST"), (15, "ACTIVE_SOURCE")],
         f"{said} (the TV was on: no Image View On)")
before = len(bus())
cec_ctl(0, "--request-active-source")
w = vt.wait_until(lambda: any(i == own and op == "ACTIVE_SOURCE" for i, _, op, _ in bus()[before:]), 3, 0.1)
vt.check("answers-request-active-source-while-source", w, f"after {w.seconds:.1f} s: {[line for i, _, _, line in bus()[before:] if i == own]}")
cec_ctl(1, "--active-source", "phys-addr=1.0.0.0")
time.sleep(1)
before = len(bus())
cec_ctl(0, "--request-active-source")
time.sleep(2)
late = [line for i, _, op, line in bus()[before:] if i == own and op == "ACTIVE_SOURCE"]
vt.check("silent-to-request-active-source-after-another-source", not late, f"keepalived's Active Source after cec1's: {late}")
player.wait(timeout=30)
time.sleep(3 + 1.25 + 4)
said = keepalived_said(mark, own)
vt.check("another-source-no-standby", not [m for m in said if m[1] == "STANDBY"],
         f"keepalived's announcements in the period: {said} (another source since the wake: no Standby to anything)")

# -- the user's Standby during an active period: nothing woken again, no Standby ---------------------
mark = len(bus())
player = subprocess.Popen(["aplay", "-q", "-D", "keepalived:CARD=0", long_wav], env=PLAYER_ENV)
w = vt.wait_until(lambda: (5, "SYSTEM_AUDIO_MODE_REQUEST") in keepalived_said(mark, own), 15, 0.1)
time.sleep(1)
cec_ctl(0, "--to", "15", "--standby")
woken = len(keepalived_said(mark, own))
player.wait(timeout=30)
time.sleep(3 + 1.25 + 4)
said = keepalived_said(mark, own)
vt.check("user-standby-final", w and said[woken:] == [], f"keepalived's announcements: {said}; after the user's Standby: {said[woken:]}")

# -- keepalived's address cleared by another program: claimed again ----------------------------------
cec_ctl(2, "--clear")
w = vt.wait_until(lambda: cec().get("state") == "ready" and cec().get("logicalAddress") in (4, 8, 11), 15, 0.2)
lost_lines = re.findall(r"^.*no logical address any more.*$", vt.read(LOG, ""), re.M)
vt.check("cleared-claims-again", w and len(lost_lines) == 1, f"after {w.seconds:.1f} s: {cec()}; the log: {lost_lines}")
own = cec().get("logicalAddress") or own

# -- a Kodi-like program takes the adapter in the middle of an active period (issue 58): as libcec
# does, it becomes the exclusive follower with passthrough, clears keepalived's configuration and
# claims its own Playback address. keepalived steps aside (status, one notice), sends nothing
# from that address, and no Standby at idle to what it woke before --------------------------------
KODI = r'''
import fcntl, os, struct, sys
fd = os.open("/dev/cec2", os.O_RDWR)
# CEC_S_MODE (_IOW('a', 9, __u32)): CEC_MODE_INITIATOR | CEC_MODE_EXCL_FOLLOWER_PASSTHRU, libcec's mode
fcntl.ioctl(fd, 0x40046109, struct.pack("I", 0x01 | 0x30))
print("exclusive follower", flush=True)
sys.stdin.read()
'''
cec_ctl(0, "--to", "5", "--standby")
time.sleep(2)
mark = len(bus())
logged = len(vt.read(LOG, ""))
player = subprocess.Popen(["aplay", "-q", "-D", "keepalived:CARD=0", long_wav], env=PLAYER_ENV)
w = vt.wait_until(lambda: (5, "SYSTEM_AUDIO_MODE_REQUEST") in keepalived_said(mark, own), 15, 0.1)
time.sleep(2)
woke = keepalived_said(mark, own)
kodi = subprocess.Popen(["python3", "-c", KODI], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
held = kodi.stdout.readline().strip() == "exclusive follower"
taken_at = len(bus())
taken = held and cec_ctl(2, "--clear") and cec_ctl(2, "--playback", "-o", "Kodi")
w2 = vt.wait_until(lambda: (cec().get("state") or "").startswith("left alone"), 10, 0.2)
notices = re.findall(r"^.*another program configured the adapter.*$", vt.read(LOG, "")[logged:], re.M)
vt.check("kodi-mid-period-left-alone", w and taken and w2 and len(notices) == 1,
         f"keepalived woke {woke}; exclusive follower {held}, Kodi's configuration {taken}; after {w2.seconds:.1f} s: {cec()}; the log: {notices}")
player.wait(timeout=30)
time.sleep(3 + 1.25 + 4)
after = [(i, d, op) for i, d, op, _ in bus()[taken_at:] if op in ANNOUNCEMENTS and i in (4, 8, 11)]
standby = re.findall(r"^.*CEC: \d+→\d+ Standby.*$", vt.read(LOG, "")[logged:], re.M)
vt.check("kodi-mid-period-no-standby", not after and not standby,
         f"announcements from a Playback address after Kodi took the adapter: {after}; keepalived's Standby lines: {standby}")
vt.note("the bus while a Kodi-like program took the adapter mid-period (keepalived at %s before):" % own)
for _, _, _, line in bus()[mark:]:
    vt.note("  " + line)
# Kodi gone, its configuration left, nobody following it: keepalived follows nothing it does not
# own, so the kernel answers Feature Abort for that address (issue 58), as cec-compliance expects.
kodi.stdin.close()
kodi.wait(timeout=10)
r = vt.run(["cec-ctl", "-d", "/dev/cec2"])
m = re.search(r"Logical Address\s*:\s*(\d+)", r.stdout)
kodi_la = int(m.group(1)) if m else None
before = len(bus())
vt.run(["cec-ctl", "-d", "/dev/cec0", "-s", "--to", str(kodi_la), "--give-device-power-status"], timeout=20)
w = vt.wait_until(lambda: any(i == kodi_la and d == 0 and op == "FEATURE_ABORT" for i, d, op, _ in bus()[before:]), 5, 0.1)
vt.check("left-alone-no-silent-follower", kodi_la is not None and w,
         f"Kodi's address {kodi_la}; its answer to the TV's Give Device Power Status: {[line for i, _, _, line in bus()[before:] if i == kodi_la]}")


def compliance(name, la, out):
    """cec-compliance from the TV's adapter (its cec-follower running) against logical address
    `la`, the features a Playback device has (the full run passed 200 s in the guest): its
    summary, noted; the whole output in $VM_IO/`out`."""
    argv = ["cec-compliance", "-d", "/dev/cec0", "-r", str(la), "-C", "never", "--test-core", "--test-power-status",
            "--test-routing-control", "--test-one-touch-play", "--test-system-information", "--test-remote-control-passthrough"]
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150)
        text, code = r.stdout, r.returncode
    except subprocess.TimeoutExpired as e:
        text, code = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), "timed out after 150 s"
    with open(os.path.join(IO, out), "w") as f:
        f.write(text)
    lines = [line for line in text.splitlines() if re.search(r"Total for|FAIL|fail|warn", line)]
    vt.note(f"cec-compliance -r {la} ({name}), exit {code}:")
    for line in lines[-40:]:
        vt.note("  " + line.strip())


compliance("a Kodi-like configuration left alone by keepalived, no follower", kodi_la, "cec-compliance-left-alone.txt")
cec_ctl(2, "--clear")
w = vt.wait_until(lambda: cec().get("state") == "ready" and cec().get("logicalAddress") in (4, 8, 11), 15, 0.2)
vt.check("kodi-let-go-claims", w, f"after {w.seconds:.1f} s: {cec()}")
own = cec().get("logicalAddress") or own
compliance("keepalived's own address", own, "cec-compliance-keepalived.txt")

# -- HDMI unplugged and plugged back: the TV input's EDID cleared, then set with another address --
# vivid gives its outputs their physical addresses from that EDID; the kernel's state change
# tells keepalived, and the kernel claims the logical address again at the new address.
mark = len(bus())
r = vt.run(["v4l2-ctl", "-d", "/dev/video0", "--clear-edid=0"])
w = vt.wait_until(lambda: cec().get("state") == "claiming a logical address", 10, 0.2)
vt.check("hdmi-unplugged-waits", r.returncode == 0 and w, f"v4l2-ctl --clear-edid: {r.returncode} {vt.one_line(r.stdout)}; after {w.seconds:.1f} s: {cec()}")
# A TV in standby that pulls hotplug low looks the same: --cec-wake-tv wakes it from Unregistered.
# vivid takes the outputs off the bus with the EDID, so nothing can hear it here (and the monitor on
# the TV's adapter sees nothing): what is checked is that the kernel took it from the
# unconfigured adapter and transmitted it (its result, not acknowledged, rather than a refusal).
logged = len(vt.read(LOG, ""))
play(wav)
sent = lambda: re.findall(r"^.*(?:unregistered→0 Image View On|cannot send).*$", vt.read(LOG, "")[logged:], re.M)
w = vt.wait_until(lambda: any("nothing acknowledged unregistered→0 Image View On" in line for line in sent()), 10, 0.1)
vt.check("hotplug-low-image-view-on-from-unregistered", w and not [line for line in sent() if "cannot send" in line],
         f"after {w.seconds:.1f} s, keepalived's log: {sent()}")
time.sleep(3 + 1.25 + 2)
mark = len(bus())
# The EDID's address 1.3.0.0 puts the input under 1.0.0.0, and vivid's second output at 1.2.0.0.
r = vt.run(["v4l2-ctl", "-d", "/dev/video0", "--set-edid", "pad=0,type=hdmi,pa=1.3.0.0"])
w = vt.wait_until(lambda: cec().get("state") == "ready", 15, 0.2)
time.sleep(1)
vt.check("hdmi-replugged-claims-again", r.returncode == 0 and w and cec().get("physicalAddress") == "1.2.0.0" and not keepalived_said(mark, own),
         f"v4l2-ctl --set-edid pa=1.3.0.0: {r.returncode}; after {w.seconds:.1f} s: {cec()}; announced: {keepalived_said(mark, own)}")

# -- the adapter unplugged and back: vivid unbound (the module stays: keepalived's open node holds it) --
stop_bus()
r = vt.run("echo vivid.0 > /sys/bus/platform/drivers/vivid/unbind", timeout=30)
w = vt.wait_until(lambda: cec().get("state") == "waiting for the adapter", 10, 0.2)
output = lambda: (status().get("outputs") or [{}])[0].get("state")
vt.check("adapter-gone-waits", r.returncode == 0 and w and daemon.poll() is None and output() == "playing",
         f"unbind: {r.returncode} {vt.one_line(r.stdout)}; after {w.seconds:.1f} s: {cec()}; output {output()}")
if start_bus(["/bin/sh", "-c", "echo vivid.0 > /sys/bus/platform/drivers/vivid/bind"]):
    mark = len(bus())
    w = vt.wait_until(lambda: cec().get("state") == "ready", 15, 0.2)
    time.sleep(1)
    vt.check("adapter-back", w and not keepalived_said(mark, own), f"after {w.seconds:.1f} s: {cec()}; announced: {keepalived_said(mark, own)}")

# -- no audio system on the bus: its messages are not acknowledged, which is said once ----------
write_conf()
reloads = vt.read(LOG, "").count("reloaded")
daemon.send_signal(signal.SIGHUP)
vt.wait_until(lambda: vt.read(LOG, "").count("reloaded") > reloads, 10, 0.2)
r = vt.run(["cec-ctl", "-d", "/dev/cec1", "-s", "--clear"])
unheard = []
logged = len(vt.read(LOG, ""))
for period in range(2):
    play(wav)
    w = vt.wait_until(lambda: "System Audio Mode Request" in (cec().get("lastMessage") or "") and cec().get("acknowledged") is False, 10, 0.2)
    unheard.append((w.seconds if w else None, cec().get("acknowledged")))
    # The box's idle time: nothing acknowledged the wake, so nothing is put in standby (issue 58).
    time.sleep(3 + 1.25 + 2)
said = re.findall(r"^.*nothing acknowledged \d+→5 .*$", vt.read(LOG, ""), re.M)
vt.check("no-receiver-said-once", r.returncode == 0 and all(seen is not None for seen, _ in unheard) and len(said) == 1
         and " notice: " in said[0] and daemon.poll() is None,
         f"two active periods with the audio system's address cleared: status acknowledged {[a for _, a in unheard]}; the log: {said}")
standby = re.findall(r"^.*CEC: \d+→5 Standby.*$", vt.read(LOG, "")[logged:], re.M)
vt.check("no-receiver-no-standby", not standby, f"keepalived's Standby to an audio system that never acknowledged its wake: {standby}")

# -- an audio system that refuses the request: the kernel answers Feature Abort for an adapter
# with no follower (cec-adap.c: a directed message nobody processes is aborted), so cec1 is the
# audio system again without its cec-follower ---------------------------------------------------
for p in [p for p in helpers if "cec-follower" in p.args and "/dev/cec1" in p.args]:
    p.terminate()
    p.wait(timeout=5)
    helpers.remove(p)
r = vt.run(["cec-ctl", "-d", "/dev/cec1", "-s", "--audio", "-o", "Receiver"])
mark = len(bus())
logged = len(vt.read(LOG, ""))
play(wav)
w = vt.wait_until(lambda: re.search(r"refused keepalived's System Audio Mode Request \(Feature Abort", vt.read(LOG, "")[logged:]), 10, 0.2)
refusals = re.findall(r"^.*refused keepalived's .*$", vt.read(LOG, "")[logged:], re.M)
aborted = [line for i, d, op, line in bus()[mark:] if i == 5 and op == "FEATURE_ABORT"]
vt.check("feature-abort-logged", r.returncode == 0 and w and bool(aborted) and all(" notice: " in l for l in refusals)
         and cec().get("acknowledged") is not True,
         f"cec-ctl --audio without a follower: {r.returncode}; on the bus: {aborted[:1]}; the log: {refusals[:2]}; status: {cec()}")

# -- the end ------------------------------------------------------------------------------------
r = vt.run([K, "stop", "--socket", SOCKET], timeout=20)
vt.check("stops", r.returncode == 0 and daemon.wait(timeout=10) == 0, vt.one_line(r.stdout))

# -- another program's configuration at start: left alone without --cec-take-over -----------------
kodi = cec_ctl(2, "--clear") and cec_ctl(2, "--playback", "-o", "Kodi")
mark = len(bus())
logged = len(vt.read(LOG, ""))
log = open(LOG, "a")
daemon = subprocess.Popen([K, "run", "-d", "hw:0,0", "--socket", SOCKET, "--config", CONF, "-v"], stdout=log, stderr=subprocess.STDOUT)
w = vt.wait_until(lambda: (cec().get("state") or "").startswith("left alone"), 20, 0.2)
said = re.findall(r"^.*another program configured the adapter.*$", vt.read(LOG, "")[logged:], re.M)
vt.check("foreign-configuration-left-alone", kodi and w and len(said) == 1 and " notice: " in said[0],
         f"cec-ctl --playback -o Kodi: {kodi}; after {w.seconds:.1f} s: {cec()}; the log: {said}")
# Left alone from the start, keepalived follows nothing (issue 58: it stayed a follower that
# answered nothing, so the kernel did not answer for the address and the TV's question timed out).
r = vt.run(["cec-ctl", "-d", "/dev/cec2"])
m = re.search(r"Logical Address\s*:\s*(\d+)", r.stdout)
kodi_la = int(m.group(1)) if m else None
before = len(bus())
asked = vt.run(["cec-ctl", "-d", "/dev/cec0", "-s", "--to", str(kodi_la), "--give-device-power-status"], timeout=20)
w = vt.wait_until(lambda: any(i == kodi_la and d == 0 and op == "FEATURE_ABORT" for i, d, op, _ in bus()[before:]), 5, 0.1)
vt.check("left-alone-at-start-no-silent-follower", kodi_la is not None and w,
         f"Kodi's address {kodi_la}; the bus after the TV's Give Device Power Status to it: {[line for i, _, _, line in bus()[before:]]}; "
         f"cec-ctl: {vt.one_line(asked.stdout[-160:])}")
# A reload that names another adapter and adds --cec-take-over: the adapter left alone is let go
# as it is, Kodi's configuration kept (issue 58: it was cleared with the new settings).
with open(CONF, "w") as f:
    f.write('KEEPALIVED_OPTIONS="--cec /dev/cec9 --cec-take-over --cec-standby --on-idle-after 3s"\n')
reloads = vt.read(LOG, "").count("reloaded")
daemon.send_signal(signal.SIGHUP)
w = vt.wait_until(lambda: vt.read(LOG, "").count("reloaded") > reloads and cec().get("device") == "/dev/cec9", 10, 0.2)
time.sleep(1)
r = vt.run(["cec-ctl", "-d", "/dev/cec2"])
osd = re.search(r"OSD Name\s*:\s*'?([^'\n]*)", r.stdout)
vt.check("reload-to-another-adapter-leaves-the-old-one", w and osd is not None and osd.group(1).strip() == "Kodi",
         f"after {w.seconds:.1f} s: {cec()}; /dev/cec2's OSD name: {osd and osd.group(1)}")
write_conf()
reloads = vt.read(LOG, "").count("reloaded")
daemon.send_signal(signal.SIGHUP)
w = vt.wait_until(lambda: vt.read(LOG, "").count("reloaded") > reloads and (cec().get("state") or "").startswith("left alone"), 10, 0.2)
vt.check("reload-back-left-alone", w, f"after {w.seconds:.1f} s: {cec()}")
# The other program lets go: keepalived claims its own address.
cec_ctl(2, "--clear")
w = vt.wait_until(lambda: cec().get("state") == "ready" and cec().get("logicalAddress") in (4, 8, 11), 15, 0.2)
vt.check("foreign-let-go-claims", w, f"after {w.seconds:.1f} s: {cec()}")
r = vt.run([K, "stop", "--socket", SOCKET], timeout=20)
vt.check("stops-again", r.returncode == 0 and daemon.wait(timeout=10) == 0, vt.one_line(r.stdout))
stop_bus()
text = vt.read(LOG, "")
vt.check("no-errors", not re.search(r" (error|critical): ", text), "; ".join(re.findall(r"^.* (?:error|critical): .*$", text, re.M))[:300] or "none")
for line in text.splitlines():
    if "CEC" in line:
        vt.note(line)
vt.note("the bus, as cec-ctl --monitor-all on the TV's adapter saw it:")
for line in vt.read(MONITOR, "").splitlines():
    if line.strip():
        vt.note(line.rstrip())
vt.finish()
