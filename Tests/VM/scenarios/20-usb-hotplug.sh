#!/bin/sh
# vm: devices=usb timeout=150 manual=yes
# Rig self-test: the QEMU USB audio card is there, goes away when the host unplugs it through
# the monitor (QMP device_del), and comes back on replug (device_add); a stream playing on it
# when it goes gets an error (what keepalived sees as -ENODEV).  Each step waited for with a
# deadline.
. "$VM_GUEST/vmlib.sh"
card=${VM_CARD_USB:-0}

usb_present() { grep -q 'USB Audio' /proc/asound/cards; }
usb_absent() { ! usb_present; }

if usb_present; then
    vm_ok card-present "$(grep -A1 "^ *$card " /proc/asound/cards | tr -s ' ' | tr '\n' ' ')"
else
    vm_fail card-present "no USB Audio in /proc/asound/cards: $(cat /proc/asound/cards)"
    vm_finish
fi

# A stream playing on it (large buffer so the guest's scheduling does not matter).
aplay -q -D "plughw:$card,0" -f S16_LE -r 48000 -c 2 --buffer-time=1000000 /dev/zero >/tmp/aplay.out 2>&1 &
apid=$!
state() { grep -q "state: RUNNING" "/proc/asound/card$card/pcm0p/sub0/status" 2>/dev/null; }
if vm_wait 10 state; then
    vm_ok stream-running "aplay plughw:$card,0 RUNNING after $VM_WAITED s"
else
    vm_fail stream-running "aplay did not reach RUNNING: $(cat /tmp/aplay.out)"
fi

t=$(vm_host unplug usbaudio) || vm_fail unplug "host: $t"
if vm_wait 15 usb_absent; then
    vm_ok card-gone "card gone from /proc/asound/cards $VM_WAITED s after device_del returned"
else
    vm_fail card-gone "still there 15 s after unplug: $(cat /proc/asound/cards)"
fi
aplay_gone() { ! kill -0 "$apid" 2>/dev/null; }
if vm_wait 10 aplay_gone; then
    wait "$apid"; rc=$?
    msg=$(tr '\n' ' ' </tmp/aplay.out)
    if [ "$rc" -ne 0 ]; then
        vm_ok stream-error "aplay exited $rc $VM_WAITED s later: $msg"
    else
        vm_fail stream-error "aplay exited 0 after the unplug: $msg"
    fi
else
    kill "$apid"
    vm_fail stream-error "aplay still running 10 s after the unplug"
fi

t=$(vm_host replug usbaudio) || vm_fail replug "host: $t"
if vm_wait 20 usb_present; then
    vm_ok card-back "card back $VM_WAITED s after device_add: $(grep 'USB Audio' /proc/asound/cards | tr -s ' ')"
else
    vm_fail card-back "not back 20 s after replug: $(cat /proc/asound/cards)"
fi
pcm_ready() { [ -e "/proc/asound/card$card/pcm0p/info" ] && [ -e /dev/snd/pcmC${card}D0p ]; }
if vm_wait 10 pcm_ready && aplay -q -D "plughw:$card,0" -f S16_LE -r 48000 -c 2 -d 1 /dev/zero 2>/tmp/aplay2.out; then
    vm_ok replugged-plays "aplay plays 1 s on the replugged card"
else
    vm_fail replugged-plays "$(cat /tmp/aplay2.out)"
fi
vm_finish
