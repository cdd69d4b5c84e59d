#!/bin/sh
# vm: release=yes devices=hda,usb power_save=1 hda_wav=yes mode=systemd smp=2 timeout=1200
# A desktop's order: a logged-in user (logind's user manager, the user's own session bus) whose
# PulseAudio, socket-activated with the stock default.pa (module-udev-detect), owns the HDA card
# and the USB audio device, both sinks suspended (idle 5 s, devices closed) when keepalived
# starts. `keepalived start --all` as that user must:
# - keep both sinks awake through the server (pulse:DEVICE=<sink>), never opening a card itself:
#   the HDA codec's power_off_acct does not grow, the USB substream runs, and every open
#   substream belongs to PulseAudio;
# - leave the user's own sound alone: paplay of a 1 s tone finishes, PulseAudio logs no "busy",
#   and the tone reaches the codec (the host checks QEMU's WAV: 67-desktop-pulseaudio.host.py);
# - drop the USB sink when the device is unplugged and keep it awake again within 2 s of the
#   server's new sink after a replug;
# - bring both sinks back after `systemctl --user restart pulseaudio`;
# - when keepalived came first (no server: it plays the cards' dmix itself and reserves them on
#   the user's bus, org.freedesktop.ReserveDevice1, at the lowest priority), hand both cards to a
#   PulseAudio that starts later, and keep the server's two sinks awake instead. PulseAudio's
#   module-udev-detect skips a card whose device is open and retries when it closes; keepalived
#   closes its cards as soon as the server answers, and no "busy" is logged;
# - hand a card to JACK, which asks through the reservation protocol (RequestRelease): keepalived
#   closes the card first, then says yes, leaves the card to JACK while it runs ("reserved by"
#   in status) and takes it back when JACK stops;
# - the same order with a PipeWire desktop (PipeWire, WirePlumber and PipeWire's pulse server,
#   run from a private pipewire-pulse.conf: Debian 12's pipewire-pulse package conflicts with
#   pulseaudio in this root). WirePlumber does not ask; it waits for the reservation, which
#   keepalived lets go once the pulse server answers; then both ALSA sinks are kept awake
#   through it, and the journal has no "Start error" or "busy".
. "$VM_GUEST/desktoplib.sh"
desk_login
uid=$DESK_UID

# This root enables both servers' user sockets (it has PipeWire and PulseAudio installed side by
# side, which no desktop does): a PulseAudio desktop has no PipeWire, so it is masked here.
# Left running, WirePlumber takes the same cards and PulseAudio cannot resume its sinks.
as_user systemctl --user stop wireplumber.service pipewire.service pipewire.socket 2>/dev/null
as_user systemctl --user mask wireplumber.service pipewire.service pipewire.socket >/dev/null 2>&1
DESK_SERVER=pulseaudio
play_tone() { as_user_within 15 paplay -d "$hda_sink" /tmp/tone.wav; }
as_user systemctl --user start pulseaudio.socket pulseaudio.service
desk_server_owns_both
desk_keep_all_awake
desk_usb_replug
desk_server_restart systemctl --user restart pulseaudio.service
as_user "$KEEPALIVED" stop >/dev/null 2>&1

# keepalived first, PulseAudio later (a session whose server starts after keepalived's unit).
as_user systemctl --user stop pulseaudio.socket pulseaudio.service
no_server() { ! pgrep -u kdesk -x pulseaudio >/dev/null; }
vm_wait 10 no_server
out=$(as_user "$KEEPALIVED" start --all --verbose 2>&1); rc=$?
vm_note "keepalived start --all without a server: exit $rc: $out"
dmix_outputs() { as_user "$KEEPALIVED" status 2>/dev/null | grep -c '^output dmix:CARD=.*: playing'; }
holds_both() { [ "$(dmix_outputs)" -eq 2 ] && [ "$(reservations)" = "Audio0=keepalived Audio1=keepalived " ]; }
vm_wait 10 holds_both
vm_check reserves-its-cards "$(dmix_outputs) dmix outputs playing, reservations: $(reservations)" holds_both
busy0=$(busy_errors)
# PulseAudio's debug log, to say why if it does not take a card.
user_unit pulseaudio.service.d/debug.conf "[Service]
ExecStart=
ExecStart=/usr/bin/pulseaudio --daemonize=no --log-target=journal --log-level=debug"
as_user systemctl --user start pulseaudio.socket pulseaudio.service
vm_wait 30 two_sinks
vm_check server-gets-cards "PulseAudio's sinks after $VM_WAITED s: $(sinks | cut -f2,5 | tr '\n\t' '; ')" two_sinks
two_sinks || { journalctl _UID=$uid --no-pager -n 3000 2>&1 | grep -i -E "udev-detect|reserve|busy|module-alsa-card|Failed|card" | tail -30 | sed 's/^/#   /'; grep -v -E "debug: (opened|fault)" $XDG_RUNTIME_DIR/keepalived/keepalived.log | tail -40 | sed 's/^/#   /'; }
server_reserved() { [ "$(reservations)" = "Audio0=pulseaudio Audio1=pulseaudio " ]; }
vm_wait 5 server_reserved
vm_check server-holds-reservations "reservations: $(reservations)" server_reserved
vm_wait 15 both_running
vm_check moved-to-sinks "both sinks RUNNING $VM_WAITED s after the server's: $(as_user "$KEEPALIVED" status 2>&1 | grep '^output' | tr '\n' ' ')" both_running
vm_check cards-handed-over "open substreams: $(owners | tr '\n' ' ')" only_owner pulseaudio
busy=$(busy_errors)
vm_check handover-never-busy "lines with 'resource busy' or 'Start error' in the user's journal: $busy, before the server started: $busy0" [ "$busy" -eq "$busy0" ]
[ "$busy" -eq "$busy0" ] || journalctl _UID=$uid --no-pager 2>/dev/null | grep -i -E "resource busy|Start error" | tail -5 | sed 's/^/#   /'
let_go() { log=$XDG_RUNTIME_DIR/keepalived/keepalived.log; a=$(grep -n "outputs changed.*removed dmix" $log | tail -1 | cut -d: -f1); b=$(grep -n "another program reserved a card card=0" $log | tail -1 | cut -d: -f1); [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]; }
vm_check let-go-when-server-answered "keepalived closed its dmix outputs before PulseAudio reserved the cards: $(grep -E 'removed dmix|another program reserved' $XDG_RUNTIME_DIR/keepalived/keepalived.log | tail -3 | cut -c1-120 | tr '\n' ' ')" let_go
as_user "$KEEPALIVED" stop >/dev/null 2>&1

# keepalived first, JACK later: jackd asks for card 0 (RequestRelease, priority 2^31-1).
as_user systemctl --user stop pulseaudio.socket pulseaudio.service
vm_wait 10 no_server
closed() { ! grep -q -v closed /proc/asound/card*/pcm*p/sub*/status; }
vm_wait 10 closed
log=$XDG_RUNTIME_DIR/keepalived/keepalived.log
out=$(as_user "$KEEPALIVED" start --all --verbose 2>&1); rc=$?
vm_wait 10 holds_both
vm_check jack-first-keepalived "$(dmix_outputs) dmix outputs playing, reservations: $(reservations)" holds_both
gave0=$(grep -c 'giving it up' $log)
as_user jackd --no-realtime -d alsa -d hw:0 -P -r 48000 -p 1024 -n 2 >/tmp/jackd.log 2>&1 &
jack=$!
jack_plays() { owners | grep -q "card0/.*:jackd$"; }
vm_wait 20 jack_plays
vm_check jack-gets-card "jackd has card 0 open after $VM_WAITED s: $(owners | tr '\n' ' ')" jack_plays
jack_plays || sed 's/^/#   /' /tmp/jackd.log | tail -15
vm_check released-on-request "keepalived gave up $(($(grep -c 'giving it up' $log) - gave0)) card(s) on request: $(grep 'giving it up' $log | tail -1 | cut -c1-140)" [ "$(($(grep -c 'giving it up' $log) - gave0))" -eq 1 ]
jack_reserved() { [ "$(reservations)" = "Audio0=jackd Audio1=keepalived " ]; }
vm_wait 5 jack_reserved
vm_check jack-holds-reservation "reservations: $(reservations)" jack_reserved
left_to_jack() { [ "$(dmix_outputs)" -eq 1 ] && as_user "$KEEPALIVED" status 2>/dev/null | grep -q "^left alone: dmix:CARD=Intel.*card 0 is reserved by"; }
vm_wait 5 left_to_jack
vm_check left-to-jack "$(as_user "$KEEPALIVED" status 2>&1 | grep -E '^(output|left alone)' | tr '\n' ' ')" left_to_jack
# $jack is the shell that runs as_user; jackd is its child.
pkill -x -u kdesk jackd; wait $jack 2>/dev/null
vm_wait 10 holds_both
vm_check back-after-jack "$VM_WAITED s after jackd stopped: $(dmix_outputs) dmix outputs playing, reservations: $(reservations)" holds_both

# keepalived first, a PipeWire desktop later.
desk_pipewire_pulse_unit
busy1=$(busy_errors)
as_user systemctl --user unmask wireplumber.service pipewire.service pipewire.socket >/dev/null 2>&1
as_user systemctl --user start pipewire.socket pipewire.service wireplumber.service
as_user systemctl --user start pipewire-pulse.service
vm_wait 30 two_sinks
vm_check pipewire-gets-cards "PipeWire's sinks after $VM_WAITED s: $(sinks | cut -f2,5 | tr '\n\t' '; ')" two_sinks
two_sinks || { journalctl _UID=$uid --no-pager -n 80 2>&1 | grep -i -E "wireplumber|pipewire|reserv" | grep -v -E "RTKit|portal|libcamera|nice-level" | tail -15 | sed 's/^/#   /'; grep -v -E "debug: (opened|fault)" $log | tail -25 | sed 's/^/#   /'; }
pw_reserved() { [ "$(reservations)" = "Audio0=wireplumber Audio1=wireplumber " ]; }
vm_wait 5 pw_reserved
vm_check pipewire-holds-reservations "reservations: $(reservations)" pw_reserved
vm_wait 15 both_running
vm_check pipewire-sinks-kept-awake "both sinks RUNNING $VM_WAITED s after: $(as_user "$KEEPALIVED" status 2>&1 | grep -E '^(sound server|output)' | tr '\n' ' ')" both_running
vm_check cards-left-to-pipewire "open substreams: $(owners | tr '\n' ' ')" only_owner pipewire
errors=$(busy_errors)
vm_check pipewire-never-busy "lines with 'resource busy' or 'Start error' in the user's journal: $((errors - busy1)) since PipeWire started" [ "$errors" -eq "$busy1" ]
as_user "$KEEPALIVED" stop >/dev/null 2>&1
vm_finish
