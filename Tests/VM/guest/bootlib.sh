# Helpers for the scenarios that boot a minimal Debian root (root=debian): . "$VM_GUEST/bootlib.sh"
# after vmlib.sh.  Times are CLOCK_MONOTONIC seconds (the kernel's, udev's and the journal's clock).
#   boot_unit_playing                 the service's StatusText starts with "playing"
#   boot_card_time CARD               when udev made /dev/snd/controlC<CARD> (its USEC_INITIALIZED)
#   boot_playing_time                 when the service began to play (its first "playing" line)
#   boot_unit_start_time              when systemd started the service's process
#   boot_daemon_time                  when the daemon's first line was logged (its start-up done)
#   boot_seconds_between A B          B - A, printed with two decimals
#   boot_later A B                    the later of two times
#   boot_reload NAME                  check that `systemctl reload` reaches the daemon (no procps)
BOOT_UNIT=keepalived-audio.service

boot_unit_playing() {
    case "$(systemctl show -p StatusText --value $BOOT_UNIT)" in playing*) return 0 ;; esac
    return 1
}

boot_card_time() {
    _us=$(udevadm info -q property -p "/sys/class/sound/controlC$1" 2>/dev/null | sed -n 's/^USEC_INITIALIZED=//p')
    [ -n "$_us" ] && awk -v u="$_us" 'BEGIN { printf "%.3f", u / 1e6 }'
}

boot_playing_time() {
    journalctl -b -u $BOOT_UNIT -o short-monotonic --no-pager 2>/dev/null | grep -m1 ' playing device=' \
        | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'
}

boot_daemon_time() {
    journalctl -b -u $BOOT_UNIT -o short-monotonic --no-pager 2>/dev/null | grep -m1 ' keepalived\[[0-9]*\]: ' \
        | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'
}

boot_unit_start_time() {
    _us=$(systemctl show -p ExecMainStartTimestampMonotonic --value $BOOT_UNIT)
    awk -v u="$_us" 'BEGIN { printf "%.3f", u / 1e6 }'
}

boot_later() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }

boot_seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# boot_reload NAME: `systemctl reload` of the service succeeds, the daemon logs its SIGHUP reload
# (within 30 s) and keeps its PID, all on a root without procps (debootstrap minbase): the
# units' ExecReload once named procps's /bin/kill and failed there at EXEC.
boot_reloads() { journalctl -b -u $BOOT_UNIT -o cat --no-pager 2>/dev/null | grep -c 'reloaded.*trigger=SIGHUP'; }
boot_reload() {
    _pid=$(systemctl show -p MainPID --value $BOOT_UNIT)
    _before=$(boot_reloads)
    _out=$(systemctl reload $BOOT_UNIT 2>&1); _rc=$?
    _reloaded() { [ "$(boot_reloads)" -gt "$_before" ]; }
    _seen=no
    vm_wait 30 _reloaded && _seen="after ${VM_WAITED}s"
    _pid1=$(systemctl show -p MainPID --value $BOOT_UNIT)
    _kill=$([ -e /bin/kill ] && echo "/bin/kill present ($(dpkg -S /bin/kill 2>/dev/null))" || echo "no /bin/kill")
    _ok() { [ "$_rc" -eq 0 -a "$_seen" != no -a "$_pid" = "$_pid1" -a ! -e /bin/kill ]; }
    vm_check "$1" "$_kill; systemctl reload $BOOT_UNIT: exit $_rc${_out:+ ($(echo "$_out" | tr '\n' ' ' | cut -c1-200))}; the daemon's 'reloaded trigger=SIGHUP' line: $_seen; MainPID $_pid then $_pid1; ExecReload=$(systemctl show -p ExecReload --value $BOOT_UNIT | sed 's/.*argv\[\]=\([^;]*\);.*/\1/')" _ok
}
