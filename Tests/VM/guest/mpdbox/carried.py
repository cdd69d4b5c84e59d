"""With `--carry --lead-in 1s`: MPD's tracks carried on keepalived's own running stream on the HDA card. The
card stays keepalived's and RUNNING through MPD's whole session but for the one reopen a format
change needs (44.1 to 48 kHz, between the queue's two tracks), the codec never sleeps (the
scenario's codec-never-slept spans this part), and the 44.1 kHz track's file goes to the host,
which finds it sample for sample in QEMU's capture (c44-carried-bit-perfect).

Then a carried player that holds the card open with digital zero between two bits of sound
(`carried_silence`): the box's activity follows the samples, not the open (issue 60 item 5)."""

import json
import os
import shutil
import struct
import subprocess
import time
import wave

import vmtest as vt
from mpdbox import (MPD_LOG, MUSIC, ROOT_ENV, TRACKS, card, holder, journal, mpc, mpc_state, name, output, rate, set_options,
                    sh, start_mpd, uptime)

SILENCE_HOOK = "/usr/local/bin/vm-silence-hook"


def queue_carried(box):
    kpid = box.kpid
    # A second of the signal in each new format before the music (--lead-in): the queue's two
    # format changes make it two seconds longer.
    rc = set_options(f"{box.DEVICES} --carry --lead-in 1s")
    w = vt.wait_until(lambda: holder() == kpid and vt.pcm_state(card) == "RUNNING", 20, 0.1)
    if not vt.check("carry-reloaded", rc == 0 and w, f"systemctl reload with --carry: exit {rc}; card held by {name(holder())}, {vt.pcm_state(card)}"):
        return
    box.pid, r, w = start_mpd()
    vt.check("carry-mpd-running", box.pid and w, f"systemctl start mpd: exit {r.returncode}, MainPID {box.pid}")
    mpc("-q", "clear")
    mpc("-q", "repeat", "off")
    mpc("-q", "add", TRACKS["c44"][0])
    mpc("-q", "add", TRACKS["b48"][0])
    # The guest standing still (TCG, the host busy with other work) while the emulated card plays
    # on drains keepalived's ring (0.25 to 0.5 s ahead while it carries) with nobody to refill it,
    # and the carried player is told of the underrun: kept apart from the program's own faults by
    # the stalls seen.
    stalls = vt.StallWatch()
    stalls.watching.set()
    t = time.monotonic()
    t_wall = time.time()
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
    stalls.watching.clear()
    stood = [(a, b) for a, b in stalls.between(t_wall, time.time()) if b - a >= 0.2]
    holders = {h for h, _, _ in seen}
    # The breaks a format change needs: keepalived's close and reopen in the player's rate, once
    # for the first track when the card ran another (the last track before was 48 kHz), once
    # between the two; mostly too short for a look every 20 ms to see.
    breaks = sum(1 for (a, _, _), (b, _, _) in zip(seen, seen[1:]) if a == kpid and b != kpid)
    rates = [r for _, _, r in seen if r]
    order = [r for i, r in enumerate(rates) if i == 0 or rates[i - 1] != r]
    underran = "Underrun on ALSA device" in vt.read(MPD_LOG, "")
    played = f"the queue ({length} s, two format changes with a 1 s lead-in each) played in {took:.1f} s"
    if took < length + 1.8 and underran and stood:
        vt.ok("carry-queue-played", f"{played}: MPD underran and stopped after the guest stood still "
              f"({vt.StallWatch.describe(stood)}) longer than keepalived's ring holds; excused")
    else:
        vt.check("carry-queue-played", length + 1.8 <= took < length + 15,
                 f"{played}; MPD underran: {underran}; the guest stood still: {vt.StallWatch.describe(stood)}")
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


def carried_silence(box):
    """aplay carried through `keepalived:` plays 1 s of sound, 8 s of digital zero, 1 s of sound,
    with `--on-idle-after 1s`: the output is active at the open, idle during the zeros while
    aplay still holds its PCM (status: carried, sending only silence), active again at the
    second sound, idle after the close; each from the hooks' own runs in the journal."""
    with open(SILENCE_HOOK, "w") as f:
        f.write('#!/bin/sh\nread up _ < /proc/uptime\necho "SILENCEHOOK $KEEPALIVED_EVENT $KEEPALIVED_PROGRAM $up"\n')
    os.chmod(SILENCE_HOOK, 0o755)
    rate_now = int(rate() or 48000)
    path = "/tmp/sound-zeros-sound.wav"
    with wave.open(path, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(rate_now)
        sound = b"".join(struct.pack("<hh", 1000 + n % 2000, -1000 - n % 2000) for n in range(rate_now))
        w.writeframes(sound + bytes(4 * 8 * rate_now) + sound)
    rc = set_options(f"-d {box.HW} --carry --on-active {SILENCE_HOOK} --on-idle {SILENCE_HOOK} --on-idle-after 1s")
    w = vt.wait_until(lambda: box.activity().get("state") == "idle", 15, 0.2)
    if not vt.check("silence-reloaded", rc == 0 and w, f"systemctl reload: exit {rc}; activity {box.activity()}"):
        return
    time.sleep(1.5)  # the reload's own idle, if any, has run

    def runs(since):
        lines = [l.split("SILENCEHOOK", 1)[1].split() for l in journal(form="cat") if "SILENCEHOOK" in l and "hook output" in l]
        return [(l[0], l[1], float(l[-1])) for l in lines if len(l) >= 3 and float(l[-1]) >= since]

    since = uptime()
    aplay = subprocess.Popen(["aplay", "-q", "-D", box.PLUGIN_DEV, path], stderr=subprocess.PIPE, env=ROOT_ENV, text=True)
    # Idle while aplay still holds its PCM: 1 s of sound, then 1 s of zero before it counts as
    # silence, then --on-idle-after 1s; the zeros last 8 s.
    idle = vt.wait_until(lambda: [r for r in runs(since) if r[0] == "idle"], 20, 0.5)
    held = aplay.poll() is None
    report = output(box.HW)
    vt.check("silence-carried-idle", bool(idle) and held and report.get("carrying") == "aplay" and report.get("carriedSilent") is True,
             f"hooks {runs(since)}; aplay {'still plays' if held else 'had ended'}; status carrying {report.get('carrying')!r}, "
             f"carriedSilent {report.get('carriedSilent')!r}, activity {report.get('activity')}")
    again = vt.wait_until(lambda: len([r for r in runs(since) if r[0] == "active"]) >= 2, 20, 0.5)
    try:
        aplay_rc = aplay.wait(timeout=30)
    except subprocess.TimeoutExpired:
        aplay.kill()
        aplay_rc = None
    last = vt.wait_until(lambda: (r := runs(since)) and r[-1][0] == "idle" and len(r) >= 4, 20, 0.5)
    seen = runs(since)
    order = [e for e, _, _ in seen]
    vt.check("silence-hooks-follow-sound", bool(again) and bool(last) and order == ["active", "idle", "active", "idle"]
             and all(p == "aplay" for _, p, _ in seen) and aplay_rc == 0,
             f"hook runs {[(e, p, round(t - since, 1)) for e, p, t in seen]} (want active, idle in the zeros, active, idle after); "
             f"aplay exit {aplay_rc} {vt.one_line(aplay.stderr.read() if aplay_rc is not None else '', 200)}")
    vt.note("carried_silence: " + json.dumps([(e, round(t - since, 2)) for e, _, t in seen]))
    set_options(box.OUTPUTS)
