#!/bin/sh
# vm: release=yes arch=arm64 devices=hda,usb power_save=1 mode=systemd root=debian suite=trixie service=hw:CARD=Intel,DEV=0;hw:CARD=Audio,DEV=0 timeout=900
# The same arm64 package as package-arm64 (built against Debian 12) on a minimal Debian 13 arm64
# root (Raspberry Pi OS Trixie's base: libasound2t64, which provides libasound2, and glibc 2.41)
# on Debian 13's arm64 kernel: it installs with apt from the root's own packages, comes up at boot
# playing on the HDA card and the USB audio device, answers `keepalived status`, reloads
# (`systemctl reload`, no procps in the root), hands each card to `aplay -D keepalived:…` and takes
# it back, and `apt-get purge` leaves nothing. Lighter than package-arm64 (BOX_FULL=no: no ring
# loop minute, no test tone): an emulated arm64 guest is the run's dearest, and what differs
# between the two releases is the install, the libraries loaded, the boot and the hand-off.
. "$VM_GUEST/vmlib.sh"
. "$VM_GUEST/bootlib.sh"
. "$VM_GUEST/boxlib.sh"
# package-arm64's bounds, for the same emulated CPU (see there).
BOX_CARD_BOUND=15
BOX_LOAN_BOUND=2
BOX_RELEASE_TIMEOUT=2000
BOX_FULL=no
box_scenario
