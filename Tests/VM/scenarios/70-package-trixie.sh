#!/bin/sh
# vm: release=yes devices=hda,usb power_save=1 hda_wav=yes usb_wav=yes mode=systemd root=debian suite=trixie service=hw:CARD=Intel,DEV=0;hw:CARD=Audio,DEV=0 timeout=600
# The amd64 package on a minimal Debian 13 box: debootstrap minbase of trixie (systemd-sysv,
# udev, dbus, kmod, and what the package depends on and recommends, libasound2t64 and polkitd,
# plus alsa-utils), `apt-get install ./keepalived-audio_*_amd64.deb` (apt finds its dependencies in
# the root: the package built on Debian 12 installs on 13), the options file naming the HDA card
# and the USB audio device, the service enabled; booted on Debian 13's own kernel with systemd as
# PID 1 and udev loading the drivers. The checks (guest/boxlib.sh, the same as package-arm64's):
# the service plays on both at boot and answers `keepalived status`; a minute of the ring loop
# wakes it at most 0.1 times a second (its figures are this scenario's `ring_loop` line, the
# amd64 side of package-arm64's ratio) with the codec never asleep; `aplay -D keepalived:…` gets
# each card in its own format and keepalived takes it back within 1 s in that format;
# `keepalived test --yes` sounds on both at its stated level (the host finds the tone in QEMU's
# captures); `apt-get purge` stops the service and leaves nothing of the package.
. "$VM_GUEST/vmlib.sh"
. "$VM_GUEST/bootlib.sh"
. "$VM_GUEST/boxlib.sh"
# The boot's first release is code TCG translates as it runs: beside other guests and builds it
# took 225 ms inside the daemon, past the plug-in's 200 ms (box-mpd gives its players 1 s too, and
# prints each); here the player gives it 1 s with the plug-in's knob, and the daemon's own time for each
# hand-over is printed.
BOX_RELEASE_TIMEOUT=1000
# Beside package-arm64 on two busy cores the HDA card played 1.87 s after udev made its node:
# package-boot holds the 2 s bound of a box's boot; this one and package-late-card allow 3.
BOX_CARD_BOUND=3
box_scenario
