#!/bin/sh
# vm: release=yes devices=hda,usb power_save=1 hda_wav=yes mode=systemd smp=2 timeout=540
# A PipeWire desktop's order: a logged-in user (logind's user manager, the user's own session
# bus) whose PipeWire, WirePlumber and PipeWire's pulse server own the HDA card and the USB audio
# device (WirePlumber holds both reservations), both sinks suspended (WirePlumber suspends a node
# idle for 5 s and closes its device) when keepalived starts. This is where `--all` once took the
# cards' dmix behind the server's back and the sinks went to "error (Start error: Device or
# resource busy)". `keepalived start --all` as that user must:
# - keep both sinks awake through the server (pulse:DEVICE=<sink>), never opening a card itself:
#   the HDA codec's power_off_acct does not grow, and every open substream belongs to PipeWire;
# - leave the user's own sound alone: pw-play of a 1 s tone finishes, the journal has no "Start
#   error" or "busy", and the tone reaches the codec (the host checks QEMU's WAV:
#   68-desktop-pipewire.host.py);
# - drop the USB sink when the device is unplugged and keep it awake again within 2 s of the
#   server's new sink after a replug;
# - bring both sinks back after PipeWire, WirePlumber and the pulse server restart;
# - then, with `default.clock.allowed-rates = [ 44100 48000 ]` (the restart loads it), let each of
#   the user's tracks run the card at the track's own rate while keepalived keeps the sink
#   running: a 44.1 kHz track (paplay), a 48 kHz one (pw-play, PipeWire's own client), a 44.1 kHz
#   one again; the card's hw_params show the track's rate while it plays and keep it after, and
#   the codec never powers off across the tracks;
# - then, started again with --on-active/--on-idle and --on-idle-after 3s: the user's track on the
#   HDA sink makes that output active in status while it plays, and idle 3 s after its end, one
#   hook run each way, naming the output and the sink;
# - before all that, with PipeWire and WirePlumber alone (no pulse server), say in status, devices
#   and its log that PipeWire runs without pipewire-pulse and what to do, opening no card.
. "$VM_GUEST/desktoplib.sh"
desk_login

# This root enables both servers' user sockets (it has PipeWire and PulseAudio installed side by
# side, which no desktop does): a PipeWire desktop has no PulseAudio, so it is masked here.
as_user systemctl --user stop pulseaudio.service pulseaudio.socket 2>/dev/null
as_user systemctl --user mask pulseaudio.service pulseaudio.socket >/dev/null 2>&1
desk_pipewire_pulse_unit
DESK_SERVER=pipewire
play_tone() { as_user_within 15 pw-play --target "$hda_sink" /tmp/tone.wav; }
pw_reserved() { [ "$(reservations)" = "Audio0=wireplumber Audio1=wireplumber " ]; }

# First PipeWire without its pulse server (a system that runs pipewire and wireplumber only):
# WirePlumber owns both cards, keepalived --all can keep nothing awake, and status, devices and
# its log must say why and what to do, while it opens no card.
as_user systemctl --user start pipewire.socket pipewire.service wireplumber.service
vm_wait 30 pw_reserved
vm_check pipewire-alone-reserves "reservations without pipewire-pulse after $VM_WAITED s: $(reservations)" pw_reserved
_out=$(as_user "$KEEPALIVED" start --all 2>&1); _rc=$?
vm_note "keepalived start --all without pipewire-pulse: exit $_rc: $_out"
_no_pulse_said() { as_user "$KEEPALIVED" status 2>&1 | grep -q "pipewire-pulse is not running"; }
vm_wait 10 _no_pulse_said
vm_check no-pulse-status-says-why "after $VM_WAITED s: $(as_user "$KEEPALIVED" status 2>&1 | grep -i -E 'sound server|left alone' | tr '\n' ' ')" _no_pulse_said
vm_check no-pulse-devices-say-why "$(as_user "$KEEPALIVED" devices 2>&1 | grep -i 'sound server')" \
    sh -c "runuser -u $DESK_USER -- env XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR '$KEEPALIVED' devices 2>&1 | grep -q 'pipewire-pulse is not running'"
vm_check no-pulse-log-says-why "$(grep -m1 'no sound server answers' $XDG_RUNTIME_DIR/keepalived/keepalived.log)" \
    grep -q "warning: no sound server answers.*systemctl --user enable --now pipewire-pulse.socket" $XDG_RUNTIME_DIR/keepalived/keepalived.log
_no_card_of_ours() { ! owners | grep -q ':keepalived$'; }
vm_check no-pulse-cards-left "open substreams: $(owners | tr '\n' ' ')" _no_card_of_ours
as_user "$KEEPALIVED" stop >/dev/null 2>&1

as_user systemctl --user start pipewire.socket pipewire.service wireplumber.service pipewire-pulse.service
desk_server_owns_both
vm_check server-holds-reservations "reservations: $(reservations)" pw_reserved
desk_keep_all_awake
desk_usb_replug
# A user who plays each file at its own rate (the drop-in Debian's PipeWire documents).
mkdir -p /home/$DESK_USER/.config/pipewire/pipewire.conf.d
echo 'context.properties = { default.clock.allowed-rates = [ 44100 48000 ] }' >/home/$DESK_USER/.config/pipewire/pipewire.conf.d/rates.conf
chown -R $DESK_USER /home/$DESK_USER/.config
desk_server_restart systemctl --user restart pipewire.service wireplumber.service pipewire-pulse.service

hw_rate() { awk '/^rate:/ {print $2}' /proc/asound/card0/pcm0p/sub0/hw_params 2>/dev/null; }
hw_rate_is() { [ "$(hw_rate)" = "$1" ]; }
for _r in 44100 48000; do
    sox -n -r $_r -c 2 -b 16 /tmp/track$_r.wav synth 6 sine 440 vol 0.05 && chmod 644 /tmp/track$_r.wav
done
set -- $(vm_codec_power); _off0=$2
vm_note "before the tracks: the card at $(hw_rate) Hz, keepalived's stream alone"
_i=0
for _track in 44100:paplay 48000:pw-play 44100:paplay; do
    _r=${_track%%:*}; _player=${_track#*:}; _i=$((_i + 1))
    if [ "$_player" = paplay ]; then
        as_user_within 20 paplay --device="$hda_sink" /tmp/track$_r.wav & _pid=$!
    else
        as_user_within 20 pw-play --target "$hda_sink" /tmp/track$_r.wav & _pid=$!
    fi
    vm_wait 5 hw_rate_is $_r
    vm_check track$_i-at-$_r "the card at $(hw_rate) Hz $VM_WAITED s after $_player started the $_r Hz track" hw_rate_is $_r
    vm_check track$_i-still-playing "the $_r Hz track still playing when the card took its rate" kill -0 $_pid
    wait $_pid; _rc=$?
    vm_check track$_i-played "$_player of the $_r Hz track: exit $_rc" [ "$_rc" -eq 0 ]
    _kept() { both_running && hw_rate_is $_r; }
    vm_wait 2 both_running
    vm_check track$_i-after "after the $_r Hz track: the card at $(hw_rate) Hz, sinks $(sinks | cut -f2,5 | tr '\n\t' '; ')" _kept
done
set -- $(vm_codec_power); _off1=$2
vm_check codec-awake-across-tracks "power_off_acct +$((_off1 - _off0)) ms across the three tracks" [ "$_off1" -eq "$_off0" ]
vm_check cards-left-after-tracks "open substreams: $(owners | tr '\n' ' ')" only_owner "$DESK_SERVER"
as_user "$KEEPALIVED" stop >/dev/null 2>&1

# Power follows the music on a desktop: keepalived again with --on-active/--on-idle and
# --on-idle-after 3s; the user's track on the sink keepalived keeps awake makes its output active
# (status says so, by the track's program) and idle 3 s after the track's end, one hook each way.
cat >/tmp/activity-hook <<'EOF'
#!/bin/sh
read up _ </proc/uptime
echo "$KEEPALIVED_EVENT $KEEPALIVED_OUTPUT $KEEPALIVED_SINK $up" >>/tmp/activity-hook.log
EOF
chmod 755 /tmp/activity-hook; : >/tmp/activity-hook.log; chown $DESK_USER /tmp/activity-hook.log
_out=$(as_user "$KEEPALIVED" start --all --on-active /tmp/activity-hook --on-idle /tmp/activity-hook --on-idle-after 3s 2>&1)
vm_wait 10 both_running
_activity() { as_user "$KEEPALIVED" status --json 2>/dev/null | python3 -c 'import json,sys; o=[o for o in json.load(sys.stdin)["outputs"] if o["device"]==sys.argv[1]]; a=(o[0].get("activity") or {}) if o else {}; print(a.get("state","?"), a.get("program","-"))' "pulse:DEVICE=$hda_sink"; }
_idle_before=$(_activity)
as_user_within 20 pw-play --target "$hda_sink" /tmp/track48000.wav & _pid=$!
_is_active() { case "$(_activity)" in active*) return 0;; esac; return 1; }
vm_wait 5 _is_active
_playing=$(_activity)
wait $_pid
read _ended _ </proc/uptime
_hooked() { [ "$(wc -l </tmp/activity-hook.log)" -ge 2 ]; }
vm_wait 10 _hooked
_hooks=$(cat /tmp/activity-hook.log | tr '\n' ';')
_idle_after=$(awk -v e="$_ended" '$1 == "idle" {printf "%.2f", $4 - e}' /tmp/activity-hook.log)
_want="active pulse:DEVICE=$hda_sink $hda_sink;idle pulse:DEVICE=$hda_sink $hda_sink;"
_desk_idle_ok() { _hooks_ok && awk -v d="$_idle_after" 'BEGIN { exit !(d >= 2.5 && d <= 6.0) }'; }
_hooks_ok() { [ "$(cut -d' ' -f1-3 /tmp/activity-hook.log | tr '\n' ';')" = "$_want" ]; }
vm_check desktop-activity-active "before the track: $_idle_before; while pw-play plays on $hda_sink: $_playing (start: $_out)" \
    [ "${_idle_before%% *}" = idle -a "${_playing%% *}" = active ]
vm_check desktop-activity-idle "hook runs: $_hooks (want $_want); idle ${_idle_after:-?} s after the track's end (--on-idle-after 3s)" \
    _desk_idle_ok
as_user "$KEEPALIVED" stop >/dev/null 2>&1
vm_finish
