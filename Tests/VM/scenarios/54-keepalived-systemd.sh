#!/bin/sh
# vm: release=yes devices=hda power_save=1 mode=systemd timeout=300
# The system unit under a real systemd (PID 1), installed as systemd/README.md says (the unit in
# /etc/systemd/system, the binary in /usr/local/bin, the user from its sysusers file, the options file): without udev's rules
# /dev/snd is root:root 0600, and the service says `permission-denied` naming the node; once the
# nodes are the audio group's (what udev does) it plays on its own; from a root shell
# `keepalived status` finds it without --socket, and over the documented socket path; `stop`
# over the socket ends it cleanly.
. "$VM_GUEST/vmlib.sh"
K=/usr/local/bin/keepalived
SOCK=/run/keepalived-audio/control.sock
REPO=$(cd "$(dirname "$0")/../../.." && pwd)

install -m 0755 "$KEEPALIVED" $K
install -m 0644 "$REPO/systemd/keepalived-audio.service" /etc/systemd/system/keepalived-audio.service
# The service's user, as systemd/README.md installs it: not left to whatever the host's root has
# (a host that ran scripts/check-package has the user; a fresh one does not).
install -D -m 0644 "$REPO/systemd/keepalived-audio.sysusers" /etc/sysusers.d/keepalived-audio.conf
systemd-sysusers /etc/sysusers.d/keepalived-audio.conf
mkdir -p /etc/keepalived-audio
echo 'KEEPALIVED_OPTIONS="--device hw:0,0"' >/etc/keepalived-audio/keepalived-audio.conf
# What a box without udev's sound rules has.
chown root:root /dev/snd/*
chmod 0600 /dev/snd/*
systemctl daemon-reload

systemctl start keepalived-audio
active() { [ "$(systemctl is-active keepalived-audio)" = active ]; }
vm_wait 20 active
vm_check unit-active "systemctl is-active: $(systemctl is-active keepalived-audio) after $VM_WAITED s" active
denied() { $K status --json 2>/dev/null | grep -q '"reason":"permission-denied"'; }
if vm_wait 20 denied; then
    vm_ok permission-denied "$($K status | grep -E 'output|last error' | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
else
    vm_fail permission-denied "$($K status 2>&1 | tr '\n' ' ')"
fi
vm_check denied-names-node "the error names the node and the fix" sh -c "$K status | grep -q '/dev/snd/.*audio group'"
status_text=$(systemctl show -p StatusText --value keepalived-audio)
vm_check denied-status-text "StatusText=$status_text" sh -c "echo '$status_text' | grep -q permission-denied"

# What udev's rules do: the nodes become the audio group's. The daemon sees the change (inotify)
# and plays without a restart.
chgrp audio /dev/snd/*
chmod 0660 /dev/snd/*
playing() { $K status 2>/dev/null | grep -q '^state: playing'; }
vm_wait 10 playing
vm_check plays-after-udev "$VM_WAITED s after the nodes changed: $($K status 2>&1 | grep -E '^state|mode' | tr -s ' ' | tr '\n' ' ')" playing
status_text=$(systemctl show -p StatusText --value keepalived-audio)
vm_check status-text-playing "StatusText=$status_text" [ "$status_text" = "playing on hw:0,0" ]
pid=$(systemctl show -p MainPID --value keepalived-audio)
user=$(stat -c %U /proc/$pid)
vm_check dynamic-user "the service runs as $user (uid $(stat -c %u /proc/$pid)), groups: $(grep Groups /proc/$pid/status | tr -s '\t' ' ')" \
    sh -c "[ $(stat -c %u /proc/$pid) -ne 0 ] && grep -q 'Groups:.*29' /proc/$pid/status"

# From a root shell: the default socket is the service's, and so is the documented path.
out=$($K status); rc=$?
detail="exit $rc: $(echo "$out" | grep -E 'running|socket' | tr '\n' ' ')"
if [ $rc -eq 0 ] && echo "$out" | grep -q "^socket: $SOCK\$"; then vm_ok status-default-socket "$detail"; else vm_fail status-default-socket "$detail"; fi
$K status --socket $SOCK >/dev/null; rc=$?
vm_check status-documented-socket "keepalived status --socket $SOCK: exit $rc" [ $rc -eq 0 ]
out=$($K stop); rc=$?
vm_check stop-over-socket "exit $rc: $out" [ $rc -eq 0 ]
inactive() { [ "$(systemctl is-active keepalived-audio)" = inactive ]; }
vm_wait 10 inactive
vm_check unit-inactive-after-stop "systemctl is-active: $(systemctl is-active keepalived-audio) $VM_WAITED s after stop" inactive
$K status >/dev/null 2>&1; rc=$?
vm_check status-after-stop "keepalived status exits $rc (3: not running)" [ $rc -eq 3 ]
vm_check socket-gone "$SOCK removed" [ ! -e $SOCK ]
journalctl -u keepalived-audio --no-pager -o short-monotonic | tail -8 | sed 's/^/# /'
vm_finish
