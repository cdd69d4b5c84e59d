# The package on a minimal Debian 13 box, on amd64 and on arm64 (scenarios package-trixie and
# package-arm64): . "$VM_GUEST/boxlib.sh" after vmlib.sh and bootlib.sh, then box_scenario.
# The root (Tests/VM/debroot.py) has the package installed by apt, its options file naming the
# HDA card and the USB audio device (service=… in the scenario's header: the ring loop on each),
# the service enabled; udev loads the drivers during boot. One boot:
# - box-playing: the service plays on both at boot (`keepalived status` as root answers, each
#   output `playing` in ring-loop mode), each within 2 s of the later of its card (udev) and the
#   daemon's start-up; the ALSA core came first (modprobe@snd); polkitd lets logind grant the
#   sleep delay lock; `systemctl reload` reaches the daemon (box-reload: the root has no procps)
#   and leaves both outputs playing;
# - ring-loop: over a minute of nothing asked of it, the service's process (every thread) wakes
#   at most 0.1 times a second; its wakeups/s and CPU are printed as `ring_loop …` (TCG: CPU is
#   emulated, compare architectures as a ratio); the HDA codec (power_save=1) never slept;
# - a player through the plug-in, `aplay -D keepalived:CARD=…,DEV=0`, is carried on each card's
#   running stream (carrying is the default): keepalived keeps the card (owner_pid its own), in
#   the player's format after its one reopen (48 kHz on both: keepalived opens HDA at its clip's
#   44.1 kHz; 48 kHz is the only rate QEMU's USB device has), `status` says it carries aplay, no
#   "busy", and keepalived's stream runs on in that format after aplay's exit;
# - `keepalived test --yes --config <the options file>` (service stopped) sounds on both: the
#   host finds its tone at the stated level in QEMU's captures (box_host.check_test_tone);
# - the service started again plays; `apt-get purge` stops it and leaves nothing of the package.
# Bounds in the guest's own time, which under emulation runs the daemon's code several times
# slower than the hardware it stands for (the scenario sets them before box_scenario):
#   BOX_CARD_BOUND   seconds from a card (or the daemon's start-up) to playing on it (default 2)
#   BOX_LOAN_BOUND   seconds from a player's exit to keepalived's stream seen running alone in
#                    the player's format (default 1)
#   BOX_RELEASE_TIMEOUT  the players' KEEPALIVED_RELEASE_TIMEOUT in ms (default: the plug-in's 200)
# BOX_FULL=no leaves out the ring loop's minute and the test tone (a second release's lighter run:
# what differs between releases is the install, the boot, the hand-off and the purge).

BOX_UNIT=keepalived-audio.service
BOX_K=/usr/bin/keepalived
BOX_CONF=/etc/keepalived-audio/keepalived-audio.conf
BOX_WINDOW=${BOX_WINDOW:-30}
BOX_LOAN_BOUND=${BOX_LOAN_BOUND:-1}
BOX_CARD_BOUND=${BOX_CARD_BOUND:-2}
BOX_FULL=${BOX_FULL:-yes}

# box_probe CARD: BOX_STATE (closed, OPEN, PREPARED, RUNNING, ...), BOX_OWNER (the thread group
# that opened CARD's playback substream, or empty; BOX_TID the thread) and BOX_PARAMS
# ("S16_LE 44100 2", or closed),
# from /proc/asound with shell builtins only: under arm64 emulation every process started costs
# tens of milliseconds, and the take-backs are timed by polling this.
box_probe() {
    BOX_STATE=closed; BOX_OWNER=; BOX_TID=; _tid=; _f=; _r=; _c=
    while read -r _k _a _b; do
        case "$_k" in state:) BOX_STATE=$_a ;; owner_pid) _tid=$_b ;; esac
    done 2>/dev/null </proc/asound/card$1/pcm0p/sub0/status
    BOX_TID=$_tid
    if [ -n "$_tid" ]; then
        BOX_OWNER=$_tid
        while read -r _k _a; do
            [ "$_k" = Tgid: ] && { BOX_OWNER=$_a; break; }
        done 2>/dev/null </proc/$_tid/status
    fi
    while read -r _k _a _b; do
        case "$_k" in format:) _f=$_a ;; rate:) _r=$_a ;; channels:) _c=$_a ;; esac
    done 2>/dev/null </proc/asound/card$1/pcm0p/sub0/hw_params
    BOX_PARAMS=closed
    [ -n "$_f" ] && BOX_PARAMS="$_f $_r $_c"
    return 0
}
# CARD held by PID, running, in S16_LE stereo at RATE.
box_held() { box_probe $1; [ "$BOX_OWNER" = "$2" -a "$BOX_STATE" = RUNNING -a "$BOX_PARAMS" = "S16_LE $3 2" ]; }
box_closed() { box_probe $1; [ "$BOX_STATE" = closed ]; }
# keepalived (pid $2) holds card $1 in S16_LE at rate $3 and carries aplay on it, or carries nothing.
box_carrying() { box_held $1 $2 $3 && box_status | grep -q "carrying: aplay"; }
box_alone() { box_held $1 $2 $3 && ! box_status | grep -q "carrying: "; }
box_describe() { box_probe $1; echo "card $1: ${BOX_OWNER:-nobody} $BOX_STATE $BOX_PARAMS"; }
# "SWITCHES CPU_NS THREADS" of PID: switches and CPU summed over every thread, then each
# thread as TID/NAME/SWITCHES,… (what woke).
# Wakeups are voluntary context switches: a thread that sleeps and is woken. A preemption
# (nonvoluntary) is no wakeup, and an emulated guest on a loaded host has a few of them; they are
# summed apart, for the record.
box_counters() {
    _sw=0; _ns=0; _pre=0; _each=
    for _t in /proc/$1/task/*; do
        _n=0
        while read -r _k _v; do
            case "$_k" in Name:) _name=$_v ;; voluntary_ctxt_switches:) _n=$_v ;; nonvoluntary_ctxt_switches:) _pre=$((_pre + _v)) ;; esac
        done <$_t/status
        read -r _v _ <$_t/schedstat
        _sw=$((_sw + _n)); _ns=$((_ns + _v)); _each="$_each${_each:+,}${_t##*/}/$_name/$_n"
    done
    echo "$_sw $_ns $_each $_pre"
}
box_status() { $BOX_K status 2>&1; }
box_output_line() { box_status | grep "^output $1: "; }
# The journal's first line that shows DEVICE playing, as CLOCK_MONOTONIC seconds.
box_playing_time() {
    journalctl -b -u $BOX_UNIT -o short-monotonic --no-pager 2>/dev/null | grep -F "device=$1" | grep -m1 -E ' playing device=|state=playing' \
        | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'
}

box_scenario() {
    arch=$(dpkg --print-architecture)
    release=$(. /etc/os-release; echo "$PRETTY_NAME")
    hda=${VM_CARD_HDA:-0}
    usb=${VM_CARD_USB:-1}
    cards() { [ -e /proc/asound/card$hda/pcm0p/sub0/status -a -e /proc/asound/card$usb/pcm0p/sub0/status ]; }
    closed() { box_closed $hda && box_closed $usb; }
    vm_wait 60 cards
    hda_id=$(cat /proc/asound/card$hda/id 2>/dev/null)
    usb_id=$(cat /proc/asound/card$usb/id 2>/dev/null)
    HDA=hw:CARD=$hda_id,DEV=0
    USB=hw:CARD=$usb_id,DEV=0
    vm_check box-cards "$release $arch, kernel $(uname -r): card $hda $hda_id ($(sed -n "s/^ *$hda \[[^]]*\]: //p" /proc/asound/cards)), card $usb $usb_id ($(sed -n "s/^ *$usb \[[^]]*\]: //p" /proc/asound/cards)); options: $(cat $BOX_CONF 2>&1)" \
        [ "$hda_id" = Intel -a "$usb_id" = Audio ]

    # -- the service at boot ---------------------------------------------------------------------
    both_playing() {
        _st=$(box_status)
        echo "$_st" | grep -q "^output $HDA: playing" && echo "$_st" | grep -q "^output $USB: playing"
    }
    vm_wait 60 both_playing
    st=$(box_status); rc=$?
    vm_check box-playing "after ${VM_WAITED}s of the test: $BOX_UNIT $(systemctl is-active $BOX_UNIT), 'keepalived status' exit $rc: $(echo "$st" | grep -E '^(keepalived|output|  mode)' | tr '\n' '|')" \
        sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -A4 '^output $HDA: playing' | grep -q 'mode: ring-loop' && echo \"\$1\" | grep -A4 '^output $USB: playing' | grep -q 'mode: ring-loop'" - "$st"
    kpid=$(systemctl show -p MainPID --value $BOX_UNIT)
    held_running() { box_probe $1; [ "$BOX_OWNER" = "$kpid" -a "$BOX_STATE" = RUNNING ]; }
    both_held() { held_running $hda && held_running $usb; }
    vm_check box-holds-both "MainPID $kpid; $(box_describe $hda); $(box_describe $usb)" both_held
    daemon_at=$(boot_daemon_time)
    for c in $hda:$HDA $usb:$USB; do
        n=${c%%:*}; dev=${c#*:}
        card_at=$(boot_card_time "$n")
        playing_at=$(box_playing_time "$dev")
        late=$(boot_seconds_between "$(boot_later "$card_at" "$daemon_at")" "${playing_at:-99999}")
        vm_check "box-playing-soon-card$n" "$dev: controlC$n made by udev at ${card_at}s, the daemon's first line at ${daemon_at}s, playing at ${playing_at:-never}s: ${late}s after the later (at most $BOX_CARD_BOUND)" \
            awk -v d="$late" -v b="$BOX_CARD_BOUND" 'BEGIN { exit !(d <= b) }'
    done
    alsa_major=$(awk '$2 == "alsa" { print $1 }' /proc/devices)
    loaded_us=$(systemctl show -p ExecMainExitTimestampMonotonic --value modprobe@snd.service)
    start_us=$(systemctl show -p ExecMainStartTimestampMonotonic --value $BOX_UNIT)
    vm_check box-alsa-core-first "char major ${alsa_major:-none} 'alsa'; modprobe@snd.service done at ${loaded_us:-?} us, the unit started at ${start_us:-?} us" \
        [ "$alsa_major" = 116 -a "${loaded_us:-0}" -gt 0 -a "${loaded_us:-0}" -le "${start_us:-0}" ]
    lock() { busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager ListInhibitors 2>/dev/null | grep -q "\"sleep\" \"keepalived\" \"[^\"]*\" \"delay\" [0-9]* $kpid"; }
    vm_wait 60 lock
    vm_check box-sleep-lock "polkitd $(dpkg-query -W -f='${Version}' polkitd 2>/dev/null || echo absent): logind lists keepalived's sleep delay lock for $kpid after ${VM_WAITED}s" lock
    boot_reload box-reload
    # The options did not change: the reload leaves both streams as they were.
    vm_check box-reload-kept "$(box_describe $hda); $(box_describe $usb)" both_held

    if [ "$BOX_FULL" = yes ]; then
        box_ring_loop
    fi
    box_players
    if [ "$BOX_FULL" = yes ]; then
        box_test_tone
    else
        systemctl stop $BOX_UNIT
        vm_wait 15 closed
    fi
    box_purge
}

box_ring_loop() {

    # -- the ring loop, left alone ---------------------------------------------------------------------
    # Each output's thread is the one that opened its card (owner_pid is a thread's id). The HDA
    # codec's stream has its period interrupts switched off: its thread sleeps but for the health
    # check (every 60 s), the main thread for the watchdog's ping (every 30 s; 50-keepalived-hda's
    # bare process, with no unit, has a bound of 0.1/s; the service gets 0.15). snd-usb-audio
    # cannot switch them off: each period the kernel wakes the USB output's thread inside poll(),
    # which finds nothing and sleeps again without returning, a context switch per period.
    box_probe $hda; hda_tid=$BOX_TID
    box_probe $usb; usb_tid=$BOX_TID
    usb_period=$(sed -n 's/^period_size: //p' /proc/asound/card$usb/pcm0p/sub0/hw_params)
    usb_rate=$(sed -n 's/^rate: \([0-9]*\).*/\1/p' /proc/asound/card$usb/pcm0p/sub0/hw_params)
    set -- $(vm_codec_power "$hda"); on0=$1; off0=$2
    set -- $(box_counters "$kpid"); sw0=$1; ns0=$2; each0=$3; pre0=$4
    t0=$(cut -d' ' -f1 /proc/uptime)
    sleep "$BOX_WINDOW"
    set -- $(box_counters "$kpid"); sw1=$1; ns1=$2; each1=$3; pre1=$4
    t1=$(cut -d' ' -f1 /proc/uptime)
    set -- $(vm_codec_power "$hda"); on1=$1; off1=$2
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    per_s() { awk -v n="$1" -v t="$secs" 'BEGIN { printf "%.3f", n / t }'; }
    thread() { echo "$2" | tr ',' '\n' | awk -F/ -v t="$1" '$1 == t { print $3 }'; }
    hda_n=$(( $(thread "$hda_tid" "$each1") - $(thread "$hda_tid" "$each0") ))
    usb_n=$(( $(thread "$usb_tid" "$each1") - $(thread "$usb_tid" "$each0") ))
    all_n=$((sw1 - sw0))
    rest_n=$((all_n - usb_n))
    cpu=$(awk -v a="$ns0" -v b="$ns1" -v t="$secs" 'BEGIN { printf "%.1f", (b - a) / 1000 / t }')
    usb_periods=$(awk -v p="$usb_period" -v r="$usb_rate" -v t="$secs" 'BEGIN { printf "%.1f", (p > 0 ? t * r / p : 0) }')
    threads=$(ls /proc/$kpid/task | wc -l)
    echo "# ring_loop arch=$arch seconds=$secs wakeups_per_s=$(per_s $all_n) cpu_us_per_s=$cpu switches=$all_n preemptions=$((pre1 - pre0)) cpu_ns=$((ns1 - ns0)) hda_thread=$hda_n usb_thread=$usb_n usb_periods=$usb_periods all_but_usb_per_s=$(per_s $rest_n) threads=$threads before=$each0 after=$each1"
    vm_check box-ring-loop-hda-wakeups "$arch: the HDA output's thread $hda_tid woke $hda_n times in ${secs} s (at most 2: a health check a minute), the service's $threads threads but the USB output's $rest_n times: $(per_s $rest_n)/s (at most 0.15); $cpu us CPU/s in all (emulated)" \
        awk -v a="$hda_n" -v r="$(per_s $rest_n)" 'BEGIN { exit !(a <= 2 && r <= 0.15) }'
    vm_check box-ring-loop-usb-wakeups "$arch: the USB output's thread $usb_tid woke $usb_n times in ${secs} s: once per period of $usb_period frames at $usb_rate Hz ($usb_periods periods) at most, and nothing more" \
        awk -v n="$usb_n" -v p="$usb_periods" 'BEGIN { exit !(p > 0 && n <= p + 2) }'
    vm_check box-codec-awake "over ${secs} s the codec was on $((on1 - on0)) ms, off $((off1 - off0)) ms" [ $((off1 - off0)) -eq 0 -a $((on1 - on0)) -gt 0 ]
}

box_players() {

    # -- players through the plug-in ------------------------------------------------------------------
    # 48 kHz on both: keepalived opens HDA at 44.1 kHz, so its stream in 48 kHz is the player's
    # (its one reopen); QEMU's USB audio device has 48 kHz only.
    # The player plays until its carrying has been looked at, then reaches the end of its input: a
    # player of a fixed 3 s had, on a loaded arm64 guest, closed before `status` was read (seen
    # held 4.5 s after its start, "no loan" a moment later).
    for c in $hda:$hda_id:48000 $usb:$usb_id:48000; do
        n=${c%%:*}; rest=${c#*:}; id=${rest%%:*}; r=${rest#*:}
        dev="keepalived:CARD=$id,DEV=0"
        rm -f /tmp/box-looked
        { while [ ! -e /tmp/box-looked ]; do head -c $((r * 4)) /dev/zero; done; } 2>/dev/null |
            ${BOX_RELEASE_TIMEOUT:+env KEEPALIVED_RELEASE_TIMEOUT=$BOX_RELEASE_TIMEOUT} \
            aplay -q -D "$dev" -t raw -f S16_LE -c 2 -r "$r" - >/tmp/aplay.out 2>&1 &
        apid=$!
        # `status` is a process of its own under emulation: the wait's time is mostly its.
        carried=0
        vm_wait 10 box_carrying $n $kpid $r && carried=1
        seen="${VM_WAITED}s after aplay $apid started: $(box_describe $n)"
        carrying=$(box_status | grep -m1 "carrying: ")
        touch /tmp/box-looked
        vm_check "box-carried-card$n" "$seen (keepalived is $kpid); keepalived status: ${carrying:-carries nothing}" [ $carried = 1 ]
        wait $apid; arc=$?
        # aplay's reason for an exit comes last, after its underrun lines.
        vm_check "box-aplay-card$n" "${BOX_RELEASE_TIMEOUT:+KEEPALIVED_RELEASE_TIMEOUT=$BOX_RELEASE_TIMEOUT }aplay -D $dev -t raw -f S16_LE -c 2 -r $r - (zeros, 1 s at a time until its carrying was looked at): exit $arc$(tr '\n' ' ' </tmp/aplay.out | tail -c 400 | sed 's/^./: &/')" \
            sh -c "[ $arc -eq 0 ] && ! grep -qi busy /tmp/aplay.out"
        held=0
        vm_wait 10 box_held $n $kpid $r && held=1
        vm_check "box-kept-card$n" "${VM_WAITED}s after aplay's exit (at most $BOX_LOAN_BOUND): $(box_describe $n) (keepalived is $kpid; the player's format S16_LE $r 2)" \
            awk -v ok=$held -v w="$VM_WAITED" -v b="$BOX_LOAN_BOUND" 'BEGIN { exit !(ok && w <= b) }'
        alone=0
        vm_wait 10 box_alone $n $kpid $r && alone=1
        vm_check "box-alone-after-card$n" "${VM_WAITED}s after aplay's exit: $(box_status | grep -c "carrying: ") carried" [ $alone = 1 ]
    done

    vm_note "keepalived's own account of the loans: $(journalctl -b -u $BOX_UNIT -o cat --no-pager | grep -E 'carr|released a card device|took a card device back' | sed 's/ outputs=[^ ]*//' | tr '\n' '|')"

}

box_test_tone() {
    # -- keepalived test, with the service stopped --------------------------------------------------
    systemctl stop $BOX_UNIT
    vm_wait 15 closed
    # QEMU's USB audio device scales what it gets by its volume control, linearly (240 of 256,
    # its default, is 0.94): at 256 the capture holds the samples the device got.
    usb_volume="Audio Output Volume Control Playback Volume"
    amixer -q -c $usb cset name="$usb_volume" 256,256 >/dev/null 2>&1
    vm_note "USB device's volume for the test: $(amixer -c $usb cget name="$usb_volume" 2>&1 | sed -n 's/.*: values=//p' | head -1)"
    out=$($BOX_K test --yes --config $BOX_CONF 2>&1); rc=$?
    vm_check box-test-tone "keepalived test --yes --config $BOX_CONF: exit $rc: $(echo "$out" | tr '\n' '|' | cut -c1-400)" \
        sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -q 'sounding: $HDA .*done' && echo \"\$1\" | grep -q 'sounding: $USB .*done'" - "$out"

}

box_purge() {
    # -- the service again, then purge ---------------------------------------------------------------
    systemctl start $BOX_UNIT
    vm_wait 30 both_playing
    kpid=$(systemctl show -p MainPID --value $BOX_UNIT)
    vm_check box-restarted "$BOX_UNIT $(systemctl is-active $BOX_UNIT), MainPID $kpid, both outputs playing after ${VM_WAITED}s" both_playing
    # Its files and links (not the directories, /lib among them: a link to usr/lib in Debian 13).
    files=$(dpkg -L keepalived-audio | while read -r f; do [ -d "$f" ] || echo "$f"; done)
    nfiles=$(echo "$files" | wc -l)
    out=$(apt-get purge -y -q keepalived-audio 2>&1); rc=$?
    gone() { [ ! -d /proc/$kpid ]; }
    vm_wait 15 gone
    left=$(for f in $files /etc/keepalived-audio; do [ -e "$f" -o -L "$f" ] && echo "$f"; done | tr '\n' ' ')
    links=$(find /etc/systemd -name 'keepalived*' 2>/dev/null | tr '\n' ' ')
    known=$(dpkg-query -W -f='${Status}' keepalived-audio 2>&1)
    purged() { [ $rc -eq 0 -a -z "$left" -a -z "$links" ] && gone && ! dpkg-query -W keepalived-audio >/dev/null 2>&1 && closed; }
    vm_note "after the purge: $(getent passwd keepalived-audio >/dev/null && echo 'the system user keepalived-audio stays, as Debian leaves system users' || echo 'no user keepalived-audio')"
    vm_check box-purge "apt-get purge: exit $rc; the service's process $kpid $(gone && echo gone || echo 'still runs'); of the package's $nfiles files and links left: ${left:-none}; unit links: ${links:-none}; dpkg: $known; $(box_describe $hda); $(box_describe $usb)" purged
    [ "$VM_FAILED" -ne 0 ] && vm_note "journal of the unit: $(journalctl -b -u $BOX_UNIT -o cat --no-pager | tail -8 | tr '\n' '|')"
    vm_finish
}
