#!/usr/bin/python3
# vm: devices=hda,usb timeout=300
"""`keepalived devices` and the selections on two real cards (snd-hda-intel's analog codec and
snd-usb-audio's speaker): one block per card device named as the kernel names it, with its kind,
the PCM keepalived opens and the selections that pick it; --all and --analog play to both cards'
shared dmix form, --digital finds nothing and waits (no HDMI or S/PDIF here) without exiting;
`devices` then shows what the running daemon does on each card. --all --exclude 'USB*' plays to
the HDA card only, and `devices` shows the USB card left out by the daemon's pattern. A sound
server starting beside them (PulseAudio's and PipeWire's sockets created in the daemon's
XDG_RUNTIME_DIR) leaves the two dmix streams alone, while a `null` output of another daemon, which
could have a server behind it, reopens on it: the sockets were seen, and ignored where no server
can be behind the stream."""

import json
import os
import socket
import subprocess
import time

import vmtest as vt

K = os.environ["KEEPALIVED"]
SOCKET = "/run/keepalived-test/control.sock"


def status():
    return vt.keepalived_status(K, SOCKET)


r = vt.run([K, "devices", "--json", "--socket", SOCKET], timeout=30)
listing = json.loads(r.stdout)
outputs = {o["title"]: o for o in listing["outputs"]}
vt.check("devices-blocks", sorted(outputs) == ["HDA Intel — Generic Analog", "QEMU USB Audio — USB Audio"],
         f"blocks {sorted(outputs)}")
hda = outputs.get("HDA Intel — Generic Analog", {})
usb = outputs.get("QEMU USB Audio — USB Audio", {})
vt.check("devices-kinds", hda.get("kind") == "analog" and usb.get("kind") == "USB", f"HDA {hda.get('kind')}, USB {usb.get('kind')}")
vt.check("devices-opens", hda.get("opens") == "dmix:CARD=Intel,DEV=0" and usb.get("opens") == "dmix:CARD=Audio,DEV=0",
         f"HDA opens {hda.get('opens')}, USB opens {usb.get('opens')}")
vt.check("devices-picks", hda.get("pickedBy") == ["--all", "--analog"] and usb.get("pickedBy") == ["--all", "--analog"]
         and "digital" in hda.get("notPickedBecause", {}).get("--digital", "") and "digital" in usb.get("notPickedBecause", {}).get("--digital", ""),
         f"HDA {hda.get('pickedBy')} {hda.get('notPickedBecause')}, USB {usb.get('pickedBy')} {usb.get('notPickedBecause')}")
vt.check("devices-no-plugins-by-default", listing.get("pcms") is None and listing.get("configured") == [],
         f"pcms {listing.get('pcms') is not None}, configured {listing.get('configured')}")
human = vt.run([K, "devices", "--socket", SOCKET], timeout=30).stdout
vt.check("devices-human", human.count("kind: ") == 2 and "iec958" not in human and "surround" not in human,
         " | ".join(human.strip().splitlines()[:6]))
verbose = json.loads(vt.run([K, "devices", "--json", "--verbose", "--socket", SOCKET], timeout=30).stdout)
roles = {p["name"]: p["role"] for p in verbose.get("pcms") or []}
vt.check("devices-verbose", roles.get("null") == "plug-in" and roles.get("iec958:CARD=Audio,DEV=0") == "card"
         and roles.get("dmix:CARD=Intel,DEV=0") == "card", f"{len(roles)} PCMs; null {roles.get('null')}, iec958 {roles.get('iec958:CARD=Audio,DEV=0')}")

# --all plays to both cards' dmix forms; `devices` shows it.
RUNTIME = "/tmp/keepalived-runtime"
os.makedirs(RUNTIME, mode=0o700, exist_ok=True)
session = dict(os.environ, XDG_RUNTIME_DIR=RUNTIME)
log = open("/tmp/keepalived-all.log", "w")
daemon = subprocess.Popen([K, "run", "--all", "--socket", SOCKET], stdout=log, stderr=subprocess.STDOUT, env=session)
w = vt.wait_until(lambda: (s := status()) and len(s["outputs"]) == 2 and all(o["state"] == "playing" for o in s["outputs"]), 30, 0.2)
s = status() or {"outputs": []}
vt.check("all-plays-both", w and sorted(o["device"] for o in s["outputs"]) == ["dmix:CARD=Audio,DEV=0", "dmix:CARD=Intel,DEV=0"],
         f"{[(o['device'], o['state'], o.get('mode')) for o in s['outputs']]} after {w.seconds:.1f} s")
now = json.loads(vt.run([K, "devices", "--json", "--socket", SOCKET], timeout=30).stdout)
playing = {o["title"]: o.get("playing") for o in now["outputs"]}
vt.check("devices-shows-playing", all(p and p.startswith("playing") for p in playing.values()), f"{playing}")
# The main thread sleeps while nothing changes. A rescan once set off the next for ever: alsa-lib's
# hint scan opens every card's control node read-write, and the daemon's own inotify watch on
# /dev/snd took the close for a change.
def switches(pid):
    text = vt.read(f"/proc/{pid}/task/{pid}/status") or ""
    return sum(int(line.split()[1]) for line in text.splitlines() if "ctxt_switches" in line)


before = switches(daemon.pid)
time.sleep(5)
woke = switches(daemon.pid) - before
vt.check("main-thread-sleeps", woke <= 3, f"keepalived's main thread woke {woke} times in 5 s")

# A sound server starting in the session: its sockets appear. The control daemon on `null` (a
# server could be behind a plug-in) must reopen; the dmix streams must not.
NULL_SOCKET = "/run/keepalived-test/null.sock"
null_log_path = "/tmp/keepalived-null.log"
control = subprocess.Popen([K, "run", "-d", "null", "--socket", NULL_SOCKET], stdout=open(null_log_path, "w"),
                           stderr=subprocess.STDOUT, env=session)
vt.wait_until(lambda: (c := vt.keepalived_status(K, NULL_SOCKET)) and c["state"] == "playing", 30, 0.2)
os.makedirs(f"{RUNTIME}/pulse", mode=0o700, exist_ok=True)
servers = []
for path in (f"{RUNTIME}/pulse/native", f"{RUNTIME}/pipewire-0"):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    servers.append(server)
w = vt.wait_until(lambda: "recovered" in (vt.read(null_log_path) or ""), 30, 0.1)
s = status() or {"outputs": []}
vt.check("server-socket-seen-by-a-plugin-output", w and control.poll() is None,
         vt.one_line([line for line in (vt.read(null_log_path) or "").splitlines() if "recover" in line]) + f" after {w.seconds:.1f} s")
vt.check("server-socket-ignored-on-dmix", len(s["outputs"]) == 2 and all(o["state"] == "playing" and o["recoveries"] == 0 for o in s["outputs"])
         and "recovering" not in (vt.read("/tmp/keepalived-all.log") or ""),
         f"{[(o['device'], o['state'], o['recoveries']) for o in s['outputs']]}")
vt.run([K, "stop", "--socket", NULL_SOCKET], timeout=20)
control.wait(timeout=10)
for server in servers:
    server.close()
vt.run([K, "stop", "--socket", SOCKET], timeout=20)
daemon.wait(timeout=10)

# --exclude: the USB speaker by its card's description; the HDA card plays alone.
log = open("/tmp/keepalived-exclude.log", "w")
daemon = subprocess.Popen([K, "run", "--all", "--exclude", "USB*", "--socket", SOCKET], stdout=log, stderr=subprocess.STDOUT)
w = vt.wait_until(lambda: (s := status()) and s["outputs"] and all(o["state"] == "playing" for o in s["outputs"]), 30, 0.2)
s = status() or {"outputs": []}
vt.check("exclude-plays-the-rest", w and [o["device"] for o in s["outputs"]] == ["dmix:CARD=Intel,DEV=0"] and s.get("exclude") == ["USB*"],
         f"{[(o['device'], o['state']) for o in s['outputs']]}, exclude {s.get('exclude')}")
now = {o["title"]: o for o in json.loads(vt.run([K, "devices", "--json", "--socket", SOCKET], timeout=30).stdout)["outputs"]}
usb_now = now.get("QEMU USB Audio — USB Audio", {})
vt.check("exclude-shown-by-devices", usb_now.get("excludedBy") == "USB*" and usb_now.get("pickedBy") == []
         and usb_now.get("notPickedBecause", {}).get("--all") == "excluded by --exclude 'USB*'" and not usb_now.get("playing"),
         f"USB {usb_now.get('pickedBy')} {usb_now.get('notPickedBecause')} playing {usb_now.get('playing')}")
vt.run([K, "stop", "--socket", SOCKET], timeout=20)
daemon.wait(timeout=10)

# --analog: the same two; --digital: none, and it waits rather than exits.
for selection, expected in (("--analog", 2), ("--digital", 0)):
    log = open(f"/tmp/keepalived{selection}.log", "w")
    daemon = subprocess.Popen([K, "run", selection, "--socket", SOCKET], stdout=log, stderr=subprocess.STDOUT)
    if expected:
        w = vt.wait_until(lambda: (s := status()) and len(s["outputs"]) == expected and all(o["state"] == "playing" for o in s["outputs"]), 30, 0.2)
    else:
        w = vt.wait_until(lambda: (s := status()) and s["state"] == "waiting", 30, 0.2)
    s = status() or {"outputs": [], "state": None}
    vt.check(f"{selection[2:]}-selection", w and daemon.poll() is None,
             f"state {s['state']} ({s.get('reason')}), outputs {[o['device'] for o in s['outputs']]}, running {daemon.poll() is None}")
    vt.run([K, "stop", "--socket", SOCKET], timeout=20)
    daemon.wait(timeout=10)
vt.finish()
