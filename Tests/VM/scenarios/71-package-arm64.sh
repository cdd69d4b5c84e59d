#!/bin/sh
# vm: arch=arm64 devices=hda,usb power_save=1 hda_wav=yes usb_wav=yes mode=systemd root=debian suite=bookworm kernel=trixie service=hw:CARD=Intel,DEV=0;hw:CARD=Audio,DEV=0 timeout=900
# The arm64 package (scripts/package --arch arm64) on an emulated arm64 box, the kind most music
# boxes are (a Raspberry Pi with a 64-bit OS), on the oldest release it is for: a minimal Debian
# 12 arm64 root (Raspberry Pi OS Bookworm's base: glibc 2.36, libasound2 under its old name;
# mmdebstrap, its packages configured on this machine under qemu-user-static) with the package
# installed by `apt-get install ./keepalived-audio_*_arm64.deb` (the root holds its dependencies:
# apt resolves them offline), the options file naming both cards, the service enabled. QEMU's
# `virt` machine (TCG, a Cortex-A72) boots Debian 13's arm64 kernel (6.12, as Raspberry Pi OS
# Bookworm's own kernels are now; the rig's arm64 initramfs is made for it), with the same PCI
# sound devices as the amd64 guests (Intel HDA with its codec, a USB audio device on an xHCI
# controller); systemd as PID 1, udev loading snd-hda-intel and snd-usb-audio.
# The checks are package-trixie's (guest/boxlib.sh): at boot the service plays on the USB device
# and on HDA and answers `keepalived status`; `systemctl reload` reaches it (no procps in the
# root); the ring loop's wakeups over 30 s (the `ring_loop` line; against package-trixie's amd64
# one, both under TCG, as a ratio); `aplay -D keepalived:CARD=…,DEV=0` gets the hardware
# (owner_pid, hw_params) and keepalived takes it back in the player's format; `keepalived test
# --yes` sounds at its stated level in QEMU's captures; `apt-get purge` leaves nothing. Debian 13
# arm64 is package-arm64-trixie's, a lighter run of the same. Skipped when dist/ has no arm64
# package (scripts/test requires it: Tests/VM/run --require-package arm64=MARKER).
. "$VM_GUEST/vmlib.sh"
. "$VM_GUEST/bootlib.sh"
. "$VM_GUEST/boxlib.sh"
# The emulated Cortex-A72 runs the daemon, udev and alsactl several times slower than a Raspberry
# Pi does, and translates code as it first runs: beside other work udev took 6 s over the HDA
# card's node (playing came 7.5 s after the card, 1.2 s after the USB device's), and the boot's
# first release 223 ms inside the daemon, past the plug-in's 200 ms (aplay got "busy"). So the
# bounds in guest time are wider here, and the player gives the release 2 s with the plug-in's own
# knob for slow boxes (KEEPALIVED_RELEASE_TIMEOUT).
BOX_CARD_BOUND=15
BOX_LOAN_BOUND=2
BOX_RELEASE_TIMEOUT=2000
box_scenario
