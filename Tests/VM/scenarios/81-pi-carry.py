#!/usr/bin/python3
# vm: devices=hda kmod=pi-standin chroot=trixie timeout=300
"""A player carried on keepalived's stream on a Raspberry Pi's HDMI (issue 60 item 3: "on
IEC958-only devices framed exactly as the player's own hw:/hdmi: open would be"), on the
stand-in card vc4hdmi0 (Tests/Fixtures/pi-standin: IEC958_SUBFRAME_LE only, a ring replayed for
ever, and a debugfs log of every frame it played).

keepalived plays `hw:CARD=vc4hdmi0,DEV=0` with `--carry`, framing its signal itself; aplay plays
through `keepalived:CARD=vc4hdmi0,DEV=0`, whose PCM frames the player's samples with alsa-lib's
own iec958 layer (as `hdmi:` does) and hands keepalived subframes. A first play at 48 kHz moves
keepalived's stream from its clip's 44.1 kHz to 48 kHz (the one break a format change needs);
then, each recorded from before its start to after its end: a 16-bit WAV and a 32-bit WAV (its
samples using all 24 bits the subframe carries) at 48 kHz, both carried on the running stream.

The host (81-pi-carry.host.py, with 75-pi-standin.host.py's decoder) checks that what the card
played is one stream (no reopen, no gap, no frame lost), every subframe valid IEC958 with the Z
preamble every 192 frames through keepalived's signal, the player's frames and back (the blocks
never broken at a hand-off), one channel status throughout (04 82 00 02 0B: 48 kHz, 24-bit
words), the WAV's samples found whole and exact, and keepalived's signal before and after them.

All of it twice: with Debian 12's alsa-lib (1.2.8) and, chrooted into debootstrap's trixie root
(`chroot=trixie`) over this guest's kernel, Debian 13's (1.2.14), whose iec958 layer frames the
player's samples then. Between the two, `--digital --carry` (no device named): the port is kept
awake on its hw: (without --carry, its hdmi:) and aplay is carried there.
"""

import glob
import os
import shutil
import struct
import subprocess
import time

import vmtest as vt

from pistandin import SOCKET, Capture, Daemon, card, load, params_line, sh, status, trixie_root

REPO = os.environ["VM_REPO"]
PLUGIN = "keepalived:CARD=vc4hdmi0,DEV=0"
SECONDS = 2


def wav(path, bits, seconds, rate=48000, root=None):
    """A stereo WAV whose samples are never zero and never repeat within it, each channel its own
    sequence; 32-bit samples fill the subframe's 24 bits (the lowest byte zero, which the
    subframe does not carry)."""
    n = rate * seconds
    if bits == 16:
        frames = b"".join(struct.pack("<hh", 1 + (i * 7919) % 20000 - 10000 or 1, -1 - (i * 104729) % 15000) for i in range(n))
    else:
        frames = b"".join(struct.pack("<ii", ((1 + (i * 7919) % 4_000_000) - 2_000_000 or 1) << 8, (-1 - (i * 104729) % 3_000_000) << 8)
                          for i in range(n))
    width = bits // 8
    header = (b"RIFF" + struct.pack("<I", 36 + len(frames)) + b"WAVEfmt "
              + struct.pack("<IHHIIHH", 16, 1, 2, rate, rate * 2 * width, 2 * width, bits) + b"data" + struct.pack("<I", len(frames)))
    with open((root or "") + path, "wb") as f:
        f.write(header + frames)
    shutil.copy((root or "") + path, os.path.join(vt.IO, os.path.basename(path)))


loaded, out = load()
if not vt.check("module-loads", loaded and card("vc4hdmi0") is not None, vt.one_line(out) or "insmod"):
    vt.finish()
V0 = card("vc4hdmi0")

# The package's plug-in and its configuration, as installed (this guest runs no dpkg database of its own).
arch = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE, text=True).stdout.strip()
debs = sorted(glob.glob(os.path.join(REPO, "dist", f"keepalived-audio_*_{arch}.deb")), key=os.path.getmtime)
r = sh("dpkg-deb", "-x", debs[-1], "/tmp/keepalived-deb") if debs else None
PLUGIN_SO = f"/usr/lib/{os.uname().machine}-linux-gnu/alsa-lib/libasound_module_pcm_keepalived.so"
CONF = "/usr/share/alsa/alsa.conf.d/50-keepalived.conf"
if not vt.check("plugin-unpacked", r is not None and r.returncode == 0 and os.path.exists("/tmp/keepalived-deb" + PLUGIN_SO),
                debs[-1] if debs else "no dist/*.deb: run scripts/package first"):
    vt.finish()
os.environ["KEEPALIVED_SOCKET"] = SOCKET
os.makedirs(os.path.dirname(SOCKET), exist_ok=True)


def carry(prefix="", root=None):
    """keepalived on vc4hdmi0's hw with --carry, and aplay carried through it: a first play that
    moves the stream to 48 kHz, then a 16-bit and a 32-bit WAV recorded whole."""
    for path in (PLUGIN_SO, CONF):
        os.makedirs((root or "") + os.path.dirname(path), exist_ok=True)
        shutil.copy("/tmp/keepalived-deb" + path, (root or "") + path)
    os.makedirs((root or "") + "/etc/alsa/conf.d", exist_ok=True)
    link = (root or "") + "/etc/alsa/conf.d/50-keepalived.conf"
    if not os.path.lexists(link):
        os.symlink(CONF, link)
    wav("/tmp/warm.wav", 16, 1, root=root)
    for bits in (16, 32):
        wav(f"/tmp/{prefix}carried-s{bits}.wav", bits, SECONDS, root=root)
    alsa = "1.2.14" if root else "1.2.8"

    d = Daemon("hw:CARD=vc4hdmi0,DEV=0", f"{prefix}carry", root=root, args=("--carry",))
    w = d.wait_playing(30)
    o = d.output()
    if not vt.check(f"{prefix}keepalived-plays", w and vt.hw_params(V0).get("format") == "IEC958_SUBFRAME_LE",
                    f"alsa-lib {alsa}: after {w.seconds:.1f} s: {o.get('state')} in {o.get('mode')}; {params_line(V0)} | {d.log(3)}"):
        d.stop()
        return

    def carried_now():
        return (d.output() or {}).get("carrying")

    # keepalived's clip is 44.1 kHz: the first 48 kHz player moves the stream to 48 kHz, once.
    r = sh("aplay", "-D", PLUGIN, "/tmp/warm.wav", timeout=60, root=root)
    back = vt.wait_until(lambda: d.output().get("state") == "playing" and not carried_now(), 10, 0.1)
    vt.check(f"{prefix}first-play-switches-format", r.returncode == 0 and back and vt.hw_params(V0).get("rate", "").startswith("48000"),
             f"aplay exit {r.returncode} {vt.one_line(r.stdout, 200)}; keepalived back on its own {bool(back)}; {params_line(V0)} | {d.log(3)}")

    for bits in (16, 32):
        name = f"{prefix}carried-s{bits}"
        streams = status("vc4hdmi0").get("streams")
        cap = Capture("vc4hdmi0", name, kind="iec958-carried", wav=f"{name}.wav", channels=2, rate=48000, bits=bits, alsa=alsa)
        time.sleep(0.5)  # keepalived's signal before
        player = subprocess.Popen((["chroot", root] if root else []) + ["aplay", "-D", PLUGIN, f"/tmp/{name}.wav"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen = vt.wait_until(lambda: carried_now() is not None or player.poll() is not None, 10, 0.05)
        carrying = carried_now()
        try:
            text, _ = player.communicate(timeout=SECONDS + 30)
        except subprocess.TimeoutExpired:
            player.kill()
            text, _ = player.communicate()
        time.sleep(0.7)  # and after
        cap.stop(aplay_rc=player.returncode)
        after = status("vc4hdmi0").get("streams")
        vt.check(f"{name}-carried", player.returncode == 0 and seen and carrying and "aplay" in str(carrying),
                 f"alsa-lib {alsa}: aplay exit {player.returncode} {vt.one_line(text, 200)}; keepalived said it carries {carrying!r}")
        vt.check(f"{name}-no-reopen", streams is not None and streams == after,
                 f"streams on the card {streams} -> {after} (a reopen starts one); {params_line(V0)}")
    d.stop()


carry()

# `--digital --carry` (as a box's options file would say it): the port on its hw:, where players
# are carried (without --carry, its hdmi:, alsa-lib's IEC958 layer, which carries none).
d = Daemon(None, "digital-carry", args=("--digital", "--carry"))
port = "hw:CARD=vc4hdmi0,DEV=0"


def port_output():
    return next((o for o in (d.status() or {}).get("outputs", []) if o.get("device") == port), {})


w = vt.wait_until(lambda: port_output().get("state") == "playing", 30, 0.5)
names = [o.get("device") for o in (d.status() or {}).get("outputs", [])]
vt.check("digital-carry-picks-hw", w, f"--digital --carry: outputs {names} after {w.seconds:.1f} s | {d.log(3)}")
if w:
    r = sh("aplay", "-D", PLUGIN, "/tmp/warm.wav", timeout=60)
    # From its log: the carried second (after the reopen in 48 kHz) is shorter than a `status`
    # round trip can be under emulation.
    carried = [line for line in (vt.read(d.log_path) or "").splitlines() if f"carrying a player device={port}" in line and "program=aplay" in line]
    vt.check("digital-carry-carries", r.returncode == 0 and carried,
             f"aplay exit {r.returncode} {vt.one_line(r.stdout, 160)}; keepalived's log: {vt.one_line(carried[-1] if carried else 'no carrying line', 200)}")
d.stop()

TRIXIE = os.environ.get("VM_CHROOT_TRIXIE")
if TRIXIE and os.path.isdir(TRIXIE):
    root = trixie_root(TRIXIE)
    if root:
        carry("trixie-", root=root)
else:
    vt.skip("trixie-root", "no VM_CHROOT_TRIXIE (chroot=trixie)")
vt.finish()
