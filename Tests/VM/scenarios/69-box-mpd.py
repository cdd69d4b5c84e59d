#!/usr/bin/python3
# vm: devices=hda,usb,aloop power_save=1 hda_wav=yes mode=systemd timeout=600
"""A headless music box: Debian's own MPD (the host's mpd package, run by its packaged
mpd.service as its system user `mpd`, group audio) plays bit-perfect through the package's ALSA
plugin (`keepalived:CARD=Intel,DEV=0`) on the kernel's HDA driver (snd-hda-intel power_save=1),
while the package's system service (keepalived-audio, installed with dpkg and enabled with
`-d hw:CARD=Intel,DEV=0 -d hw:CARD=Audio,DEV=0`, the HDA card and the USB audio device) keeps
the cards awake between tracks. MPD's output asks for the file's
own format (auto_resample, auto_format and auto_channels off, no mixer). Its music: a 44.1 kHz
WAV and a 48 kHz FLAC, 16-bit stereo sweeps made by sox. One boot:

- while each track plays: the card's hw_params are the file's rate in S16_LE, the substream's
  owner is MPD, `mpc status` says playing, `keepalived status --json` lists MPD (pid, program)
  in `loans`;
- the 44.1 kHz track reached the codec sample for sample (the host finds the whole file as one
  run in QEMU's WAV: 69-box-mpd.host.py);
- after the 44.1 kHz track ends and after `mpc stop` in the 48 kHz one, keepalived holds the card
  again within 1.25 s of MPD's close (its 250 ms reopen grace and 1 s) (takeback_ms=), in the last track's rate, with no loan left;
  keepalived's close to MPD's open is release_ms=;
- while MPD plays, `aplay -D keepalived:…` fails with "busy" as `aplay -D hw:…` does, MPD keeps
  the card and its loan stays the only one;
- MPD killed with SIGKILL mid-track: keepalived holds the card again within 1.25 s;
- the USB audio device (snd-usb-audio, 48 kHz only in QEMU): `aplay -D keepalived:CARD=Audio,DEV=0`
  of a 48 kHz file holds it in the file's format (aplay the owner, no "busy"), and keepalived has
  it back within 1.25 s of aplay's exit, in that format; the HDA card stays MPD's or keepalived's;
- MPD plays three tracks as one queue, the first skipped half a second in (`mpc next`): 44.1 kHz,
  44.1 kHz, 48 kHz; MPD closes and reopens the card for the 48 kHz one and keepalived, waiting
  its grace, never takes it in between, nor does MPD log "busy";
  with `--on-active`/`--on-idle` and `--on-idle-after 3s` (a reload): the queue is one active
  period (`status` says active, by mpd, while it plays): the hook runs once as it starts, with
  the card and device, and once 3 s after MPD's close (its output in the journal), and
  `keepalived events` prints the same two changes; with `--power-on-wait 5s` and an on-active
  hook that takes 1.5 s (an amplifier's relay and its warm-up), MPD's open waits for it: the
  hook starts within 1 s of keepalived hearing MPD's open, keepalived plays on the card until
  the hook has ended (its stream's, not MPD's, until then), and MPD's stream starts on the card
  (the kernel's trigger time) after the hook's end, within 1.5 s of it (the rest of the release
  and MPD's own start on the emulated CPU); the codec never sleeps meanwhile (below);
- a probe (aplay opening `keepalived:` and closing it before any hw_params) leaves keepalived's
  remembered format alone: it comes back at 48 kHz, the last track's rate, not its clip's 44.1;
- two devices of one card (snd-aloop's Loopback, devices 0 and 1, both kept awake): a player
  through `keepalived:CARD=Loopback,DEV=0` gets device 0 while device 1's stream never closes;
- the service configured with `default` (dmix on the card, as the shipped options file says),
  then `sysdefault:` and `front:` names: each output knows it plays on the card's device 0 (its
  handle's, in `status --json`), and MPD through `keepalived:` gets the card in the file's own
  format each time, and keepalived has it back after `mpc stop`;
- the codec never powered down while keepalived was running (power_off_acct unchanged);
- `--mqtt` to Debian's mosquitto on the guest's loopback (password file; docs/systemd.md's MQTT
  drop-in read from the page, the password a systemd credential): MPD through `keepalived:`
  makes the retained state active with mpd on the card, `mpc stop` idle after `--on-idle-after`
  (mpdbox/mqtt.py);
- `systemctl restart` in the middle of a 5 s power-on hold (an on-active hook of 4 s): MPD gets
  the card and plays (no "busy" in its log), the new keepalived has it back after `mpc stop`;
  the timings are printed as `restart_in_hold_ms=`;
- keepalived stopped: MPD plays through `keepalived:` as through `hw:` (the file's rate, MPD the
  owner);
- with `--carry --lead-in 1s`, MPD's queue of 44.1 and 48 kHz carried on keepalived's running
  stream (mpdbox/carried.py), and aplay carried while it sends 1 s of sound, 8 s of digital zero
  and 1 s of sound with `--on-idle-after 1s`: the hooks run active, idle in the zeros (aplay still
  holding its PCM, `status` saying it sends only silence), active, idle;
- every open MPD logged got `type=HW`: the plugin hands the player the card's own PCM; MPD's log
  has no "busy".

The hand-overs are timed by a thread that polls /proc/asound/…/sub0/status every 10 ms (the
owner's thread → its process), each from the last poll that saw one holder to the first that saw
the next (at most a poll longer than the real gap), and printed as `release_ms=` and
`takeback_ms=` lines.

The guest runs beside another (it ran alone until scripts/test put the host's builds at the
idle scheduling policy). keepalived answers a release on its control socket's own thread, as soon
as its output on the device is closed, and nothing else it does (a reload, a rescan) delays
that; but the plugin's wait for the answer is a bound in the guest's own time, and the emulated
CPU is tens of times slower than a Raspberry Pi's. Beside another guest, on two host cores also
running the sanitizer suites and builds that SwiftPM ran ahead of the guests, one release took
262 ms inside the daemon (its output was recovering from an underrun of the starved guest),
QEMU's capture lost a third of the 44.1 kHz track (a44-bit-perfect), and a take-back took
1.35 s; with the builds at the idle policy the releases took 10-116 ms. The players here (MPD's
unit, the scenario's aplay) get `KEEPALIVED_RELEASE_TIMEOUT=1000`, as docs/players.md advises for
a slow machine; each release's time is still printed (release_ms=, and keepalived's own ms= in
its journal, which io/keepalived-journal.txt keeps whole).

Each part is a module of Tests/VM/guest/mpdbox, named for what it proves (its docstring says
what); this file sets the box up and runs them in order, on one boot.

The drivers are loaded by the rig's stage 2 before systemd starts and MPD is the host's (installed
by `scripts/setup --test`); the boot order of a box (udev loading the driver while units start) is
package-boot's and package-late-card's.
"""

import os
import time

import vmtest as vt
from mpdbox import (CONF, MPD_LOG, MUSIC, TRACKS, UNIT, Box, card, holder, journal, mpc, name, names, params,
                    sh, show, start_mpd, usb)
from mpdbox import carried, devices, handovers, mqtt, plain, power, restart

box = Box()
vt.note(f"cards: {vt.one_line(vt.read('/proc/asound/cards', ''))}")
p = vt.codec_power(card)
if not vt.check("codec-power-counters", p is not None, f"/sys/class/sound/hwC{card}D0/power_*_acct: {p}"):
    vt.finish()

# -- the package: the daemon, its unit, the plugin and its configuration --------------------------
vt.install_package(timeout=180)
plugin = sh("sh", "-c", "dpkg -L keepalived-audio | grep -E 'libasound_module_pcm_keepalived.so$|alsa.conf.d/.*keepalived'").stdout.split()
# The plug-in, 50-keepalived.conf and its link, and the front door (60-keepalived-default.conf,
# shipped unlinked: this box's `default` stays the card's own).
if not vt.check("plugin-installed", len(plugin) == 4 and all(os.path.exists(x) for x in plugin), " ".join(plugin) or "no plugin in the package"):
    vt.finish()

# -- the music: sweeps, so every run of frames is the file's alone ---------------------------------
os.makedirs(f"{MUSIC}/box", exist_ok=True)
for track, (path, r, secs, synth) in TRACKS.items():
    res = sh("sox", "-R", "-D", "-n", "-r", str(r), "-b", "16", "-c", "2", "-e", "signed-integer",
             f"{MUSIC}/{path}", "synth", str(secs), *synth, "gain", "-9")
    if res.returncode != 0:
        vt.fail("music", f"sox {path}: {vt.one_line(res.stdout)}")
        vt.finish()
sh("chown", "-R", "mpd:audio", MUSIC)
vt.ok("music", ", ".join(f"{p} {r} Hz {s} s" for p, r, s, _ in TRACKS.values()))

# -- MPD, configured as on a box ----------------------------------------------------------------
with open("/etc/mpd.conf", "w") as f:
    f.write(f'''music_directory "{MUSIC}"
playlist_directory "/var/lib/mpd/playlists"
db_file "/var/lib/mpd/tag_cache"
log_file "{MPD_LOG}"
log_level "verbose"
user "mpd"
bind_to_address "localhost"
port "6600"
audio_output {{
    type "alsa"
    name "box"
    device "{box.PLUGIN_DEV}"
    auto_resample "no"
    auto_format "no"
    auto_channels "no"
    mixer_type "none"
    buffer_time "2000000"
}}
''')
# The emulated CPU is a slow machine: the plugin waits up to 1 s for keepalived (see above).
os.makedirs("/run/systemd/system/mpd.service.d", exist_ok=True)
with open("/run/systemd/system/mpd.service.d/release-timeout.conf", "w") as f:
    f.write("[Service]\nEnvironment=KEEPALIVED_RELEASE_TIMEOUT=1000\n")
sh("systemctl", "daemon-reload")
# Installed, never enabled (Debian enables neither unit); masked for the rest of this boot so that
# nothing but this scenario starts an MPD.
sh("systemctl", "mask", "--runtime", "mpd.socket")
sh("systemctl", "stop", "mpd.socket", "mpd.service")

# -- keepalived's service, ring-looping on the card ---------------------------------------------------
with open(CONF, "w") as f:
    f.write(f'KEEPALIVED_OPTIONS="{box.OUTPUTS}"\n')
r = sh("systemctl", "enable", "--now", UNIT, timeout=90)
w = vt.wait_until(lambda: show(UNIT, "StatusText").startswith("playing") and vt.pcm_state(card) == "RUNNING"
                  and vt.pcm_state(usb) == "RUNNING", 30)
box.kpid = int(show(UNIT, "MainPID") or 0)
names[box.kpid] = f"keepalived {box.kpid}"
errors = [l for l in journal(form="cat") if "error" in l]
if not vt.check("keepalived-playing", w and holder() == box.kpid,
                f"systemctl enable --now: exit {r.returncode}; {show(UNIT, 'StatusText')!r} after {w.seconds:.1f} s, "
                f"card held by {name(holder())} in {params()}" + (f"; the journal: {errors[-1]}" if errors else "")):
    vt.note(vt.one_line("\n".join(journal(form="cat"))[-600:], 600))
    vt.finish()
time.sleep(0.3)  # the power-up accounting settles once the stream runs
power0 = vt.codec_power(card)
box.timeline.start()

box.pid, r, w = start_mpd()
if not vt.check("mpd-running", box.pid and w, f"systemctl start mpd: exit {r.returncode}, MainPID {box.pid}, mpc answers after {w.seconds:.1f} s"):
    vt.note(vt.one_line("\n".join(journal("mpd", form="cat"))[-600:], 600))
    vt.finish()
proc = dict(l.split(":", 1) for l in vt.read(f"/proc/{box.pid}/status", "").splitlines() if ":" in l)
uid = sh("id", "-u", "mpd").stdout.strip()
vt.check("mpd-user", proc.get("Uid", "").split()[:1] == [uid] and "29" in proc.get("Groups", "").split() + proc.get("Gid", "").split()[:1],
         f"Uid {proc.get('Uid', '').split()}, Gid {proc.get('Gid', '').split()}, Groups {proc.get('Groups', '').split()} (mpd is {uid}, audio 29)")
r = mpc("-q", "update", "--wait")
listed = mpc("listall").stdout.split()
vt.check("mpd-database", sorted(listed) == sorted(t[0] for t in TRACKS.values()), f"mpc update: exit {r.returncode}; listall {listed}")

# -- the parts, in order ------------------------------------------------------------------------
handovers.track_to_its_end(box)
handovers.track_stopped_midway(box)
handovers.probe(box)
power.queue_of_two_rates(box)
handovers.second_player_then_kill(box)
devices.usb_lent_to_aplay(box)
devices.two_devices_of_one_card(box)
devices.outputs_named_by_alsa_names(box)
carried.queue_carried(box)
carried.carried_silence(box)

# -- the codec over all of it ---------------------------------------------------------------------------
power1 = vt.codec_power(card)
vt.check("codec-never-slept", power1[1] == power0[1],
         f"power_off_acct {power0[1]} -> {power1[1]} ms, power_on_acct {power0[0]} -> {power1[0]} ms over "
         f"{(power1[0] - power0[0]) / 1000:.0f} s of MPD and keepalived")

# -- keepalived's own account of each hand-over (its journal: how long the release and the
# take-back took inside the daemon, from the request to its reply and from the close seen to the
# reopen); the whole journal goes to the host's results directory (io/) ---------------------------
log = journal()
with open(os.path.join(vt.IO, "keepalived-journal.txt"), "w") as f:
    f.write("\n".join(log) + "\n")
vt.note("keepalived's hand-overs: " + vt.one_line(" | ".join(
    l for l in log if "card device" in l or "release" in l.lower())[-1500:], 1500))
said = [l for l in journal("mpd") if "keepalived" in l]
vt.note("what the plugin told MPD's stderr: " + (vt.one_line(" | ".join(said)[-800:], 800) if said else "nothing"))

mqtt.state_through_mqtt(box)
restart.restart_in_power_hold(box)
plain.without_keepalived(box)
plain.mpd_log(box)
box.timeline.done.set()
with box.timeline.lock:
    vt.note("card: " + ", ".join(f"{name(s[0])} {s[2] - s[1]:.2f} s" for s in box.timeline.spans)[-1500:])
vt.finish()
