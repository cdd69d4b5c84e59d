#!/bin/sh
# vm: devices=hda s3=yes timeout=240 manual=yes
# Rig self-test: system suspend/resume paths that work in QEMU/TCG, each proven by an ALSA
# stream (aplay on hw:C,0) seeing it: aplay prints "Suspended. Trying resume." when a write
# returns -ESTRPIPE, then restarts the stream.
#   pm-test-devices  pm_test=devices: the drivers' real suspend and resume callbacks run, the
#                    kernel comes back by itself after pm_test_delay (5 s) without sleeping
#   s3-host-wakeup   real S3 (mem_sleep=deep; QEMU PIIX4 S3 enabled, bzImage boot), woken by
#                    the host's QMP system_wakeup 2 s after QEMU reports SUSPEND
#   s3-rtc-wakeup    real S3 woken by the RTC alarm (/sys/class/rtc/rtc0/wakealarm, +3 s); the
#                    host would wake it after 20 s if the alarm did not
# The 9p root does not survive a resume (see Tests/VM/guest/ramroot), so everything after the
# host requests runs from a RAM root.
if [ "$1" != --inner ]; then
    . "$VM_GUEST/vmlib.sh"
    # all host requests before the first suspend: the io share dies with it
    out=$(vm_host wake-on-suspend 2 20) || { vm_fail arm "host: $out"; vm_finish; }
    exec "$VM_GUEST/ramroot" -p aplay -p "$0" -- /bin/sh "$0" --inner
fi

. "$VM_GUEST/vmlib.sh"
card=${VM_CARD_HDA:-0}
st=/proc/asound/card$card/pcm0p/sub0/status
state() { sed -n 's/^state: //p' $st 2>/dev/null; }
running() { [ "$(state)" = RUNNING ]; }
suspended_count() { grep -c 'Suspended' /tmp/aplay.out 2>/dev/null; }
up() { cut -d' ' -f1 /proc/uptime; }
secs() { awk "BEGIN { printf \"%.2f\", $2 - $1 }"; }

aplay -D "hw:$card,0" -f S16_LE -r 44100 -c 2 --buffer-time=2000000 --period-time=500000 /dev/zero \
    >/tmp/aplay.out 2>&1 &
apid=$!
if vm_wait 10 running; then
    vm_ok stream-running "aplay hw:$card,0 RUNNING after $VM_WAITED s"
else
    vm_fail stream-running "$(cat /tmp/aplay.out)"
    vm_finish
fi

# one suspend: $1 name, $2 what to write to /sys/power/state, $3 description
suspend_once() {
    name=$1
    n0=$(suspended_count)
    u0=$(up)
    echo "$2" >/sys/power/state
    rc=$?
    u1=$(up)
    if [ $rc -ne 0 ]; then
        vm_fail "$name" "echo $2 >/sys/power/state failed ($rc)"
        return
    fi
    seen_suspend() { [ "$(suspended_count)" -gt "$n0" ]; }
    if vm_wait 15 seen_suspend && vm_wait 10 running; then
        vm_ok "$name" "$3: back after $(secs "$u0" "$u1") s (guest uptime, which counts the time suspended); aplay: $(grep Suspended /tmp/aplay.out | tail -1); state $(state)"
    else
        vm_fail "$name" "$3: aplay saw no suspend or did not run again: $(tr '\n' ' ' </tmp/aplay.out); state $(state)"
    fi
}

echo devices >/sys/power/pm_test
suspend_once pm-test-devices mem "pm_test=devices, $(cat /sys/module/suspend/parameters/pm_test_delay) s delay"
echo none >/sys/power/pm_test

if grep -q deep /sys/power/mem_sleep; then
    echo deep >/sys/power/mem_sleep
    suspend_once s3-host-wakeup mem "S3, QMP system_wakeup after 2 s"
    echo 0 >/sys/class/rtc/rtc0/wakealarm
    echo +3 >/sys/class/rtc/rtc0/wakealarm
    suspend_once s3-rtc-wakeup mem "S3, RTC alarm at +3 s (host fallback at 20 s)"
else
    vm_skip s3-host-wakeup "no deep in /sys/power/mem_sleep: $(cat /sys/power/mem_sleep)"
    vm_skip s3-rtc-wakeup "no deep in /sys/power/mem_sleep"
fi
kill $apid 2>/dev/null
dmesg | grep -E 'PM: (suspend|resume)|ACPI: PM: (Preparing|Waking)|suspend debug' | sed 's/^/# /'
vm_finish
