"""`--mqtt` on the box: Debian's mosquitto on the guest's loopback (a password file, as a house's
broker has), and the package's service given the network and the password by docs/systemd.md's
MQTT drop-in (read from the page). MPD plays a track through `keepalived:` on the HDA card: the
retained state says the box is active with mpd, the card's output playing (carrying mpd, or lent
to it); `mpc stop`: idle once `--on-idle-after` has passed. The password is in no journal line. With
`--mqtt-commands`, the "Test tone" button on the idle box: the card's output reopened for the tone
and, 5 s after the press, in the mode it had (a ring loop stays one), MPD playing through
`keepalived:` again after it."""

import json
import os
import re
import subprocess
import time

import vmtest as vt
from mpdbox import UNIT, holder, journal, mpc, mpc_state, name, names, output, play, sh, show, start_mpd

PORT = 18831
PASSWORD = "vm-box-7a51"
DIR = "/run/vm-mosquitto-box"
PREFIX = "keepalived/box"
DROP_IN = f"/etc/systemd/system/{UNIT}.service.d/mqtt.conf"


def retained(topic):
    r = sh("mosquitto_sub", "-h", "127.0.0.1", "-p", str(PORT), "-u", "keepalived", "-P", PASSWORD,
           "-t", topic, "-C", "1", "-W", "2", "--retained-only", timeout=10)
    return r.stdout.strip() if r.returncode == 0 else None


def state():
    try:
        return json.loads(retained(f"{PREFIX}/state") or "{}")
    except ValueError:
        return {}


def restart(box, options):
    with open("/etc/keepalived-audio/keepalived-audio.conf", "w") as f:
        f.write(f'KEEPALIVED_OPTIONS="{options}"\n')
    sh("systemctl", "daemon-reload")
    r = sh("systemctl", "restart", UNIT, timeout=90)
    w = vt.wait_until(lambda: show(UNIT, "StatusText").startswith("playing"), 30, 0.2)
    box.kpid = int(show(UNIT, "MainPID") or 0)
    names[box.kpid] = f"keepalived {box.kpid}"
    return r.returncode, w


def state_through_mqtt(box):
    os.makedirs(DIR, exist_ok=True)
    sh("mosquitto_passwd", "-c", "-b", f"{DIR}/passwd", "keepalived", PASSWORD)
    with open(f"{DIR}/mosquitto.conf", "w") as f:
        f.write(f"listener {PORT} 127.0.0.1\nallow_anonymous false\npassword_file {DIR}/passwd\npersistence false\nuser root\n")
    broker = subprocess.Popen(["mosquitto", "-c", f"{DIR}/mosquitto.conf"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open("/etc/keepalived-audio/mqtt-password", "w") as f:
        f.write(PASSWORD + "\n")
    os.chmod("/etc/keepalived-audio/mqtt-password", 0o600)
    sh("chown", "keepalived-audio", "/etc/keepalived-audio/mqtt-password")
    page = vt.read(os.path.join(os.environ["VM_REPO"], "docs/systemd.md"), "")
    found = re.search(r"## MQTT and the sandbox.*?```ini\n(.*?)```", page, re.S)
    os.makedirs(os.path.dirname(DROP_IN), exist_ok=True)
    with open(DROP_IN, "w") as f:
        f.write(found.group(1) if found else "")
    since = time.time() - 1
    rc, w = restart(box, f"{box.OUTPUTS} --on-idle-after 2s --mqtt mqtt://keepalived@127.0.0.1:{PORT} --mqtt-prefix {PREFIX} "
                                 "--mqtt-password-file /etc/keepalived-audio/mqtt-password --mqtt-commands")
    w1 = vt.wait_until(lambda: retained(f"{PREFIX}/availability") == "online" and state().get("activity", {}).get("state") == "idle", 20, 0.3)
    vt.check("mqtt-box-connected", bool(found) and rc == 0 and w and w1,
             f"drop-in {'found' if found else 'NOT found'}; restart: exit {rc}, {show(UNIT, 'StatusText')!r}; "
             f"availability {retained(f'{PREFIX}/availability')!r}; state {vt.one_line(json.dumps(state()), 300)}")
    # The parts before may have left MPD stopped or killed.
    box.pid, _, up = start_mpd()
    play("a44", repeat=True)
    w = vt.wait_until(lambda: state().get("activity", {}).get("programs") == ["mpd"], 20, 0.3)
    playing = state()
    card = next((o for o in playing.get("outputs", []) if o.get("device") == box.HW), {})
    lent = [loan for loan in playing.get("loans") or [] if loan.get("program") == "mpd"]
    vt.check("mqtt-box-mpd-active", w and playing.get("activity", {}).get("state") == "active"
             and (card.get("carrying") == "mpd" or bool(lent)) and card.get("activity", {}).get("program") == "mpd",
             f"MPD {box.pid} ({'answering' if up else 'not answering'}, {mpc_state()}); after {w.seconds:.1f} s: card held by "
             f"{name(holder())}; state {vt.one_line(json.dumps(playing), 500)}")
    mpc("-q", "stop")
    w = vt.wait_until(lambda: state().get("activity", {}).get("state") == "idle", 20, 0.3)
    idle = state()
    log = "\n".join(journal(form="cat"))
    vt.check("mqtt-box-idle", w and isinstance(idle.get("activity", {}).get("since"), float) and PASSWORD not in log,
             f"after `mpc stop`, {w.seconds:.1f} s: activity {idle.get('activity')}; the password in the journal: {PASSWORD in log}")
    test_tone(box)
    os.remove(DROP_IN)
    rc, w = restart(box, box.OUTPUTS)
    broker.terminate()
    vt.check("mqtt-box-off-again", rc == 0 and w, f"restart without --mqtt: exit {rc}, {show(UNIT, 'StatusText')!r}")


def test_tone(box):
    """The button on the idle box: the tone's lines in the journal, the card's output back in its
    own mode and playing, and MPD through `keepalived:` after it as before."""
    before = output(box.HW)
    lines_before = len(journal(form="cat"))
    r = sh("mosquitto_pub", "-h", "127.0.0.1", "-p", str(PORT), "-u", "keepalived", "-P", PASSWORD,
           "-t", f"{PREFIX}/command/test-tone", "-m", "PRESS", timeout=10)

    def said():
        return journal(form="cat")[lines_before:]

    w = vt.wait_until(lambda: any("test tone over" in line for line in said()), 15, 0.3)
    w2 = vt.wait_until(lambda: output(box.HW).get("state") == "playing" and output(box.HW).get("mode") == before.get("mode"), 10, 0.3)
    after = output(box.HW)
    tone = [line for line in said() if "test tone" in line]
    vt.check("mqtt-box-test-tone", r.returncode == 0 and w and w2 and any(box.HW in line for line in tone if "asked by" in line),
             f"mosquitto_pub: exit {r.returncode}; the journal: {vt.one_line(' | '.join(tone), 500)}; "
             f"{box.HW} before: {before.get('state')} {before.get('mode')}, after ({w2.seconds:.1f} s): {after.get('state')} {after.get('mode')}")
    play("a44", repeat=True)
    w = vt.wait_until(lambda: state().get("activity", {}).get("programs") == ["mpd"], 20, 0.3)
    vt.check("mqtt-box-mpd-after-tone", w, f"MPD ({mpc_state()}) after the test tone, {w.seconds:.1f} s: card held by {name(holder())}; "
             f"activity {state().get('activity')}")
    mpc("-q", "stop")
    vt.wait_until(lambda: state().get("activity", {}).get("state") == "idle", 20, 0.3)
