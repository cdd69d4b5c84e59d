#!/bin/sh
# vm: release=yes devices=hda power_save=1 s3=yes timeout=420
# keepalived through a real system suspend (S3, woken by the host 2 s later) on the kernel's HDA
# driver, in the ring loop and streaming: after the resume it plays again within 1 s, counts one
# `suspended` recovery (at most), and the process is the same one (no crash, no restart). The
# 9p root does not survive a resume, so the test runs from a RAM root (Tests/VM/guest/ramroot).
if [ "$1" != --inner ]; then
    . "$VM_GUEST/vmlib.sh"
    # Every host request before the first suspend: the shared directory dies with it.
    out=$(vm_host wake-on-suspend 2+) || { vm_fail arm "host: $out"; vm_finish; }
    exec "$VM_GUEST/ramroot" -p "$KEEPALIVED" -p "$0" -- /bin/sh "$0" --inner "$KEEPALIVED"
fi

. "$VM_GUEST/vmlib.sh"
K=$2
S=/run/keepalived.sock
up() { cut -d' ' -f1 /proc/uptime; }
secs() { awk "BEGIN { printf \"%.2f\", $2 - $1 }"; }
grep -q deep /sys/power/mem_sleep && echo deep >/sys/power/mem_sleep

for mode in ring-loop stream; do
    extra=""
    [ "$mode" = stream ] && extra="--no-ring-loop"
    $K run -d hw:0,0 $extra --socket $S >/tmp/keepalived-$mode.log 2>&1 &
    pid=$!
    playing() { $K status --socket $S 2>/dev/null | grep -q "^state: playing"; }
    if ! vm_wait 30 playing; then
        vm_fail "$mode-plays" "$(tail -3 /tmp/keepalived-$mode.log | tr '\n' ' ')"
        kill $pid; continue
    fi
    vm_ok "$mode-plays" "$($K status --socket $S | grep -E 'mode:' | tr -s ' ')"
    u0=$(up)
    echo mem >/sys/power/state
    rc=$?
    back=$(up)
    recovered() { $K status --socket $S 2>/dev/null | grep -q "recoveries: 1 (suspended 1)" && playing; }
    if [ $rc -eq 0 ] && vm_wait 5 recovered; then
        # The daemon's own account: from the fault it saw at the resume to the audio flowing
        # again (the status polls above add the time a status command takes to start).
        downtime=$(sed -n 's/.*recovered .*downtime=\([0-9.]*\)s reason=suspended.*/\1/p' /tmp/keepalived-$mode.log | tail -1)
        ok=$(awk "BEGIN { print (\"$downtime\" != \"\" && $downtime + 0 <= 1.0) ? 1 : 0 }")
        detail="playing again after a ${downtime:-?} s downtime (seen by status $VM_WAITED s after the resume; suspended for $(secs "$u0" "$back") s of guest uptime)"
        if [ "$ok" = 1 ]; then vm_ok "$mode-resumes" "$detail"; else vm_fail "$mode-resumes" "$detail: more than 1 s"; fi
    else
        vm_fail "$mode-resumes" "echo mem: $rc; $($K status --socket $S 2>&1 | tr '\n' ' ')"
    fi
    # The same process, one suspend counted, nothing else.
    vm_check "$mode-same-process" "pid $pid alive, recoveries: $($K status --socket $S | grep recoveries | tr -s ' ')" \
        sh -c "kill -0 $pid && $K status --socket $S | grep -q 'recoveries: 1 (suspended 1)'"
    $K stop --socket $S >/dev/null
    wait $pid
    vm_check "$mode-stops-cleanly" "exit status $?" test $? -eq 0
done
dmesg | grep -E 'PM: suspend (entry|exit)' | sed 's/^/# /'
vm_finish
