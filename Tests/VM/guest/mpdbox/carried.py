"""With `--carry --lead-in 1s`: MPD's tracks carried on keepalived's own running stream on the HDA card. The
card stays keepalived's and RUNNING through MPD's whole session but for the one reopen a format
change needs (44.1 to 48 kHz, between the queue's two tracks), the codec never sleeps (the
scenario's codec-never-slept spans this part), and the 44.1 kHz track's file goes to the host,
which finds it sample for sample in QEMU's capture (c44-carried-bit-perfect)."""

import os
import shutil
import time

import vmtest as vt
from mpdbox import MPD_LOG, MUSIC, TRACKS, card, holder, mpc, mpc_state, name, rate, set_options, sh, start_mpd


def queue_carried(box):
    kpid = box.kpid
    # A second of the signal in each new format before the music (--lead-in): the queue's two
    # format changes make it two seconds longer.
    rc = set_options(f"{box.OUTPUTS} --carry --lead-in 1s")
    w = vt.wait_until(lambda: holder() == kpid and vt.pcm_state(card) == "RUNNING", 20, 0.1)
    if not vt.check("carry-reloaded", rc == 0 and w, f"systemctl reload with --carry: exit {rc}; card held by {name(holder())}, {vt.pcm_state(card)}"):
        return
    box.pid, r, w = start_mpd()
    vt.check("carry-mpd-running", box.pid and w, f"systemctl start mpd: exit {r.returncode}, MainPID {box.pid}")
    mpc("-q", "clear")
    mpc("-q", "repeat", "off")
    mpc("-q", "add", TRACKS["c44"][0])
    mpc("-q", "add", TRACKS["b48"][0])
    t = time.monotonic()
    mpc("-q", "play")
    # Who holds the card, its state and rate, every 20 ms, until MPD has played the queue.
    seen = []
    asked = t
    length = TRACKS["c44"][2] + TRACKS["b48"][2]
    while time.monotonic() - t < length + 20:
        seen.append((holder(), vt.pcm_state(card), rate()))
        now = time.monotonic()
        if now - t > length - 1 and now - asked > 0.5:
            asked = now
            if mpc_state() != "playing":
                break
        time.sleep(0.02)
    took = time.monotonic() - t
    holders = {h for h, _, _ in seen}
    # The breaks a format change needs: keepalived's close and reopen in the player's rate, once
    # for the first track when the card ran another (the last track before was 48 kHz), once
    # between the two; mostly too short for a look every 20 ms to see.
    breaks = sum(1 for (a, _, _), (b, _, _) in zip(seen, seen[1:]) if a == kpid and b != kpid)
    rates = [r for _, _, r in seen if r]
    order = [r for i, r in enumerate(rates) if i == 0 or rates[i - 1] != r]
    vt.check("carry-queue-played", length + 1.8 <= took < length + 15,
             f"the queue ({length} s, two format changes with a 1 s lead-in each) played in {took:.1f} s")
    vt.check("carry-card-keepalived-s", holders <= {kpid, None} and breaks <= 2,
             f"the card held by {sorted(name(h) for h in holders if h)} while MPD played its queue, "
             f"{breaks} close(s) of keepalived's seen (want at most two, one per format change)")
    vt.check("carry-each-track-s-rate", order[-2:] == ["44100", "48000"] and len(order) <= 3,
             f"the card's rate while MPD played 44.1 then 48 kHz: {' -> '.join(order)} (it ran at the last track's before)")
    running = sum(1 for h, s, _ in seen if h == kpid and s == "RUNNING")
    vt.check("carry-running", running >= len(seen) - 25, f"RUNNING and keepalived's in {running} of {len(seen)} looks (the reopen takes a few)")
    log = [l for l in vt.read(MPD_LOG, "").splitlines()[-400:] if "alsa" in l.lower() or "output" in l.lower() or "exception" in l.lower()]
    vt.note("MPD's log while carried: " + vt.one_line(" | ".join(log)[-1500:], 1500))
    shutil.copy(f"{MUSIC}/{TRACKS['c44'][0]}", os.path.join(vt.IO, "box-c44.wav"))
    sh("systemctl", "stop", "mpd.service", timeout=60)
    set_options(box.OUTPUTS)
