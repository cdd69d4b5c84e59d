#!/usr/bin/python3
# vm: release=yes devices=hda mode=systemd timeout=600
"""The package's units against the real systemd-logind (and polkit, dbus-daemon) of a booted
systemd, on the kernel's HDA driver. The .deb is installed in the guest.

System unit (keepalived-audio.service):
- as shipped (the package's system user keepalived-audio, made by its sysusers.d entry), logind
  lists keepalived's delay inhibitor lock for sleep (who `keepalived`, the service's MainPID and
  uid): the daemon reaches the system bus and polkit grants an unprivileged service user a delay
  lock. (Under DynamicUser=yes it could not: Debian 12's dbus-daemon drops a dynamic user's
  connection, systemd issue #22737; hence the static user.) When it fails, the daemon's own
  lines about logind are in the report;
- `systemctl suspend` with /sys/power/pm_test=freezer: logind emits PrepareForSleep and waits on
  the delay locks, systemd-sleep writes `mem` to /sys/power/state, the kernel freezes every task
  and thaws them again (the 9p root survives this, unlike a resume from S3). From the journal
  (monotonic stamps; the kernel's own for its lines) and dbus-monitor's stamp of PrepareForSleep:
  keepalived closed its output (`paused reason=sleep`, `sleeping device=…`) before systemd-sleep
  entered the sleep state and before the kernel's `PM: suspend entry`; it held sleep up for well
  under a second (PrepareForSleep to its output closed) and logind began the sleep long before
  its InhibitDelayMaxSec; `resumed reason=sleep` comes after `PM: suspend exit` and
  systemd-sleep's return; then status is `playing` again, the PCM RUNNING, logind lists a new
  lock from the same process, and the service never restarted;
- `systemctl restart systemd-logind`: keepalived sees logind take its bus name anew and logind
  lists exactly one lock from it afterwards.

User unit (keepalived.service under `systemd --user`), with a real login session (a PAM `login`
session opened by systemd-run, type tty, class user: logind makes it the user's Display) and
`--pause-when locked` in the user's options file: SetLockedHint(true) called by the user on
logind makes status `paused` (reason `locked`) within 2 s with the PCM closed; SetLockedHint(false)
makes it `playing` again within 2 s with the PCM RUNNING; the same process throughout.
"""

import glob
import json
import os
import re
import subprocess
import time

import vmtest as vt

UNIT = "keepalived-audio"
K = "/usr/bin/keepalived"
CONF = "/etc/keepalived-audio/keepalived-audio.conf"
USER = "kaudio"
card = int(os.environ.get("VM_CARD_HDA", "0"))
PCM_STATUS = f"/proc/asound/card{card}/pcm0p/sub0/status"
ROOT_ENV = vt.ROOT_ENV
# logind's default InhibitDelayMaxSec (logind.conf(5)); checked against the running logind below.
DELAY_MAX = 5.0



def show(*props, user=False):
    argv = ["systemctl", "show", UNIT, "-p", ",".join(props)]
    r = as_user(["systemctl", "--user", "show", "keepalived.service", "-p", ",".join(props)]) if user else vt.run(argv)
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def status_json(env=ROOT_ENV, runner=None):
    return vt.keepalived_status(K, env=env, runner=runner)


def inhibitors():
    """logind's ListInhibitors: [(what, who, why, mode, uid, pid)]."""
    r = vt.run(["busctl", "--json=short", "call", "org.freedesktop.login1", "/org/freedesktop/login1",
                "org.freedesktop.login1.Manager", "ListInhibitors"], timeout=30)
    try:
        return [tuple(i) for i in json.loads(r.stdout)["data"][0]]
    except (ValueError, KeyError, IndexError):
        return []


def keepalived_lock(pid):
    return [i for i in inhibitors() if i[0] == "sleep" and i[1] == "keepalived" and i[3] == "delay" and i[5] == pid]


def journal(*args):
    r = vt.run(["journalctl", "-o", "json", "--no-pager", *args], timeout=60)
    out = []
    for line in r.stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def message(entry):
    m = entry.get("MESSAGE", "")
    return bytes(m).decode(errors="replace") if isinstance(m, list) else str(m)


def mono(entry):
    """When it happened, in CLOCK_MONOTONIC seconds: the kernel's own stamp for its lines,
    journald's reception otherwise."""
    return int(entry.get("_SOURCE_MONOTONIC_TIMESTAMP") or entry["__MONOTONIC_TIMESTAMP"]) / 1e6


def first(entries, pattern, **fields):
    for e in entries:
        if all(str(e.get(k)) == str(v) for k, v in fields.items()) and re.search(pattern, message(e)):
            return e
    return None


def pcm_text():
    return " ".join(vt.read(PCM_STATUS, "").split()[:2])


# -- the package --------------------------------------------------------------------------------
vt.install_package(timeout=180)
vt.run(["udevadm", "settle", "--timeout=60"], timeout=90)
pcm_node = f"/dev/snd/pcmC{card}D0p"
if not vt.wait_until(lambda: os.stat(pcm_node).st_gid == 29, 30):
    for node in glob.glob("/dev/snd/*"):  # what udev's rules do
        os.chown(node, 0, 29)
        os.chmod(node, 0o660)
# On a booted box logind runs before any service starts (multi-user.target); the rig's target
# is only basic.target, so start it as a real boot would.
r = vt.run(["systemctl", "start", "systemd-logind.service"], timeout=120)
vt.check("logind-running", r.returncode == 0 and vt.run(["systemctl", "is-active", "systemd-logind"]).stdout.strip() == "active",
         f"systemctl start systemd-logind: exit {r.returncode} {vt.one_line(r.stdout, 120)}")
r = vt.run(["busctl", "get-property", "org.freedesktop.login1", "/org/freedesktop/login1",
            "org.freedesktop.login1.Manager", "InhibitDelayMaxUSec"], timeout=30)
m = re.match(r"t (\d+)", r.stdout.strip())
if m:
    DELAY_MAX = int(m.group(1)) / 1e6

# -- system unit: the delay lock ----------------------------------------------------------------
card_id = vt.read(f"/proc/asound/card{card}/id", "").strip()
device = f"hw:CARD={card_id},DEV=0"
# --verbose: the daemon's debug line says why it does not follow logind, if it does not.
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="--device {device} --volume 0.01 --verbose"\n')


def start_system_unit(name):
    r = vt.run(["systemctl", "restart", UNIT], timeout=90)
    w = vt.wait_until(lambda: show("StatusText")["StatusText"] == f"playing on {device}", 30)
    st = show("MainPID", "StatusText", "NRestarts")
    if not vt.check(name, r.returncode == 0 and w, f"systemctl restart: exit {r.returncode}; {st} after {w.seconds:.1f} s"):
        for e in journal("-u", UNIT, "-n", "12"):
            vt.note(f"{e.get('SYSLOG_IDENTIFIER')}: {message(e)[:160]}")
        vt.finish()
    return int(st["MainPID"])


def lock_check(name, pid, who):
    lock = vt.wait_until(lambda: keepalived_lock(pid), 15)
    refused = [message(e) for e in journal("-u", UNIT, f"_PID={pid}") if "refused a sleep delay lock" in message(e)]
    listed = vt.run(["systemd-inhibit", "--list", "--mode=delay", "--no-pager"], timeout=30).stdout
    detail = (f"logind lists {lock.value if lock else inhibitors()} for MainPID {pid} ({who} {os.stat(f'/proc/{pid}').st_uid}) "
              f"after {lock.seconds:.1f} s; journal: {refused or 'no refusal'}; systemd-inhibit --list: "
              f"{vt.one_line(next((l for l in listed.splitlines() if 'keepalived' in l), listed), 160)}")
    return lock, refused, detail


pid = start_system_unit("system-unit-plays")
lock, refused, detail = lock_check("system-delay-lock", pid, "uid")
if not vt.check("system-delay-lock", lock and not refused, detail):
    for e in journal("-u", UNIT, f"_PID={pid}"):
        if "logind" in message(e) or "bus" in message(e):
            vt.note(f"keepalived: {message(e)[:200]}")
    vt.finish()

# -- system unit: a sleep cycle through logind -------------------------------------------------
cursor = vt.run(["journalctl", "-n0", "--show-cursor", "--no-pager"]).stdout.strip().rsplit("cursor: ", 1)[-1]
monitor_log = open("/tmp/prepare-for-sleep.txt", "w")
monitor = subprocess.Popen(["dbus-monitor", "--system", "type='signal',interface='org.freedesktop.login1.Manager',member='PrepareForSleep'"],
                           stdout=monitor_log, stderr=subprocess.STDOUT)
vt.wait_until(lambda: "NameAcquired" in vt.read("/tmp/prepare-for-sleep.txt", ""), 30)
# time.time() - time.monotonic(): dbus-monitor stamps messages with the wall clock.
wall_offset = time.time() - time.monotonic()
with open("/sys/power/pm_test", "w") as f:
    f.write("freezer")
with open("/sys/module/suspend/parameters/pm_test_delay", "w") as f:
    f.write("1")
r = vt.run(["systemctl", "suspend"], timeout=60)
vt.check("systemctl-suspend", r.returncode == 0, f"exit {r.returncode} {vt.one_line(r.stdout, 200)}")


def entries_since():
    return journal(f"--after-cursor={cursor}")


def resumed():
    es = entries_since()
    return es if first(es, r"^resumed reason=sleep", _PID=pid) and first(es, "Operation 'sleep' finished|System returned from sleep") else None


back = vt.wait_until(resumed, 120, 0.5)
with open("/sys/power/pm_test", "w") as f:
    f.write("none")
es = back.value or entries_since()
monitor.terminate()
monitor.wait(timeout=10)
monitor_log.close()
signals = re.findall(r"signal time=([0-9.]+) .*member=PrepareForSleep\n\s+boolean (true|false)",
                     vt.read("/tmp/prepare-for-sleep.txt", ""))
prepare = {flag: float(t) - wall_offset for t, flag in signals}
marks = {
    "PrepareForSleep(true)": prepare.get("true"),
    "paused reason=sleep": first(es, r"^paused reason=sleep", _PID=pid),
    "sleeping device": first(es, rf"^sleeping device={re.escape(device)}", _PID=pid),
    "sleep.target reached": first(es, r"Reached target sleep\.target", _PID=1),
    "Entering sleep state": first(es, r"Entering sleep state"),
    "PM: suspend entry": first(es, r"PM: suspend entry", _TRANSPORT="kernel"),
    "PM: suspend exit": first(es, r"PM: suspend exit", _TRANSPORT="kernel"),
    "System returned": first(es, r"System returned from sleep state"),
    "PrepareForSleep(false)": prepare.get("false"),
    "resumed reason=sleep": first(es, r"^resumed reason=sleep", _PID=pid),
}
t = {k: (v if isinstance(v, float) else mono(v)) for k, v in marks.items() if v is not None}
missing = [k for k in marks if k not in t]
t0 = t.get("PrepareForSleep(true)", 0)
timeline = ", ".join(f"{k} {t[k] - t0:+.3f}" for k in sorted(t, key=t.get))
vt.note(f"sleep timeline (s from PrepareForSleep): {timeline}")
if not vt.check("sleep-cycle-logged", back and not missing, f"after {back.seconds:.1f} s; missing: {missing or 'nothing'}"):
    for e in es[-40:]:
        vt.note(f"{mono(e):.3f} {e.get('SYSLOG_IDENTIFIER')}[{e.get('_PID')}]: {message(e)[:120]}")
if not missing:
    closed = t["sleeping device"]
    # journald stamps systemd-sleep's line when it reads it, which may be after the kernel's
    # own stamp of the suspend entry: each is compared with the output's close, not with each other.
    vt.check("outputs-closed-before-sleep", t["paused reason=sleep"] <= closed < t["Entering sleep state"] and closed < t["PM: suspend entry"],
             f"output closed at {closed - t0:+.3f} s, systemd-sleep entered the sleep state at {t['Entering sleep state'] - t0:+.3f} s, "
             f"PM: suspend entry at {t['PM: suspend entry'] - t0:+.3f} s")
    vt.check("resumed-after-resume", t["resumed reason=sleep"] > t["PM: suspend exit"] and t["resumed reason=sleep"] > t["System returned"]
             and t["resumed reason=sleep"] >= t["PrepareForSleep(false)"] - 0.05,
             f"PM: suspend exit {t['PM: suspend exit'] - t0:+.3f} s, systemd-sleep returned {t['System returned'] - t0:+.3f} s, "
             f"PrepareForSleep(false) {t['PrepareForSleep(false)'] - t0:+.3f} s, resumed reason=sleep {t['resumed reason=sleep'] - t0:+.3f} s")
    hold = closed - t0
    # Released well before logind's InhibitDelayMaxSec would end the delay for us (the bound the
    # next check also uses); 1 s was how fast an emulated guest closes, a measurement
    # (CONTRIBUTING, "What a test may bound in time"). The order is checked above.
    vt.check("sleep-held-briefly", 0 <= hold < DELAY_MAX / 2,
             f"{hold * 1000:.0f} ms from PrepareForSleep(true) to the output closed (and the lock released); limit {DELAY_MAX / 2:g} s")
    began = t["sleep.target reached"] - t0
    timeouts = [message(e) for e in es if "inhibitor timeout is reached" in message(e)]
    vt.check("logind-did-not-wait-out-the-lock", began < DELAY_MAX / 2 and not timeouts,
             f"logind began the sleep (sleep.target) {began:.3f} s after PrepareForSleep(true) "
             f"(InhibitDelayMaxSec {DELAY_MAX:g} s); {timeouts or 'no inhibitor timeout in the journal'}")

# -- system unit: after the resume --------------------------------------------------------------
w = vt.wait_until(lambda: (s := status_json()) is not None and s.get("state") == "playing" and s["outputs"][0]["state"] == "playing", 5)
s = status_json() or {}
vt.check("playing-after-resume", w and vt.pcm_state(card) == "RUNNING",
         f"state {s.get('state')} ({[o.get('device') + ' ' + o.get('state') for o in s.get('outputs', [])]}) "
         f"{w.seconds:.1f} s after the test saw the resume; {PCM_STATUS}: {pcm_text()}")
lock = vt.wait_until(lambda: keepalived_lock(pid), 10)
vt.check("new-lock-after-resume", lock, f"logind lists {lock.value if lock else inhibitors()} after {lock.seconds:.1f} s")
st = show("MainPID", "NRestarts", "ActiveState")
vt.check("service-never-restarted", int(st["MainPID"]) == pid and st["NRestarts"] == "0" and st["ActiveState"] == "active",
         f"MainPID {st['MainPID']} (was {pid}), NRestarts {st['NRestarts']}, {st['ActiveState']}")

# -- system unit: logind restarted ---------------------------------------------------------------
# logind keeps its inhibitors across a restart; keepalived, seeing logind take its name anew,
# gives its lock back and takes a new one (so one lock, never two, never none).
cursor = vt.run(["journalctl", "-n0", "--show-cursor", "--no-pager"]).stdout.strip().rsplit("cursor: ", 1)[-1]
r = vt.run(["systemctl", "restart", "systemd-logind.service"], timeout=120)
seen = vt.wait_until(lambda: first(entries_since(), r"^logind appeared on the system bus", _PID=pid), 15)
lock = vt.wait_until(lambda: len(keepalived_lock(pid)) == 1 and seen, 15)
st = show("MainPID", "NRestarts")
vt.check("lock-after-logind-restart", r.returncode == 0 and seen and lock and int(st["MainPID"]) == pid,
         f"systemctl restart systemd-logind: exit {r.returncode}; keepalived saw it {'after %.1f s' % seen.seconds if seen else 'never'}; "
         f"logind lists {keepalived_lock(pid)}; MainPID {st['MainPID']} (was {pid}), NRestarts {st['NRestarts']}")
vt.run(["systemctl", "stop", UNIT], timeout=60)

# -- user unit: a real login session, --pause-when locked --------------------------------------
vt.run(["useradd", "-m", "-G", "audio", USER])
user_uid = int(vt.run(["id", "-u", USER]).stdout.strip())
runtime = f"/run/user/{user_uid}"
USER_ENV = {**os.environ, "XDG_RUNTIME_DIR": runtime, "HOME": f"/home/{USER}", "USER": USER, "LOGNAME": USER,
            "DBUS_SESSION_BUS_ADDRESS": f"unix:path={runtime}/bus"}
user_gid = int(vt.run(["id", "-g", USER]).stdout.strip())


def as_user(argv, timeout=60):
    # The user's ids set by subprocess itself, not runuser and env: under TCG each exec is about
    # 90 ms of the guest's CPU and runuser's PAM session 120 more, in every poll.
    return vt.run(argv, timeout=timeout, env=USER_ENV, user=user_uid, group=user_gid,
                  extra_groups=os.getgrouplist(USER, user_gid))


# What a console login does: PAM's `login` service with pam_systemd. No TTY here, so the type and
# class a getty's login would have are given as the environment pam_systemd reads.
r = vt.run(["systemd-run", "--unit=kaudio-login", "-p", "PAMName=login", "-p", f"User={USER}",
            "-E", "XDG_SESSION_TYPE=tty", "-E", "XDG_SESSION_CLASS=user", "/bin/sleep", "infinity"], timeout=60)


def display_session():
    r = vt.run(["loginctl", "show-user", USER, "-p", "Display", "--value"], timeout=30)
    return r.stdout.strip() if r.returncode == 0 and re.fullmatch(r"\w+", r.stdout.strip()) else None


display = vt.wait_until(display_session, 60)
session = display.value if display else ""
info = vt.run(["loginctl", "show-session", session, "-p", "Type", "-p", "Class", "-p", "State"]).stdout if session else ""
vt.check("login-session-is-display", display,
         f"systemd-run PAMName=login: exit {r.returncode}; loginctl show-user: Display={session!r} after {display.seconds:.1f} s; "
         f"{vt.one_line(info, 120)}")
manager = vt.wait_until(lambda: vt.run(["systemctl", "is-active", f"user@{user_uid}.service"]).stdout.strip() == "active"
                        and os.path.exists(f"{runtime}/systemd/private"), 90)
vt.check("user-manager", manager, f"user@{user_uid}.service after {manager.seconds:.1f} s")
if not (display and manager):
    vt.finish()
# No sound server for this user, as this scenario means: this root enables PipeWire's and
# PulseAudio's user sockets side by side (no real box has both), and a running WirePlumber
# reserves the card (org.freedesktop.ReserveDevice1), which keepalived then leaves to it.
SERVERS = ["wireplumber.service", "pipewire.service", "pipewire.socket", "pulseaudio.service", "pulseaudio.socket"]
as_user(["systemctl", "--user", "stop", *SERVERS])
as_user(["systemctl", "--user", "mask", *SERVERS])
os.makedirs(f"/home/{USER}/.config/keepalived", exist_ok=True)
with open(f"/home/{USER}/.config/keepalived/keepalived.conf", "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="--device {device} --pause-when locked"\n')
vt.run(["chown", "-R", f"{USER}:{USER}", f"/home/{USER}/.config"])
r = as_user(["systemctl", "--user", "start", "keepalived.service"])


def user_status():
    return status_json(runner=lambda argv: as_user(argv, timeout=15))


w = vt.wait_until(lambda: (s := user_status()) is not None and s.get("state") == "playing", 30)
user_pid = int(show("MainPID", user=True).get("MainPID", "0"))
vt.check("user-unit-plays", r.returncode == 0 and w and vt.pcm_state(card) == "RUNNING",
         f"systemctl --user start: exit {r.returncode}; state {(user_status() or {}).get('state')} after {w.seconds:.1f} s, "
         f"pid {user_pid}, PCM {pcm_text()}")
unfollowed = [message(e) for e in journal(f"_PID={user_pid}") if "no session to follow" in message(e)]
vt.check("user-unit-follows-session", not unfollowed and session != "",
         f"{unfollowed or 'no warning that --pause-when has no session to follow'}; session {session}")


def set_locked(value):
    return as_user(["busctl", "call", "org.freedesktop.login1", f"/org/freedesktop/login1/session/{session}",
                    "org.freedesktop.login1.Session", "SetLockedHint", "b", value])


def pcm_closed():
    return vt.read(PCM_STATUS, "").strip() == "closed"


def pcm_running():
    return vt.pcm_state(card) == "RUNNING"


def state_is(state, reason=None):
    s = user_status()
    return s is not None and s.get("state") == state and s.get("reason") == reason


# The 2 s bounds are on the daemon: the PCM's state in /proc is read without starting a process;
# `keepalived status` (a process start as the user, most of a second under TCG) must then agree.
for round_ in (1, 2):
    r = set_locked("true")
    closed = vt.wait_until(pcm_closed, 2)
    hint = vt.run(["loginctl", "show-session", session, "-p", "LockedHint", "--value"]).stdout.strip()
    w = vt.wait_until(lambda: state_is("paused", "locked"), 5)
    s = user_status() or {}
    vt.check(f"locked-pauses-{round_}", r.returncode == 0 and hint == "yes" and closed and w,
             f"SetLockedHint true as {USER}: exit {r.returncode} {vt.one_line(r.stdout, 80)}, LockedHint={hint}; "
             f"PCM {pcm_text() or 'closed'} after {closed.seconds:.2f} s; status {s.get('state')} reason {s.get('reason')}")
    r = set_locked("false")
    running = vt.wait_until(pcm_running, 2)
    w = vt.wait_until(lambda: state_is("playing"), 5)
    s = user_status() or {}
    vt.check(f"unlocked-plays-{round_}", r.returncode == 0 and running and w,
             f"SetLockedHint false: exit {r.returncode}; PCM {pcm_text()} after {running.seconds:.2f} s; status {s.get('state')}")
now_pid = int(show("MainPID", user=True).get("MainPID", "0"))
vt.check("user-unit-same-process", now_pid == user_pid and user_pid > 0, f"MainPID {now_pid} (was {user_pid})")
lines = [message(e) for e in journal(f"_PID={user_pid}") if re.match(r"^(paused|resumed) reason=locked", message(e))]
vt.check("user-journal-lock-lines", lines == ["paused reason=locked", "resumed reason=locked"] * 2, f"{lines}")
as_user(["systemctl", "--user", "stop", "keepalived.service"])
vt.finish()
