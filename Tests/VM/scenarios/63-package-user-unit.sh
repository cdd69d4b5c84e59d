#!/bin/sh
# vm: devices=hda mode=systemd timeout=300
# The package's user unit under `systemd --user` for a user whose manager logind started
# (`loginctl enable-linger`, as at a login), on the HDA card directly (no sound server in the
# guest; the user is in the audio group): it plays as that user, `keepalived status` finds it on
# the user's default socket, the journal has its lines, and `systemctl --user stop` ends it.
. "$VM_GUEST/vmlib.sh"
# This machine's architecture: dist/ may also hold a package built for another.
deb=$(ls -t "$VM_REPO"/dist/keepalived-audio_*_$(dpkg --print-architecture).deb 2>/dev/null | head -1)
if [ -z "$deb" ]; then vm_fail package-built "no dist/keepalived-audio_*_$(dpkg --print-architecture).deb: run scripts/package first"; vm_finish; fi
rm -f /usr/sbin/policy-rc.d /var/lib/man-db/auto-update
dpkg -i "$deb" >/dev/null 2>&1 || { vm_fail install "dpkg -i $deb failed"; vm_finish; }
udevadm settle --timeout=60
useradd -m -G audio kaudio
uid=$(id -u kaudio)
export XDG_RUNTIME_DIR=/run/user/$uid
as_user() { runuser -u kaudio -- env XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR HOME=/home/kaudio "$@"; }

loginctl enable-linger kaudio; rc=$?
manager() { [ "$(systemctl is-active user@$uid.service)" = active ] && [ -S $XDG_RUNTIME_DIR/systemd/private ]; }
vm_wait 60 manager
vm_check user-manager "loginctl enable-linger: exit $rc; user@$uid.service $(systemctl is-active user@$uid.service) after $VM_WAITED s" manager

# No sound server for this user, as this scenario means: this root enables PipeWire's and
# PulseAudio's user sockets side by side (no real box has both), and a running WirePlumber
# reserves the card (org.freedesktop.ReserveDevice1), which keepalived then leaves to it.
servers="wireplumber.service pipewire.service pipewire.socket pulseaudio.service pulseaudio.socket"
as_user systemctl --user stop $servers 2>/dev/null
as_user systemctl --user mask $servers >/dev/null 2>&1

device="hw:CARD=$(cat /proc/asound/card${VM_CARD_HDA:-0}/id),DEV=0"
as_user mkdir -p /home/kaudio/.config/keepalived
echo "KEEPALIVED_OPTIONS=\"--device $device\"" | as_user tee /home/kaudio/.config/keepalived/keepalived.conf >/dev/null
as_user systemctl --user start keepalived.service; rc=$?
playing() { [ "$(as_user systemctl --user show -p StatusText --value keepalived.service)" = "playing on $device" ]; }
vm_wait 20 playing
vm_check user-unit-plays "systemctl --user start: exit $rc; $(as_user systemctl --user show -p ActiveState -p SubState -p StatusText keepalived.service | tr '\n' ' ')" playing
pid=$(as_user systemctl --user show -p MainPID --value keepalived.service)
vm_check runs-as-user "pid $pid runs as $(stat -c %U /proc/$pid 2>&1), PCM $(grep -h state /proc/asound/card0/pcm0p/sub0/status 2>&1 | tr -s ' ')" \
    sh -c "[ \$(stat -c %u /proc/$pid) = $uid ] && grep -q RUNNING /proc/asound/card0/pcm0p/sub0/status"
out=$(as_user keepalived status 2>&1); rc=$?
vm_check user-status-default-socket "keepalived status as kaudio: exit $rc, $(echo "$out" | grep '^socket')" \
    sh -c "[ $rc -eq 0 ] && echo '$out' | grep -q '^socket: $XDG_RUNTIME_DIR/keepalived/control.sock\$'"
line=$(journalctl _SYSTEMD_USER_UNIT=keepalived.service _UID=$uid -o json --no-pager | grep -m1 '"MESSAGE":"playing')
vm_check user-journal "$(echo "$line" | grep -o '"PRIORITY":"[0-9]"') $(echo "$line" | grep -o '"MESSAGE":"[^"]*"')" \
    sh -c "echo '$line' | grep -q '\"PRIORITY\":\"6\"'"
as_user systemctl --user stop keepalived.service; rc=$?
vm_check user-unit-stops "systemctl --user stop: exit $rc; $(as_user systemctl --user is-active keepalived.service), PCM $(cat /proc/asound/card0/pcm0p/sub0/status)" \
    sh -c "[ $rc -eq 0 ] && [ ! -d /proc/$pid ] && grep -q closed /proc/asound/card0/pcm0p/sub0/status"
vm_finish
