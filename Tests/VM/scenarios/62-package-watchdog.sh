#!/bin/sh
# vm: release=yes devices=hda mode=systemd timeout=360
# The installed unit's watchdog under a real systemd: a daemon whose playback stops reporting
# (here the whole process, SIGSTOPped) sends no WATCHDOG=1, and systemd kills and restarts it
# after WatchdogSec (60 s): SIGABRT, which a stopped process only takes as the SIGKILL that
# follows TimeoutAbortSec (= TimeoutStopSec, 15 s), then RestartSec (5 s); the new process plays.
. "$VM_GUEST/vmlib.sh"
UNIT=keepalived-audio.service
# This machine's architecture: dist/ may also hold a package built for another.
deb=$(ls -t "$VM_REPO"/dist/keepalived-audio_*_$(dpkg --print-architecture).deb 2>/dev/null | head -1)
if [ -z "$deb" ]; then vm_fail package-built "no dist/keepalived-audio_*_$(dpkg --print-architecture).deb: run scripts/package first"; vm_finish; fi
rm -f /usr/sbin/policy-rc.d /var/lib/man-db/auto-update
dpkg -i "$deb" >/dev/null 2>&1 || { vm_fail install "dpkg -i $deb failed"; vm_finish; }
udevadm settle --timeout=60
device="hw:CARD=$(cat /proc/asound/card${VM_CARD_HDA:-0}/id),DEV=0"
echo "KEEPALIVED_OPTIONS=\"--device $device\"" >/etc/keepalived-audio/keepalived-audio.conf
systemctl start $UNIT
playing() { [ "$(systemctl show -p StatusText --value $UNIT)" = "playing on $device" ]; }
vm_wait 20 playing
pid=$(systemctl show -p MainPID --value $UNIT)
text=$(systemctl show -p StatusText --value $UNIT)
watchdog=$(systemctl show -p WatchdogUSec --value $UNIT)
vm_check playing "pid $pid: $text, WatchdogUSec=$watchdog" [ "$text" = "playing on $device" -a "$watchdog" = 1min ]

kill -STOP "$pid"
restarted() {
    new=$(systemctl show -p MainPID --value $UNIT)
    [ "$new" != "$pid" ] && [ "$new" != 0 ] && playing
}
# Nothing can happen before WatchdogSec: a wait polled from the start spent the guest's CPU (each
# look starts systemctl twice) on a minute in which only the watchdog's clock runs.
sleep 55
vm_wait 95 restarted
VM_WAITED=$(awk -v w="$VM_WAITED" 'BEGIN { printf "%.2f", w + 55 }')
restarts=$(systemctl show -p NRestarts --value $UNIT)
vm_check restarted-by-watchdog "$VM_WAITED s after SIGSTOP: MainPID $pid -> $(systemctl show -p MainPID --value $UNIT), NRestarts=$restarts, $(systemctl show -p StatusText --value $UNIT)" \
    sh -c "[ $restarts -ge 1 ] && [ \"\$(systemctl show -p MainPID --value $UNIT)\" != $pid ]"
vm_check old-process-gone "pid $pid $( [ -d /proc/$pid ] && echo 'still exists' || echo gone)" [ ! -d /proc/$pid ]
line=$(journalctl -u $UNIT --no-pager -o cat | grep -m1 -i 'watchdog timeout')
vm_check journal-watchdog "systemd: ${line:-no watchdog line}" [ -n "$line" ]
systemctl stop $UNIT
vm_finish
