"""keepalived's other outputs through MPD's and aplay's hand-overs: the USB audio device
(snd-usb-audio, 48 kHz only in QEMU) lent to aplay through `keepalived:` in the file's format and
taken back, the HDA card untouched meanwhile; two devices of one card (snd-aloop's Loopback): a
player on device 0 leaves device 1's stream running; outputs named as a box's configuration
names them (`default`, `sysdefault:`, `front:`) know the card device they play on, and MPD through
`keepalived:` gets it from each."""

import json
import subprocess
import threading
import time

import vmtest as vt
from mpdbox import (GRACE_BOUND, L0, L1, LOOP0, LOOP1, MUSIC, PLAYER_ENV, USB_STATUS, card, holder, loans, loop, mpc,
                    name, names, output, params, play, set_options, sh, start_mpd, status_json, usb)

USB_FILE = f"{MUSIC}/usb48.wav"


def usb_lent_to_aplay(box):
    usb_dev = f"keepalived:CARD={box.usb_id},DEV=0"
    kpid = box.kpid
    sh("sox", "-R", "-D", "-n", "-r", "48000", "-b", "16", "-c", "2", "-e", "signed-integer", USB_FILE,
       "synth", "3", "sine", "300-1200", "gain", "-9")
    vt.check("usb-keepalived-holds", holder(USB_STATUS) == kpid and vt.pcm_state(usb) == "RUNNING",
             f"the USB device held by {name(holder(USB_STATUS))}, {vt.pcm_state(usb)}")
    t = time.monotonic()
    player = subprocess.Popen(["aplay", "-q", "-D", usb_dev, USB_FILE], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PLAYER_ENV)
    names[player.pid] = f"aplay {player.pid}"
    w = vt.wait_until(lambda: holder(USB_STATUS) == player.pid and vt.hw_params(usb).get("rate", "").startswith("48000"), 10, 0.02)
    hp = vt.hw_params(usb)
    vt.check("usb-lent", w and hp.get("format") == "S16_LE" and hp.get("channels") == "2",
             f"{time.monotonic() - t:.2f} s after aplay -D {usb_dev} started: held by {name(holder(USB_STATUS))}, "
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


class Watch(threading.Thread):
    """Every holder `status` had, polled every 10 ms until `done`."""

    def __init__(self, status):
        super().__init__(daemon=True)
        self.status, self.seen, self.done = status, set(), threading.Event()

    def run(self):
        while not self.done.is_set():
            self.seen.add(holder(self.status))
            time.sleep(0.01)


def two_devices_of_one_card(box):
    kpid = box.kpid
    w = vt.wait_until(lambda: holder(L0) == kpid and holder(L1) == kpid, 10, 0.05)
    if not vt.check("loop-kept", w, f"Loopback devices 0 and 1 held by {name(holder(L0))} and {name(holder(L1))}"):
        return
    watch = Watch(L1)
    watch.start()
    loop_dev = "keepalived:CARD=Loopback,DEV=0"
    player = subprocess.Popen(["aplay", "-q", "-D", loop_dev, USB_FILE], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=PLAYER_ENV)
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
             f"{loop_dev}: loans {json.dumps(st.get('loans'))}; {LOOP0}: {outs.get(LOOP0, {}).get('state')} ({outs.get(LOOP0, {}).get('reason')})")
    vt.check("loop-dev1-plays", outs.get(LOOP1, {}).get("state") == "playing" and outs.get(LOOP1, {}).get("hardware") == f"hw:CARD={loop},DEV=1",
             f"{LOOP1}: {outs.get(LOOP1, {}).get('state')} on {outs.get(LOOP1, {}).get('hardware')}")
    out, _ = player.communicate(timeout=30)
    back = vt.wait_until(lambda: holder(L0) == kpid, 10, 0.02)
    watch.done.set()
    watch.join()
    vt.check("loop-dev1-never-closed", watch.seen == {kpid}, f"device 1's substream while device 0 was lent: {sorted(name(x) for x in watch.seen)}")
    vt.check("loop-dev0-back", back and player.returncode == 0, f"aplay exit {player.returncode} ({vt.one_line(out, 120)}); device 0 back to {name(holder(L0))} after {back.seconds:.2f} s")


def outputs_named_by_alsa_names(box):
    """Outputs named as a box's configuration names them: matched by their handle's device."""
    box.pid, r, w = start_mpd()
    vt.check("mpd-restarted-names", box.pid and w, f"MainPID {box.pid}, mpc answers after {w.seconds:.1f} s")
    kpid = box.kpid
    for label, device in (("default", "default"), ("sysdefault", f"sysdefault:CARD={box.card_id}"), ("front", f"front:CARD={box.card_id},DEV=0")):
        rc = set_options(f"-d {device} -d {box.USB_HW} -d {LOOP0} -d {LOOP1} --no-carry")
        want = f"hw:CARD={card},DEV=0"

        def on_card():
            o = output(device)
            return o if o.get("state") == "playing" and o.get("hardware") == want and holder() == kpid else None

        w = vt.wait_until(on_card, 20, 0.1)
        o = w.value or output(device)
        if not vt.check(f"{label}-knows-its-device", w, f"systemctl reload: exit {rc}; {device}: {o.get('state')} on {o.get('hardware')} "
                        f"(want {want}), card held by {name(holder())} in {params()}"):
            continue
        t = play("b48", repeat=True)
        box.mpd_plays("b48", t, label)
        t_stop = time.monotonic()
        mpc("-q", "stop")
        w = vt.wait_until(lambda: holder() == kpid, 15, 0.02)
        ls = loans()
        vt.check(f"{label}-taken-back", w and ls == [], f"after `mpc stop`: card held by {name(holder())} in {params()} "
                 f"{time.monotonic() - t_stop:.2f} s later; loans {json.dumps(ls)}")
    sh("systemctl", "stop", "mpd.service", timeout=60)
