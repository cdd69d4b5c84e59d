#!/bin/sh
# vm: devices=hda,usb,aloop,dummy manual=yes timeout=240
# Not a test: what ALSA and keepalived see on the four kinds of cards the rig offers (HDA,
# QEMU USB audio, snd-aloop, snd-dummy).  Written to $VM_IO/facts.txt (the runner copies it to
# /tmp/vm-facts.txt).
. "$VM_GUEST/vmlib.sh"
out=/tmp/facts.txt
sec() { echo; echo "### $*"; }
{
    sec "uname -r"; uname -r
    sec "/proc/asound/cards"; cat /proc/asound/cards
    sec "/proc/asound/pcm"; cat /proc/asound/pcm
    sec "aplay -l"; aplay -l 2>&1
    sec "aplay -L"; aplay -L 2>&1
    for c in $(sed -n 's/^ *\([0-9]\+\) \[.*/\1/p' /proc/asound/cards); do
        sec "amixer -c $c controls"; amixer -c "$c" controls 2>&1
        sec "/proc/asound/card$c/pcm0p/info"; cat "/proc/asound/card$c/pcm0p/info" 2>&1
        sec "aplay -D hw:$c,0 --dump-hw-params"
        aplay -D "hw:$c,0" --dump-hw-params -d 1 /dev/zero 2>&1 | grep -E '^[A-Z_]+: '
    done
    sec "libasound hw params (ctypes)"
    python3 "$VM_GUEST/alsa_caps.py" hw:0,0 hw:1,0 hw:2,0 hw:3,0 default dmix:CARD=Intel,DEV=0 plughw:1,0 2>&1
    sec "hw:0,0 hw_params while aplay plays (default parameters)"
    aplay -q -D hw:0,0 -f S16_LE -r 48000 -c 2 /dev/zero 2>/dev/null &
    vm_wait 10 grep -q RUNNING /proc/asound/card0/pcm0p/sub0/status
    cat /proc/asound/card0/pcm0p/sub0/hw_params /proc/asound/card0/pcm0p/sub0/sw_params
    kill $!; wait
    sec "default (dmix) hw_params while aplay -D default plays"
    aplay -q -D default -f S16_LE -r 48000 -c 2 /dev/zero 2>/dev/null &
    vm_wait 10 grep -q RUNNING /proc/asound/card0/pcm0p/sub0/status
    cat /proc/asound/card0/pcm0p/sub0/hw_params
    kill $!; wait
    if [ -x "$KEEPALIVED" ]; then
        sec "$KEEPALIVED devices --json"; "$KEEPALIVED" devices --json 2>&1
        sec "$KEEPALIVED devices"; "$KEEPALIVED" devices 2>&1
    else
        sec "keepalived: no binary (\$KEEPALIVED='$KEEPALIVED')"
    fi
} >$out 2>&1
cp $out "$VM_IO/facts.txt"
cat $out
vm_ok facts "$(wc -l <$out) lines in facts.txt"
vm_finish
