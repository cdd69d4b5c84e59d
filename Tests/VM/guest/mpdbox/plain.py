"""With no keepalived the plug-in is only a `hw:`: MPD plays through `keepalived:` in the file's
own format and closes the card at `mpc stop`; and MPD's own log over the whole boot: every open
got `type=HW` (the card's own PCM, nothing in between), none says "busy"."""

import time

import vmtest as vt
from mpdbox import (MPD_LOG, UNIT, busy_lines, card, holder, mpc, mpc_state, name, params, play, rate, sh,
                    show, start_mpd)


def without_keepalived(box):
    sh("systemctl", "stop", UNIT, timeout=60)
    w = vt.wait_until(lambda: holder() is None, 15)
    vt.check("keepalived-stopped", w and show(UNIT, "ActiveState") == "inactive",
             f"{UNIT} {show(UNIT, 'ActiveState')}, card {name(holder())} {w.seconds:.2f} s after stop")
    box.kpid = None
    box.pid, r, w = start_mpd()
    pid = box.pid
    vt.check("mpd-restarted", pid and w, f"MainPID {pid}, mpc answers after {w.seconds:.1f} s")
    t = play("b48", repeat=True)
    w = vt.wait_until(lambda: holder() == pid and rate() == "48000" and vt.pcm_state(card) == "RUNNING", 15, 0.02)
    seen = time.monotonic() - t
    st = mpc_state()
    vt.check("without-keepalived-plays", w and st == "playing" and vt.hw_params(card).get("format") == "S16_LE",
             f"through {box.PLUGIN_DEV} with no daemon: card held by {name(holder())} {seen:.2f} s after `mpc play`, {params()}, mpc {st}")
    mpc("-q", "stop")
    w = vt.wait_until(lambda: holder() is None, 10, 0.02)
    vt.check("without-keepalived-closes", w, f"card {name(holder())} {w.seconds:.2f} s after `mpc stop`")
    sh("systemctl", "stop", "mpd.service", timeout=60)


def mpd_log(box):
    """What MPD got from the plugin is the card's own PCM (snd_pcm_type HW), as from `hw:`, but
    for the opens carried (--carry, mpdbox/carried.py: the plug-in's own, type IOPLUG)."""
    opened = [l.split("alsa_output: ", 1)[1].strip() for l in vt.read(MPD_LOG, "").splitlines() if "alsa_output: opened" in l]
    carried = [l for l in opened if l.endswith("type=IOPLUG")]
    vt.check("mpd-got-hw", len(opened) >= 4 and all(l.endswith("type=HW") for l in opened if l not in carried) and 1 <= len(carried) <= 3,
             f"{len(opened)} opens of {box.PLUGIN_DEV} in {MPD_LOG}, {len(carried)} of them carried (the queue of two rates): {sorted(set(opened))}")
    busy = busy_lines()
    vt.check("mpd-log-no-busy", not busy, f"{MPD_LOG}: {len(vt.read(MPD_LOG, '').splitlines())} lines, "
             + (vt.one_line(' | '.join(busy), 300) if busy else "none says busy"))
    vt.note("mpd.log: " + vt.one_line(" | ".join(l for l in vt.read(MPD_LOG, "").splitlines() if "alsa" in l.lower() or "output" in l.lower())[-1200:], 1200))
