#!/usr/bin/python3
# vm: devices=aloop mode=systemd options=snd_aloop:pcm_substreams=1 timeout=400
"""A carried player's bad days, on the link a receiver sees (issue 60): the hardware's semantics
(mmap, pause, a non-blocking player's poll) and nothing worse than the hardware when a player
or keepalived is stopped, reloaded or restarted, and a hundred hand-offs in a row.

The rig is link-handoff's: `snd-aloop` with `pcm_substreams=1` (device 0 exclusive like a real
card), its capture side (device 1) opened first and recorded whole (`io/link.raw`), the
package's service on `-d hw:CARD=Loopback,DEV=0 --carry` from the start. Every play is a ramp
of its own tag (Tests/VM/linkcapture.py: no zero frame, no frame repeated, each play's frames
told from every other's), so the host (77-carry-chaos.host.py) finds each play's frames on the
link, in what order, how often, and what lies between them. The cases, in order (`io/chaos.json`
lists each one's tags and what the host holds it to):

1. mmap: `aplay -M` carried.
2. pause: guest/carryclient.py pauses 1 s mid-play (snd_pcm_pause), blocking and non-blocking
   (poll() on the PCM's descriptors, the drain too); then mpv, a real player, paused and resumed
   through its IPC socket.
3. the player SIGSTOPped 1.5 s mid-play: keepalived's signal meanwhile, aplay reports an
   underrun and goes on; a second player meanwhile gets "busy" (the stopped one still holds the
   device, as a hardware open would).
4. keepalived SIGSTOPped 2 s mid-carry, once its ring (4 s) went round under the play: never a
   frame of the music twice (the card plays zero after the last frame written, then stops);
   keepalived repairs its stream and carries the player on, whose PCM reports an underrun
   that aplay recovers from, as on the hardware; the next play is carried.
5. `systemctl reload` mid-play (the package's ExecReload): the play goes on untouched.
6. `systemctl restart` mid-play: the player gets an error within 10 s; its next open (right
   after the restart returns) works, carried by the new process or handed the card.
7. a hundred carried plays of 0.15 s in a row, each its own open and close
   (carryclient.py --segments: one process, without a hundred programs' start-up under TCG),
   each with its own tag so that a segment played twice, out of place or cut is seen.
8. the same with a real player: a hundred aplay processes one after another, 0.15 s each (five
   30 ms periods: no padding), each its own tag.
9. and with Debian's MPD: a hundred tracks of 0.15 s, each played on its own (the only song in
   its queue: MPD closes its output when it stops), each its own tag.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import vmtest as vt
from carrylink import GAP, PLAYER_ENV, RATE, Link, aplay, carried, carried_opens, on_link, ramp_file, start, watch

sys.path.insert(0, os.path.join(os.environ["VM_REPO"], "Tests", "VM"))
import linkcapture as lc  # noqa: E402

from looplink import HW, MUSIC, PLUGIN, UNIT, holder, loop, show, start_mpd  # noqa: E402
CLIENT = os.path.join(os.environ["VM_GUEST"], "carryclient.py")
link = Link()
case = link.case


def client(tag, *args):
    return start([sys.executable, CLIENT, PLUGIN, f"/tmp/ramp-{tag}.raw", *args])


def result_of(out):
    """carryclient.py's JSON line ({} when there is none)."""
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    return {}


kpid = link.start(f"-d {HW} --carry")

# 1. mmap: aplay -M writes into the PCM's mapped buffer and commits; ioplug hands each commit to
# the plug-in's transfer.
frames = ramp_file(1, 1.5)
holders, out, took = watch(aplay(1, "-M"), 30)
vt.check("mmap-played", "error" not in out.lower() and took < 20, f"aplay -M: {took:.2f} s {vt.one_line(out, 200)}")
carried("mmap", holders, kpid, "aplay -M")
case("mmap", [1], frames, "exact", padding=True)
time.sleep(GAP)

# 2. pause and resume, blocking, then non-blocking with poll(): the frames queued at keepalived
# go back at the pause and come again at the resume (what the hardware does: paused, nothing plays).
for tag, name, extra in ((2, "pause", []), (3, "pause-nonblock", ["--nonblock"])):
    frames = ramp_file(tag, 2)
    holders, out, took = watch(client(tag, "--pause-at", str(RATE * 3 // 4), "--pause-for", "1.0", *extra), 40)
    res = result_of(out)
    pause = res.get("pause", {})
    vt.check(f"{name}-played", "error" not in res and res.get("frames") == frames and pause.get("rc") == [0, 0]
             and pause.get("state") == "PAUSED", f"carryclient.py {' '.join(extra)}: {took:.2f} s {vt.one_line(out, 300)}")
    carried(name, holders, kpid, "carryclient.py")
    case(name, [tag], frames, "split", signal_between=0.5, client=res)
    time.sleep(GAP)

# 2b. The same with a real player: mpv (its ALSA output pauses with snd_pcm_pause where the PCM
# can), paused through its IPC socket for 1 s once 0.75 s of the ramp has played (audio-pts),
# then resumed; unity (volume 100, no filters), the file's own rate and format.
frames = ramp_file(11, 3)
sock_path = "/tmp/mpv-chaos.sock"
player = start(["mpv", "--no-config", "--no-video", f"--input-ipc-server={sock_path}", "--ao=alsa", f"--audio-device=alsa/{PLUGIN}",
                "--volume=100", "--volume-max=100", "--af=", "--replaygain=no", "--audio-format=s16", f"--audio-samplerate={RATE}",
                "--msg-level=all=warn", "/tmp/ramp-11.wav"])
asked, holders, pts = {}, set(), None
ipc = socket.socket(socket.AF_UNIX)
ipc.settimeout(10)


def ipc_connected():
    # mpv's socket file exists from its bind, a moment before it listens (ECONNREFUSED meanwhile).
    try:
        ipc.connect(sock_path)
        return True
    except (FileNotFoundError, ConnectionRefusedError):
        return False


if vt.wait_until(lambda: player.poll() is not None or ipc_connected(), 30, 0.1) and player.poll() is None:
    replies = ipc.makefile("r")

    def mpv(*command):
        """mpv's reply to `command` (its IPC answers by request_id; events come between)."""
        ipc.sendall(json.dumps({"command": list(command), "request_id": 79}).encode() + b"\n")
        for line in replies:
            reply = json.loads(line)
            if reply.get("request_id") == 79:
                return reply
        return {}

    def playing_for(seconds):
        holders.add(holder())
        return (mpv("get_property", "audio-pts").get("data") or 0) >= seconds

    if vt.wait_until(lambda: playing_for(0.75), 30, 0.05):
        pts = mpv("get_property", "audio-pts").get("data")
        asked["pause"] = mpv("set_property", "pause", True).get("error")
        paused_at = time.monotonic()
        while time.monotonic() - paused_at < 1.0:
            holders.add(holder())
            time.sleep(0.05)
        asked["resume"] = mpv("set_property", "pause", False).get("error")
    ipc.close()
seen, out, took = watch(player, 30)
holders |= seen
vt.check("pause-mpv-played", player.returncode == 0 and asked == {"pause": "success", "resume": "success"},
         f"mpv: exit {player.returncode}, paused at audio-pts {pts}, {asked}; {vt.one_line(out, 200)}")
carried("pause-mpv", holders, kpid, "mpv")
case("pause-mpv", [11], frames, "split", signal_between=0.5, padding=True, aplay=vt.one_line(out, 200))
time.sleep(GAP)

# 3. The player stopped mid-play (SIGSTOP 1.5 s, longer than its 0.5 s buffer): keepalived's
# signal follows its last frame; continued, aplay finds an underrun, prepares and goes on. The
# stopped player still holds the device: a second one gets "busy".
frames = ramp_file(4, 3)
player = aplay(4)
second = {}


def carrying_aplay():
    """Whether keepalived says it carries aplay now (`status --json`)."""
    status = vt.keepalived_status("/usr/bin/keepalived", env=vt.ROOT_ENV) or {}
    return any(o.get("carrying") == "aplay" for o in status.get("outputs", []))


def stop_player(elapsed):
    # Stopped once it is carried: stopped before its carry request (an emulated aplay's start
    # can take most of a second), it would hold nothing, and the second one would be carried.
    if elapsed > 0.8 and "stopped" not in second and carrying_aplay():
        os.kill(player.pid, signal.SIGSTOP)
        second["stopped"] = time.monotonic()
        try:
            second["run"] = vt.run(["aplay", "-q", "-D", PLUGIN, "/tmp/ramp-1.wav"], timeout=30, env=PLAYER_ENV)
        finally:
            time.sleep(max(0.0, 1.5 - (time.monotonic() - second["stopped"])))
            os.kill(player.pid, signal.SIGCONT)


holders, out, took = watch(player, 40, during=stop_player)
vt.check("player-stopped-played", player.returncode == 0 and took < 30,
         f"aplay SIGSTOPped 1.5 s: exit {player.returncode} after {took:.2f} s: {vt.one_line(out, 200) or 'nothing said'}")
busy = second.get("run")
vt.check("player-stopped-second-busy", busy is not None and busy.returncode != 0 and "busy" in busy.stdout.lower(),
         f"a second aplay while the first was stopped: {busy and busy.returncode}: {busy and vt.one_line(busy.stdout, 200)}")
carried("player-stopped", holders, kpid, "the stopped aplay")
case("player-stopped", [4], frames, "split", padding=True, aplay=vt.one_line(out, 200))
time.sleep(GAP)

# 4. keepalived stopped mid-carry (SIGSTOP 2 s) once its ring went round under the play (what
# lies ahead of its write position is then the play's own older frames): its card stops when
# what it wrote has played (its stop threshold while carrying), never replays the ring.
# Continued, it repairs its stream and goes on carrying the player, whose PCM reports an
# underrun (as the hardware's would) that aplay recovers from ("underrun!!!"), playing on to its
# end; the next play is carried too. The play (ring + 3.5 s) is longer than a tag's frames
# (linkcapture: 5.4 s), so its ramp runs on into tag 6's: the next play is tag 10.
params = vt.hw_params(loop, 0, 0)
ring = int(params.get("buffer_size", RATE)) / RATE
vt.note(f"keepalived's stream: {vt.one_line(params, 300)}")
frames = ramp_file(5, ring + 3.5)
player = aplay(5)
stopped = {}


def stop_keepalived(elapsed):
    if elapsed > ring + 1.0 and "at" not in stopped:
        os.kill(kpid, signal.SIGSTOP)
        stopped["at"] = time.monotonic()
        try:
            stopped["state"] = vt.pcm_state(loop, 0, 0)
            time.sleep(2.0)
            stopped["state-after"] = vt.pcm_state(loop, 0, 0)
        finally:
            os.kill(kpid, signal.SIGCONT)
            stopped["continued"] = time.monotonic()


holders, out, took = watch(player, 60, during=stop_keepalived)
ended = time.monotonic() - stopped.get("continued", time.monotonic())
vt.note(f"keepalived SIGSTOPped 2 s while it carried aplay: the card {stopped.get('state')} at the stop, "
        f"{stopped.get('state-after')} 2 s later; aplay exit {player.returncode} {ended:.2f} s after the SIGCONT: {vt.one_line(out, 200) or 'nothing said'}")
vt.check("keepalived-stopped-player-ends", player.poll() is not None and took < 50, f"aplay ended {took:.2f} s after its start (exit {player.returncode})")
vt.check("keepalived-stopped-player-recovers", player.returncode == 0 and "underrun" in out,
         f"aplay exit {player.returncode}, its underrun recovered, as on the hardware: {vt.one_line(out, 200) or 'nothing said'}")
alive = show("MainPID") == str(kpid) and show("ActiveState") == "active"
vt.check("keepalived-stopped-recovers", alive and on_link(kpid, "keepalived-stopped-back-on-link"),
         f"keepalived {kpid} still the unit's process ({show('MainPID')}, {show('ActiveState')})")
case("keepalived-stopped", [5, 6], frames, "no-repeat", zeros_ok=True, padding=True, aplay=vt.one_line(out, 200), exit=player.returncode)
time.sleep(GAP)
frames = ramp_file(10, 1)
holders, out, took = watch(aplay(10), 30)
vt.check("after-stop-played", "error" not in out.lower(), f"aplay after keepalived's SIGCONT: {took:.2f} s {vt.one_line(out, 200)}")
carried("after-stop", holders, kpid, "aplay")
case("after-stop", [10], frames, "exact", padding=True)
time.sleep(GAP)

# 5. A reload mid-play (the package's ExecReload, SIGHUP; the options unchanged): never a break.
frames = ramp_file(7, 3)
player = aplay(7)
reload = {}


def reload_unit(elapsed):
    if elapsed > 1.0 and "r" not in reload:
        reload["r"] = vt.run(["systemctl", "reload", UNIT], timeout=30)


holders, out, took = watch(player, 30, during=reload_unit)
rr = reload.get("r")
vt.check("reload-played", player.returncode == 0 and rr is not None and rr.returncode == 0,
         f"systemctl reload 1 s into aplay: exit {rr and rr.returncode}; aplay exit {player.returncode} after {took:.2f} s {vt.one_line(out, 200)}")
carried("reload", holders, kpid, "aplay")
case("reload", [7], frames, "exact", padding=True)
time.sleep(GAP)

# 6. A restart mid-play: the old keepalived ends the player's stream ("No such device"); the
# player's next open, right after the restart returns, is carried by the new process or gets
# the card (the new one may not play yet).
frames = ramp_file(8, 3)
player = aplay(8)
restart = {}


def restart_unit(elapsed):
    if elapsed > 1.0 and "p" not in restart:
        restart["at"] = elapsed
        restart["p"] = subprocess.Popen(["systemctl", "restart", UNIT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


holders, out, took = watch(player, 30, during=restart_unit)
after = took - restart.get("at", 0)
try:
    restart_out, _ = restart["p"].communicate(timeout=60) if "p" in restart else ("", None)
except subprocess.TimeoutExpired:
    restart["p"].kill()
    restart_out, _ = restart["p"].communicate()
vt.check("restart-player-error", player.returncode not in (0, None) and "p" in restart and after < 10,
         f"aplay when keepalived restarted 1 s into it: exit {player.returncode} {after:.2f} s after the restart began "
         f"(systemctl restart: exit {restart['p'].returncode if 'p' in restart else None}): {vt.one_line(out, 200)}")
old, kpid = kpid, int(show("MainPID") or 0)
frames9 = ramp_file(9, 1)
holders, out9, took = watch(aplay(9), 30)
how = "carried by the new keepalived" if holders == {kpid} else f"held by {sorted(map(str, holders))} (keepalived {kpid})"
vt.check("restart-next-open", "error" not in out9.lower() and took < 20, f"aplay right after the restart: {took:.2f} s, {how}: {vt.one_line(out9, 200)}")
on_link(kpid, "restart-back-on-link")
case("restart", [8], frames, "no-repeat", zeros_ok=True, padding=True, aplay=vt.one_line(out, 200), exit=player.returncode)
case("after-restart", [9], frames9, "exact", zeros_ok=True, padding=True, how=how)
time.sleep(GAP)

# 7. A hundred hand-offs in a row: 0.15 s each, each its own open, tags 20..119.
SEGMENTS, SEGMENT = 100, int(RATE * 0.15)
with open("/tmp/segments.raw", "wb") as f:
    for i in range(SEGMENTS):
        f.write(lc.ramp(20 + i, SEGMENT))
holders, out, took = watch(start([sys.executable, CLIENT, PLUGIN, "/tmp/segments.raw", "--segments", str(SEGMENTS), "--deadline", "20"]), 240, every=0.1)
res = result_of(out)
vt.check("handoffs-played", "error" not in res and res.get("opens") == SEGMENTS and res.get("frames") == SEGMENTS * SEGMENT,
         f"carryclient.py --segments {SEGMENTS}: {took:.2f} s {vt.one_line(out, 300)}")
carried("handoffs", holders, kpid, "the hundred plays")
# One play may start up to 20 ms late (the host's judge says why; an open defect, counted).
case("handoffs", list(range(20, 20 + SEGMENTS)), SEGMENT, "exact", signal_between=True, client=res, late_start_ok=1)
time.sleep(GAP)

# 8. A hundred hand-offs of a real player: a hundred aplay processes one after another, each 0.15 s
# of its own ramp (five of its 30 ms periods, so it pads nothing), tags 120..219.
APLAYS = 100
for i in range(APLAYS):
    aplay_frames = ramp_file(120 + i, 0.15)
holders, failed, t = set(), [], time.monotonic()
for i in range(APLAYS):
    player = aplay(120 + i, "--period-size=1323", "--buffer-size=5292")
    seen, out, _ = watch(player, 30, every=0.05)
    holders |= seen
    if player.returncode != 0 or out.strip():
        failed.append(f"{i}: exit {player.returncode} {vt.one_line(out, 80)}")
took = time.monotonic() - t
vt.check("aplays-played", not failed, f"{APLAYS} aplay processes in {took:.1f} s; failed: {'; '.join(failed[:4]) or 'none'}")
carried("aplays", holders, kpid, "the hundred aplay processes")
case("aplays", list(range(120, 120 + APLAYS)), aplay_frames, "exact", signal_between=True, padding=True, late_start_ok=1)
time.sleep(GAP)

# 9. A hundred hand-offs of Debian's MPD: a hundred tracks of 0.15 s (tags 220..319), each played
# on its own as the only song in its queue (MPD closes its output when it stops), its output
# keepalived:, no conversion, 30 ms periods (each track five of them: MPD pads nothing). Not
# `single` on and `mpc play N` over a queue of all: MPD then went on into the next track now and
# then (30 ms after the last, as in a play list), and the next `mpc play` played that one again.
MPDS = 100
os.makedirs(MUSIC, exist_ok=True)
for i in range(MPDS):
    mpd_frames = ramp_file(220 + i, 0.15)
    shutil.copy(f"/tmp/ramp-{220 + i}.wav", f"{MUSIC}/seg{i:03d}.wav")
code, up = start_mpd('    buffer_time "150000"\n    period_time "30000"\n')


def mpd_play_only(name):
    """One command list over MPD's protocol: the queue emptied, `name` its only song, played."""
    with socket.create_connection(("localhost", 6600), timeout=10) as conn:
        mpd = conn.makefile("rwb")
        mpd.readline()  # OK MPD <version>
        mpd.write(f'command_list_begin\nclear\nadd "{name}"\nplay\ncommand_list_end\n'.encode())
        mpd.flush()
        return mpd.readline().decode(errors="replace").strip()


opens_before = carried_opens("mpd")
holders, failed, t = set(), [], time.monotonic()
for i in range(MPDS):
    reply = mpd_play_only(f"seg{i:03d}.wav")
    if reply != "OK":
        failed.append(f"{i}: MPD said {reply!r}")
    began = time.monotonic()
    while time.monotonic() - began < 20:
        holders.add(holder())
        status = vt.run(["mpc", "status"], timeout=30).stdout
        if "[playing]" not in status:
            break
        time.sleep(0.05)
    else:
        failed.append(f"{i}: still playing after 20 s")
took = time.monotonic() - t
mpd_log = vt.read("/var/log/mpd/mpd.log", "") or ""
errors = [line for line in mpd_log.splitlines() if "exception" in line or "Failed" in line or "rror" in line]
vt.check("mpd-handoffs-played", code == 0 and up and not failed and not errors,
         f"systemctl start mpd: exit {code}; {MPDS} tracks played one by one in {took:.1f} s; "
         f"not ended: {failed[:3] or 'none'}; MPD's errors: {vt.one_line(' | '.join(errors[-3:]), 300) or 'none'}")
carried("mpd-handoffs", holders, kpid, "MPD's hundred tracks")
opens = carried_opens("mpd") - opens_before
vt.check("mpd-handoffs-opens", opens >= MPDS, f"keepalived carried {opens} opens of MPD's for its {MPDS} tracks (one each: MPD closes its output when it stops)")
vt.run(["systemctl", "stop", "mpd.service"], timeout=60)
case("mpd-handoffs", list(range(220, 220 + MPDS)), mpd_frames, "exact", signal_between=True, padding=True, late_start_ok=1)
time.sleep(GAP)

link.finish(40)
