"""The measured link's rig, shared by the scenarios that record it (link-handoff, carry-chaos,
carry-formats, carry-players): the kernel's loopback card loaded with `pcm_substreams=1`, so that
device 0 (`HW`, the players' `PLUGIN`) is exclusive like a real card's and device 1's capture
side (`CAPTURE`) records what a receiver on that link gets; the package's service
(`UNIT`, its options file `CONF`) keeps device 0 awake.

    from looplink import CAPTURE, CONF, HW, PLUGIN, UNIT, holder, loop, show
    kpid = int(show("MainPID") or 0)
    if holder() == kpid: ...

Debian's MPD on the link (`start_mpd`): its system service, its one output the players' `PLUGIN`.
`Holders` samples who holds device 0 while a case runs; `snapserver_rpc` asks the guest's
snapserver (carry-players, carry-sync, carry-handoffs-net).
"""

import json
import os
import socket
import threading
import time

import vmtest as vt

loop = int(os.environ.get("VM_CARD_ALOOP", "0"))
UNIT = "keepalived-audio"
CONF = "/etc/keepalived-audio/keepalived-audio.conf"
HW = "hw:CARD=Loopback,DEV=0"
PLUGIN = "keepalived:CARD=Loopback,DEV=0"
CAPTURE = "hw:CARD=Loopback,DEV=1"


def holder():
    """The process that holds device 0's playback substream (None: closed)."""
    return vt.pcm_holder(loop, 0)


class Holders:
    """Who holds device 0, sampled every 20 ms on a thread of its own until `stop`."""

    def __init__(self):
        self.seen, self.running = set(), True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self):
        while self.running:
            self.seen.add(holder())
            time.sleep(0.02)

    def stop(self):
        self.running = False
        self.thread.join()
        return self.seen


def snapserver_rpc(method, params=None):
    """One JSON-RPC call to the guest's snapserver (its TCP control port, 1705): the result, or
    None when it does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", 1705), timeout=5) as s:
            s.sendall(json.dumps({"id": 1, "jsonrpc": "2.0", "method": method, "params": params or {}}).encode() + b"\r\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            return json.loads(buf).get("result")
    except (OSError, ValueError):
        return None


def show(prop):
    """One property of the service's unit (`MainPID`, `ActiveState`)."""
    return vt.run(["systemctl", "show", "-p", prop, "--value", UNIT]).stdout.strip()


def start_service(options):
    """Writes the package's options file (`KEEPALIVED_OPTIONS="OPTIONS"`) and starts its service:
    (systemctl's exit code, the unit's main pid, the wait until that process holds device 0 and
    it runs, at most 30 s). What a failure means is each scenario's own to say."""
    with open(CONF, "w") as f:
        f.write(f'KEEPALIVED_OPTIONS="{options}"\n')
    r = vt.run(["systemctl", "enable", "--now", UNIT], timeout=90)
    kpid = int(show("MainPID") or 0)
    return r.returncode, kpid, vt.wait_until(lambda: holder() == kpid and vt.pcm_state(loop, 0, 0) == "RUNNING", 30, 0.05)


MUSIC = "/var/lib/mpd/music"


def start_mpd(output_extra=""):
    """Debian's MPD as a box runs it (its system service, the socket unit masked) with its music in
    `MUSIC` (owned by mpd) and one ALSA output, `PLUGIN`, that converts nothing (`output_extra`:
    more of its settings, one per line); the database updated and every file in the queue.
    (systemctl's exit code, the wait until MPD answers, at most 30 s.)"""
    vt.run(["chown", "-R", "mpd:audio", MUSIC])
    with open("/etc/mpd.conf", "w") as f:
        f.write(f'''music_directory "{MUSIC}"
playlist_directory "/var/lib/mpd/playlists"
db_file "/var/lib/mpd/tag_cache"
log_file "/var/log/mpd/mpd.log"
user "mpd"
bind_to_address "localhost"
audio_output {{
    type "alsa"
    name "link"
    device "{PLUGIN}"
    auto_resample "no"
    auto_format "no"
    auto_channels "no"
    mixer_type "none"
{output_extra}}}
''')
    # The plug-in's wait for keepalived, as box-mpd's: the emulated CPU is a slow machine.
    os.makedirs("/run/systemd/system/mpd.service.d", exist_ok=True)
    with open("/run/systemd/system/mpd.service.d/release-timeout.conf", "w") as f:
        f.write("[Service]\nEnvironment=KEEPALIVED_RELEASE_TIMEOUT=1000\n")
    vt.run(["systemctl", "daemon-reload"])
    vt.run(["systemctl", "mask", "--runtime", "mpd.socket"])
    r = vt.run(["systemctl", "start", "mpd.service"], timeout=120)
    up = vt.wait_until(lambda: vt.run(["mpc", "status"], timeout=30).returncode == 0, 30, 0.2)
    vt.run(["mpc", "-q", "update", "--wait"], timeout=60)
    vt.run(["mpc", "-q", "add", "/"], timeout=30)
    return r.returncode, up
