#!/bin/sh
# vm: devices=hda mode=systemd timeout=180 manual=yes
# Rig self-test of the systemd mode: systemd is PID 1 over the same root, this script runs as
# the oneshot unit vm-test.service with its output on the serial line, and the guest powers off
# after it.  Reports how long the boot took.
. "$VM_GUEST/vmlib.sh"
comm=$(cat /proc/1/comm)
vm_check pid1-systemd "PID 1 is $comm" [ "$comm" = systemd ]
unit=$(systemctl show -p Id --value "$(cut -d: -f3 /proc/self/cgroup | sed 's|.*/||')" 2>/dev/null)
vm_check runs-as-unit "this script runs in $(cut -d: -f3 /proc/self/cgroup)" grep -q vm-test.service /proc/self/cgroup
st=$(systemctl is-active systemd-journald.service)
vm_check journald "systemd-journald is $st" [ "$st" = active ]
failed=$(systemctl list-units --state=failed --no-legend --plain | awk '{print $1}' | tr '\n' ' ')
vm_check no-failed-units "failed units: ${failed:-none}" [ -z "$failed" ]
vm_check card "/proc/asound/cards: $(head -1 /proc/asound/cards | tr -s ' ')" grep -q 'HDA Intel' /proc/asound/cards
if getent group audio >/dev/null && [ "$(stat -c %G /dev/snd/controlC0)" = audio ]; then
    vm_ok dev-snd-group "/dev/snd/controlC0 is $(stat -c '%U:%G %a' /dev/snd/controlC0) (udev)"
else
    vm_note "/dev/snd/controlC0 is $(stat -c '%U:%G %a' /dev/snd/controlC0): no udev on this machine, so no audio group"
fi
read -r up _ </proc/uptime
vm_ok boot-time "the test unit runs ${up} s after the kernel started (guest uptime)"
vm_finish
