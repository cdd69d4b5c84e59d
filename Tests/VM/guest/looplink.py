"""The measured link's rig, shared by the scenarios that record it (link-handoff, carry-chaos,
carry-formats, carry-players): the kernel's loopback card loaded with `pcm_substreams=1`, so that
device 0 (`HW`, the players' `PLUGIN`) is exclusive like a real card's and device 1's capture
side (`CAPTURE`) records what a receiver on that link gets; the package's service
(`UNIT`, its options file `CONF`) keeps device 0 awake.

    from looplink import CAPTURE, CONF, HW, PLUGIN, UNIT, holder, loop, show
    kpid = int(show("MainPID") or 0)
    if holder() == kpid: ...
"""

import os

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
