#!/bin/sh
# vm: devices=hda,usb power_save=1 hda_wav=yes mode=systemd smp=2 timeout=420
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
. "$VM_GUEST/vmlib.sh"
udevadm settle --timeout=60
useradd -m -G audio kdesk
uid=$(id -u kdesk)
export XDG_RUNTIME_DIR=/run/user/$uid
as_user() { runuser -u kdesk -- env XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR HOME=/home/kdesk DBUS_SESSION_BUS_ADDRESS=unix:path=$XDG_RUNTIME_DIR/bus "$@"; }
loginctl enable-linger kdesk
manager() { [ "$(systemctl is-active user@$uid.service)" = active ] && [ -S $XDG_RUNTIME_DIR/bus ]; }
vm_wait 60 manager
vm_check user-session "user@$uid.service $(systemctl is-active user@$uid.service), session bus $(ls $XDG_RUNTIME_DIR/bus 2>&1) after $VM_WAITED s" manager

# This root enables both servers' user sockets (it has PipeWire and PulseAudio installed side by
# side, which no desktop does): a PulseAudio desktop has no PipeWire, so it is masked here.
# Left running, WirePlumber takes the same cards and PulseAudio cannot resume its sinks.
as_user systemctl --user stop wireplumber.service pipewire.service pipewire.socket 2>/dev/null
as_user systemctl --user mask wireplumber.service pipewire.service pipewire.socket >/dev/null 2>&1
sinks() { as_user pactl list short sinks 2>/dev/null; }
two_sinks() { [ "$(sinks | grep -c alsa_output)" -eq 2 ]; }
as_user systemctl --user start pulseaudio.socket pulseaudio.service
vm_wait 30 two_sinks
vm_check server-owns-both "PulseAudio (stock default.pa) after $VM_WAITED s: $(sinks | cut -f2,5 | tr '\n\t' '; ')" two_sinks
hda_sink=$(sinks | cut -f2 | grep alsa_output.pci | head -1)
usb_sink=$(sinks | cut -f2 | grep alsa_output.usb | head -1)
suspended() { [ "$(sinks | grep -c SUSPENDED)" -ge 2 ]; }
vm_wait 30 suspended
vm_check sinks-suspended "both sinks suspended, devices closed: $(cat /proc/asound/card0/pcm0p/sub0/status | head -1), $(sinks | cut -f2,5 | tr '\n\t' '; ')" suspended

# A loud 1 s tone, the user's own sound (the host finds it in the codec's WAV). Played once
# before keepalived starts: the server resumes a suspended sink for it on its own.
python3 - <<'PY'
import math, struct, wave
with wave.open("/tmp/tone.wav", "wb") as w:
    w.setnchannels(2); w.setsampwidth(2); w.setframerate(48000)
    w.writeframes(b"".join(struct.pack("<hh", v, v) for v in (int(16000 * math.sin(2 * math.pi * 1000 * i / 48000)) for i in range(48000))))
PY
chmod 644 /tmp/tone.wav
play_tone() { timeout 15 runuser -u kdesk -- env XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR HOME=/home/kdesk paplay -d "$hda_sink" /tmp/tone.wav 2>&1; }
t0=$(_vm_ms); out=$(play_tone); rc=$?; t1=$(_vm_ms)
vm_check user-sound-before "paplay before keepalived: exit $rc in $(((t1 - t0) / 100)).$(((t1 - t0) % 100)) s $out" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || { as_user pactl list sinks 2>&1 | grep -i -E "^Sink|State|Suspend" | sed 's/^/#   /'; loginctl list-sessions --no-legend | sed 's/^/#   /'; ls -l /dev/snd | sed 's/^/#   /'; getfacl /dev/snd/pcmC0D0p 2>/dev/null | sed 's/^/#   /'; journalctl --no-pager -u user@$uid.service -n 30 | grep -v Started | sed 's/^/#   /'; }
vm_wait 30 suspended

out=$(as_user "$KEEPALIVED" start --all --verbose 2>&1); rc=$?
vm_note "keepalived start --all: exit $rc: $out"
both_running() { [ "$(sinks | grep alsa_output | grep -c RUNNING)" -eq 2 ]; }
vm_wait 10 both_running
vm_check sinks-kept-awake "both sinks RUNNING after $VM_WAITED s: $(sinks | cut -f2,5 | tr '\n\t' '; ')" both_running
both_running || { vm_note "processes: $(pgrep -a keepalived | tr '\n' ' ') kernel: $(dmesg | grep -i -E 'segfault|traps|keepalived' | tail -3 | tr '\n' ' ')"; vm_note "journal:"; journalctl --no-pager -n 60 2>&1 | grep -i -E "pulse|alsa|reserv" | tail -30 | sed 's/^/#   /'; vm_note "keepalived:"; sed 's/^/#   /' $XDG_RUNTIME_DIR/keepalived/keepalived.log | tail -20; as_user pactl list sink-inputs 2>&1 | grep -E "Sink Input|Sink:|Corked|application.name" | sed 's/^/#   /'; }
status=$(as_user "$KEEPALIVED" status --json 2>&1)
vm_check outputs-are-sinks "$(echo "$status" | python3 -c 'import json,sys; s=json.load(sys.stdin); print([o["device"] for o in s["outputs"]], s.get("withheld"))')" \
    sh -c "echo '$status' | python3 -c 'import json,sys; s=json.load(sys.stdin); d=sorted(o[\"device\"] for o in s[\"outputs\"]); sys.exit(0 if d == sorted([\"pulse:DEVICE=$hda_sink\", \"pulse:DEVICE=$usb_sink\"]) else 1)'"
pa=$(pgrep -u kdesk -x pulseaudio | head -1)
owners() {
    for f in /proc/asound/card*/pcm*p/sub*/status; do
        # owner_pid is the thread that opened it: its process is the thread's Tgid.
        o=$(awk '/owner_pid/ {print $3}' "$f"); [ -n "$o" ] || continue
        p=$(awk '/^Tgid:/ {print $2}' /proc/$o/status 2>/dev/null)
        echo "$f:$p:$(cat /proc/$p/comm 2>/dev/null)"
    done
}
only_server() { [ -n "$(owners)" ] && ! owners | grep -v ":$pa:"; }
vm_check cards-left-to-server "open substreams: $(owners | tr '\n' ' ') (pulseaudio is $pa)" only_server
set -- $(vm_codec_power); off0=$2
sleep 8
set -- $(vm_codec_power); off1=$2
vm_check codec-awake "power_off_acct +$((off1 - off0)) ms over 8 s" [ "$off1" -eq "$off0" ]

out=$(play_tone); rc=$?
vm_check user-sound-plays "paplay of a 1 s tone: exit $rc $out" [ "$rc" -eq 0 ]
busy=$(journalctl _UID=$uid --no-pager 2>/dev/null | grep -ci busy)
vm_check server-never-busy "PulseAudio's journal: $busy lines with 'busy'" [ "$busy" -eq 0 ]

# USB unplugged, then plugged in again.
vm_host unplug usbaudio >/dev/null
usb_gone() { ! sinks | grep -q alsa_output.usb && ! as_user "$KEEPALIVED" status --json 2>/dev/null | grep -q "alsa_output.usb"; }
vm_wait 10 usb_gone
vm_check usb-dropped "USB sink and output gone after $VM_WAITED s" usb_gone
vm_host replug usbaudio >/dev/null
usb_sink_back() { sinks | grep -q alsa_output.usb; }
vm_wait 30 usb_sink_back
# RUNNING: a stream plays into the new sink, and nothing but keepalived plays (one pactl call per
# poll: the check's own cost under the emulated CPU stays small).
usb_running() { sinks | grep alsa_output.usb | grep -q RUNNING; }
vm_wait 2 usb_running
vm_check usb-back-within-2s "USB sink kept awake $VM_WAITED s after the server made it: $(sinks | cut -f2,5 | tr '\n\t' '; ')" usb_running
vm_check usb-output-back "$(as_user "$KEEPALIVED" status 2>&1 | grep '^output' | tr '\n' ' ')" sh -c "as_user() { runuser -u kdesk -- env XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR \"\$@\"; }; as_user '$KEEPALIVED' status | grep -q '^output pulse:DEVICE=alsa_output.usb.*: playing'"

# The server restarted.
as_user systemctl --user restart pulseaudio.service
vm_wait 15 both_running
vm_check server-restart "both sinks RUNNING $VM_WAITED s after the restart: $(sinks | cut -f2,5 | tr '\n\t' '; ')" both_running
pa=$(pgrep -u kdesk -x pulseaudio | head -1)
vm_check cards-left-after-restart "open substreams: $(owners | tr '\n' ' ') (pulseaudio is $pa)" only_server
as_user "$KEEPALIVED" stop >/dev/null 2>&1

# keepalived first, PulseAudio later (a session whose server starts after keepalived's unit).
as_user systemctl --user stop pulseaudio.socket pulseaudio.service
no_server() { ! pgrep -u kdesk -x pulseaudio >/dev/null; }
vm_wait 10 no_server
out=$(as_user "$KEEPALIVED" start --all --verbose 2>&1); rc=$?
vm_note "keepalived start --all without a server: exit $rc: $out"
reservations() { as_user busctl --user list 2>/dev/null | awk '/ReserveDevice1\.Audio[0-9]/ {print $1 "=" $3}' | sed 's/org.freedesktop.ReserveDevice1.//' | sort | tr '\n' ' '; }
dmix_outputs() { as_user "$KEEPALIVED" status 2>/dev/null | grep -c '^output dmix:CARD=.*: playing'; }
holds_both() { [ "$(dmix_outputs)" -eq 2 ] && [ "$(reservations)" = "Audio0=keepalived Audio1=keepalived " ]; }
vm_wait 10 holds_both
vm_check reserves-its-cards "$(dmix_outputs) dmix outputs playing, reservations: $(reservations)" holds_both
# "Device or resource busy": what a server logs when a card it opens is held (its own debug log
# also says "busy" when it skips a card in use, which is no failure).
busy_errors() { journalctl _UID=$uid --no-pager 2>/dev/null | grep -c -i -E "resource busy|Start error"; }
busy0=$(busy_errors)
# PulseAudio's debug log, to say why if it does not take a card.
mkdir -p /home/kdesk/.config/systemd/user/pulseaudio.service.d
printf '[Service]\nExecStart=\nExecStart=/usr/bin/pulseaudio --daemonize=no --log-target=journal --log-level=debug\n' >/home/kdesk/.config/systemd/user/pulseaudio.service.d/debug.conf
chown -R kdesk /home/kdesk/.config
as_user systemctl --user daemon-reload
as_user systemctl --user start pulseaudio.socket pulseaudio.service
vm_wait 30 two_sinks
vm_check server-gets-cards "PulseAudio's sinks after $VM_WAITED s: $(sinks | cut -f2,5 | tr '\n\t' '; ')" two_sinks
two_sinks || { journalctl _UID=$uid --no-pager -n 3000 2>&1 | grep -i -E "udev-detect|reserve|busy|module-alsa-card|Failed|card" | tail -30 | sed 's/^/#   /'; grep -v -E "debug: (opened|fault)" $XDG_RUNTIME_DIR/keepalived/keepalived.log | tail -40 | sed 's/^/#   /'; }
server_reserved() { [ "$(reservations)" = "Audio0=pulseaudio Audio1=pulseaudio " ]; }
vm_wait 5 server_reserved
vm_check server-holds-reservations "reservations: $(reservations)" server_reserved
vm_wait 15 both_running
vm_check moved-to-sinks "both sinks RUNNING $VM_WAITED s after the server's: $(as_user "$KEEPALIVED" status 2>&1 | grep '^output' | tr '\n' ' ')" both_running
pa=$(pgrep -u kdesk -x pulseaudio | head -1)
vm_check cards-handed-over "open substreams: $(owners | tr '\n' ' ') (pulseaudio is $pa)" only_server
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
runuser -u kdesk -- env XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR HOME=/home/kdesk DBUS_SESSION_BUS_ADDRESS=unix:path=$XDG_RUNTIME_DIR/bus \
    jackd --no-realtime -d alsa -d hw:0 -P -r 48000 -p 1024 -n 2 >/tmp/jackd.log 2>&1 &
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
kill $jack; wait $jack 2>/dev/null
vm_wait 10 holds_both
vm_check back-after-jack "$VM_WAITED s after jackd stopped: $(dmix_outputs) dmix outputs playing, reservations: $(reservations)" holds_both

# keepalived first, a PipeWire desktop later.
cp "$VM_REPO/Tests/Fixtures/pipewire-pulse/pipewire-pulse.conf" /tmp/pipewire-pulse.conf
chmod 644 /tmp/pipewire-pulse.conf
busy1=$(busy_errors)
as_user systemctl --user unmask wireplumber.service pipewire.service pipewire.socket >/dev/null 2>&1
as_user systemctl --user start pipewire.socket pipewire.service wireplumber.service
as_user systemd-run --user --quiet --unit=pipewire-pulse-private pipewire -c /tmp/pipewire-pulse.conf
pw_sinks() { [ "$(sinks | grep -c alsa_output)" -eq 2 ]; }
vm_wait 30 pw_sinks
vm_check pipewire-gets-cards "PipeWire's sinks after $VM_WAITED s: $(sinks | cut -f2,5 | tr '\n\t' '; ')" pw_sinks
pw_sinks || { journalctl _UID=$uid --no-pager -n 80 2>&1 | grep -i -E "wireplumber|pipewire|reserv" | grep -v -E "RTKit|portal|libcamera|nice-level" | tail -15 | sed 's/^/#   /'; grep -v -E "debug: (opened|fault)" $log | tail -25 | sed 's/^/#   /'; }
pw_reserved() { [ "$(reservations)" = "Audio0=wireplumber Audio1=wireplumber " ]; }
vm_wait 5 pw_reserved
vm_check pipewire-holds-reservations "reservations: $(reservations)" pw_reserved
vm_wait 15 both_running
vm_check pipewire-sinks-kept-awake "both sinks RUNNING $VM_WAITED s after: $(as_user "$KEEPALIVED" status 2>&1 | grep -E '^(sound server|output)' | tr '\n' ' ')" both_running
pw=$(pgrep -u kdesk -x pipewire | head -1)
only_pipewire() { [ -n "$(owners)" ] && ! owners | grep -v ":pipewire$"; }
vm_check cards-left-to-pipewire "open substreams: $(owners | tr '\n' ' ')" only_pipewire
errors=$(busy_errors)
vm_check pipewire-never-busy "lines with 'resource busy' or 'Start error' in the user's journal: $((errors - busy1)) since PipeWire started" [ "$errors" -eq "$busy1" ]
as_user "$KEEPALIVED" stop >/dev/null 2>&1
vm_finish
