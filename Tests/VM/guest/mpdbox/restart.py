"""A restart in the middle of a power-on hold: keepalived stops its outputs before it answers the
held player and closes its control socket (DaemonRuntime.stop), so the player's open goes on to a
free card: MPD plays, with no "busy"; the new keepalived finds the card MPD's, says so without a
warning (issue 58, item 17: `status` names the holder), and takes it back after `mpc stop`."""

import os
import re
import subprocess
import time

import vmtest as vt
from mpdbox import (UNIT, busy_lines, card, holder, journal, mpc, mpc_state, name, names, output, params,
                    play, set_options, sh, show, stamp, start_mpd, tgid, uptime)

SLOW_HOOK = "/usr/local/bin/vm-slow-hook"


def restart_in_power_hold(box):
    with open(SLOW_HOOK, "w") as f:
        f.write('#!/bin/sh\n[ "$KEEPALIVED_EVENT" = active ] || exit 0\nsleep 4\n')
    os.chmod(SLOW_HOOK, 0o755)
    rc = set_options(f"-d {box.HW} --no-carry --on-active {SLOW_HOOK} --on-idle-after 1s --power-on-wait 5s")
    kpid = box.kpid
    w = vt.wait_until(lambda: holder() == kpid and box.activity().get("state") in ("idle", None), 15, 0.2)
    box.pid, _, up = start_mpd()
    pid = box.pid
    if vt.check("restart-hold-ready", rc == 0 and w and pid and up,
                f"reload exit {rc}; card held by {name(holder())}, activity {box.activity()}; MPD {pid}"):
        since = uptime()
        t = play("a44", repeat=True)

        def held_now():
            return [l for l in journal() if "a player waits while the power comes on" in l and (stamp(l) or 0) >= since]

        held = vt.wait_until(held_now, 15, 0.1)
        # The restart in the background: `systemctl restart` returns once the new keepalived is up
        # (Type=notify), and MPD's open is to be seen while that goes on.
        t_restart = time.monotonic()
        restart = subprocess.Popen(["systemctl", "restart", UNIT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        got = vt.wait_until(lambda: holder() == pid and vt.pcm_state(card) == "RUNNING", 20, 0.02)
        t_mpd = time.monotonic() - t_restart
        out, _ = restart.communicate(timeout=90)
        restarted = time.monotonic() - t_restart
        new_kpid = int(show(UNIT, "MainPID") or 0)
        names[new_kpid] = f"keepalived {new_kpid} (restarted)"
        plugin_said = [l for l in journal("mpd", form="cat") if "keepalived" in l]
        vt.note(f"restart_in_hold_ms= play_to_hold_seen={1000 * (t_restart - t):.0f} "
                f"restart_took={1000 * restarted:.0f} restart_to_mpd_on_card={1000 * t_mpd:.0f}")
        vt.check("restart-in-hold-mpd-plays", held and restart.returncode == 0 and got and mpc_state() == "playing" and not busy_lines(),
                 f"the hold seen {held.seconds if held else None} s after `mpc play`; systemctl restart: exit {restart.returncode} in {restarted:.1f} s; "
                 f"MPD on the card {t_mpd:.2f} s after the restart began ({params()}), mpc {mpc_state()}; busy: {busy_lines()[-1:] or 'none'}; "
                 f"the plug-in told MPD: {vt.one_line(' | '.join(plugin_said[-2:]), 240) or 'nothing'}")
        with open(os.path.join(vt.IO, "restart-in-hold-journal.txt"), "w") as f:
            f.write("\n".join(journal(UNIT, "mpd")) + "\n")
        # The new keepalived found the card MPD's: the box's normal state, not a fault: no line of
        # priority warning or worse from it, and status names the holder. The service sees no
        # other user's process (ProtectProc=invisible): MPD is named by the thread that opened
        # the card, which must be one of MPD's.
        out_hw = output(box.HW)
        warned = sh("journalctl", "-u", UNIT, "--no-pager", "-o", "cat", "-p", "warning", f"_PID={new_kpid}").stdout.strip()
        held_by = [int(m.group(1)) for h in out_hw.get("heldBy") or []
                   for m in [re.match(rf"thread (\d+) of a process hidden from keepalived on card {card}$", h)] if m]
        vt.check("restart-in-hold-no-warning",
                 not warned and out_hw.get("reason") == "busy" and held_by and all(tgid(t) == pid for t in held_by),
                 f"the new keepalived's lines at warning or worse: {vt.one_line(warned, 240) or 'none'}; {box.HW}: {out_hw.get('state')} "
                 f"({out_hw.get('reason')}), held by {out_hw.get('heldBy')}")
        box.kpid = new_kpid
        mpc("-q", "stop")
        w = vt.wait_until(lambda: holder() == new_kpid, 20, 0.05)
        vt.check("restart-in-hold-taken-back", w, f"after `mpc stop`: card held by {name(holder())} ({w.seconds:.1f} s)")
    sh("systemctl", "stop", "mpd.service", timeout=60)
    set_options(box.OUTPUTS)
