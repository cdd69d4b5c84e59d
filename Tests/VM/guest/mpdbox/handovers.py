"""MPD and keepalived hand the HDA card to each other: MPD gets it in each file's own format
(released within BOUND) and keepalived has it back within GRACE_BOUND of MPD's close (the
track's end, `mpc stop`, a SIGKILL) in the last track's format; a probe (opened, closed, no
hw_params) leaves the remembered format alone; a second player gets "busy" as from `hw:`."""

import json
import os
import shutil
import signal
import time

import vmtest as vt
from mpdbox import (MUSIC, PLAYER_ENV, TRACKS, card, holder, journal, loans, mpc, mpc_state,
                    mpd_pid, name, params, play, rate, sh)


def track_to_its_end(box):
    """The 44.1 kHz track, to its end; its file goes to the host, which finds it sample for
    sample in QEMU's capture (69-box-mpd.host.py)."""
    t = play("a44")
    box.mpd_plays("a44", t, "a44", repeating=False)
    pid = box.pid
    w = vt.wait_until(lambda: holder() != pid, TRACKS["a44"][2] + 15, 0.02)
    closed = time.monotonic() - t
    st = mpc_state()
    vt.check("a44-ends", w and st == "stopped", f"MPD closed the card {closed:.1f} s after `mpc play` (the file is {TRACKS['a44'][2]} s); mpc {st}")
    box.taken_back("a44-end", 44100, t)
    shutil.copy(f"{MUSIC}/{TRACKS['a44'][0]}", os.path.join(vt.IO, "box-a44.wav"))


def track_stopped_midway(box):
    """The 48 kHz track, stopped midway."""
    t = play("b48", repeat=True)
    box.mpd_plays("b48", t, "b48")
    before_stop = mpc_state()
    t_stop = time.monotonic()
    mpc("-q", "stop")
    vt.check("b48-stopped-midway", before_stop == "playing", f"mpc {before_stop} when `mpc stop` ran {t_stop - t:.1f} s after `mpc play` (the track repeats)")
    box.taken_back("b48-stop", 48000, t_stop - 0.001)


def probe(box):
    """A probe: opened and closed with no hw_params; the remembered format stays."""
    def releases_for(program):
        return sum(1 for l in journal(form="cat") if "released a card device for a player" in l and f"player={program} " in l)

    before = releases_for("aplay")
    t = time.monotonic()
    r = vt.run(["aplay", "-q", "-D", box.PLUGIN_DEV, "/nonexistent/probe.wav"], timeout=30, env=PLAYER_ENV)
    vt.note(f"probe: aplay -D {box.PLUGIN_DEV} /nonexistent/probe.wav: exit {r.returncode}: {vt.one_line(r.stdout, 160)}")
    kpid = box.kpid
    w = vt.wait_until(lambda: holder() == kpid and rate() != "" and loans() == [], 10, 0.02)
    lent = releases_for("aplay") - before
    vt.check("probe-keeps-format", w and lent == 1 and rate() == "48000", f"the probe's releases: {lent}; after it: card held by "
             f"{name(holder())} in {params()} {time.monotonic() - t:.2f} s later; the last track was 48000 Hz (keepalived's own clip: 44100)")


def second_player_then_kill(box):
    """A second player while MPD plays gets "busy" (through the plug-in as through `hw:`) and no
    loan; then MPD killed mid-track: keepalived has the card back."""
    t = play("a44", repeat=True)
    pid = box.pid
    if box.mpd_plays("a44", t, "again"):
        aplays = {}
        for dev in (box.HW, box.PLUGIN_DEV):
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
            box.taken_back("kill", 44100, t_kill - 0.001)
        else:
            vt.fail("kill", f"the track ended before MPD could be killed mid-track ({time.monotonic() - t:.1f} s after `mpc play`; "
                    f"mpc {mpc_state()}, card {name(holder())})")
    vt.wait_until(lambda: mpd_pid() is None, 10)
