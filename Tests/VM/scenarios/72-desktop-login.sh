#!/bin/sh
# vm: devices=hda power_save=1 mode=systemd timeout=600
# A desktop user's login with the package's user unit, in the order a real one has: the package
# installed and `keepalived.service` enabled for every user (`systemctl --global enable`, no
# options file: the shipped default, `default`) before anyone logs in; PipeWire, WirePlumber and
# PipeWire's pulse server as Debian's pipewire-audio installs them (socket-activated user units,
# enabled globally; the pulse server from Tests/Fixtures/pipewire-pulse, as the package's
# pipewire-pulse.socket/.service would run it; PulseAudio masked); then logind starts the user's
# manager (`loginctl enable-linger`), which brings keepalived and the sound services up side by
# side. Each of three logins in this boot (the manager stopped in between: `disable-linger`)
# must show:
# - keepalived's stream on the HDA card's sink within a bound of the sink's appearance (the
#   server's own events, stamped in the guest by a watcher the same manager starts);
# - no line of priority warning or worse from the daemon in the journal from that login;
# - `keepalived status` as the user: every output playing and no recovery;
# - the codec never powering off from then on (power_off_acct, snd_hda_intel power_save=1).
# Issue 42 saw two logins of three on a real box leave a warning and a recovery: the `default`
# stream opened before WirePlumber had made the card's sink and stalled for 3 s, or the first open
# failed with EIO. Here, before keepalived waited for the server's first sink, every login had the
# second: WirePlumber 0.4 fails a stream it finds no sink for ("no node available"), which the
# pulse server passes on as EIO (`waiting for device (server-gone) … hw_params: EIO`, then
# `recovered … reason=server-gone`).
. "$VM_GUEST/vmlib.sh"
card=${VM_CARD_HDA:-0}
# Requirement: an output that appears is picked up within 2 s (docs/usage.md). The margin:
# the stream must be on the card's sink this long after the server made it (guest time): 0.77-2.60 s
# were measured on a host busy with other guests and builds (Tests/VM/README.md).
bound=8
# A guest the host starves (TCG, two guests and the host's test lanes on two cores) stretches
# that: one CI run saw 13.84 s. The guest's idle time in the window tells a starved guest (busy
# all along: the server, WirePlumber and keepalived working through their steps) from one where
# something waited on a timer or missed the sink's event (idle): the requirement's 2 s of idle,
# within a bound that still catches a stream that never comes.
idle_bound=2
starved_bound=40
logins=3

deb=$(ls -t "$VM_REPO"/dist/keepalived-audio_*_$(dpkg --print-architecture).deb 2>/dev/null | head -1)
if [ -z "$deb" ]; then vm_fail package-built "no dist/keepalived-audio_*_$(dpkg --print-architecture).deb: run scripts/package first"; vm_finish; fi
rm -f /usr/sbin/policy-rc.d /var/lib/man-db/auto-update
dpkg -i "$deb" >/dev/null 2>&1 || { vm_fail install "dpkg -i $deb failed"; vm_finish; }
udevadm settle --timeout=60

# Debian's pipewire-pulse package (it conflicts with PulseAudio, which this root also has): its two
# user units, enabled for every user as its postinst does, running the tests' pulse server
# configuration. PulseAudio's units, which this root enables too, masked: no desktop runs both.
mkdir -p /etc/vm-rig
cp "$VM_REPO/Tests/Fixtures/pipewire-pulse/pipewire-pulse.conf" /etc/vm-rig/pipewire-pulse.conf
chmod 644 /etc/vm-rig/pipewire-pulse.conf
cat >/etc/systemd/user/pipewire-pulse.socket <<'EOF'
[Unit]
Description=PipeWire PulseAudio
ConditionUser=!root
Conflicts=pulseaudio.socket
[Socket]
Priority=6
ListenStream=%t/pulse/native
SocketMode=0666
DirectoryMode=0755
[Install]
WantedBy=sockets.target
EOF
cat >/etc/systemd/user/pipewire-pulse.service <<'EOF'
[Unit]
Description=PipeWire PulseAudio (Tests/Fixtures/pipewire-pulse)
Requires=pipewire-pulse.socket
ConditionUser=!root
Wants=pipewire.service wireplumber.service
After=pipewire.service wireplumber.service
Conflicts=pulseaudio.service
[Service]
Type=simple
ExecStart=/usr/bin/pipewire -c /etc/vm-rig/pipewire-pulse.conf
Restart=on-failure
Slice=session.slice
[Install]
Also=pipewire-pulse.socket
WantedBy=default.target
EOF

# The watcher: the server's own events from the start of the session, each stamped with the
# guest's uptime when read, and a listing after each sink or sink-input event; it writes when the
# card's sink appeared and when a stream of keepalived's was first on it. A unit of the same
# manager (its socket-activated connection to the pulse server is what a desktop's panel makes),
# so it starts with the others rather than after the test shell noticed the login.
cat >/etc/vm-rig/sink-watch.py <<'EOF'
import json, queue, re, subprocess, sys, threading
out = sys.argv[1]
def clock():
    # The guest's uptime and its idle time (one vCPU): how long the guest waited, with nothing
    # to run, between two events (a slow guest runs all along; a program waiting for a timer
    # or an event leaves it idle).
    up, idle = open("/proc/uptime").read().split()[:2]
    return float(up), float(idle)
def up(): return clock()[0]
def listing(what):
    try:
        r = subprocess.run(["pactl", "-f", "json", "list", what], capture_output=True, text=True, timeout=20)
        return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else []
    except (subprocess.SubprocessError, ValueError):
        return []
log = open(out + ".events", "w", buffering=1)
res = open(out, "w", buffering=1)
res.write(f"start {up():.2f}\n")
# Stamped by a thread of their own as they arrive: a listing takes a good part of a second under
# TCG, and events read after one would carry its end as their time.
events = queue.Queue()
idles = {}  # event time -> the guest's idle time then
def read():
    sub = subprocess.Popen(["stdbuf", "-oL", "pactl", "subscribe"], stdout=subprocess.PIPE, text=True)
    for line in sub.stdout:
        t, idle = clock()
        log.write(f"{t:.2f} {line}")
        idles[t] = idle
        events.put((t, line))
threading.Thread(target=read, daemon=True).start()
seen = []  # (time, line) of every event so far
sink = None
def first(kind, index, since):
    return next((t for t, l in seen if t >= since and re.search(rf"on {kind} #{index}$", l.strip())), None)
while True:
    # A listing after each batch of events about sinks or streams: which sink is the card's,
    # which stream keepalived's; the times are the events' own.
    batch = [events.get()]
    while not events.empty(): batch.append(events.get())
    seen += batch
    if not any(re.search(r"on (sink|sink-input) #", l) for _, l in batch): continue
    if sink is None:
        card = [s for s in listing("sinks") if s.get("name", "").startswith("alsa_output.pci")]
        if not card: continue
        sink = card[0]["index"]
        made = first("sink", sink, 0)
        # Its 'new' event may still be on its way (the listing can overtake the subscription).
        for _ in range(6):
            if made is not None: break
            try: seen.append(events.get(timeout=0.5))
            except queue.Empty: pass
            while not events.empty(): seen.append(events.get())
            made = first("sink", sink, 0)
        # No 'new' event: it was there before the subscription (the check says so).
        res.write(f"sink {sink} {card[0]['name']} {made if made is not None else up():.2f} {'event' if made is not None else 'present'} {idles.get(made, clock()[1]):.2f}\n")
        sink_at = made if made is not None else 0
    for i in listing("sink-inputs"):
        if i.get("sink") == sink and i.get("properties", {}).get("application.process.binary") == "keepalived":
            # Its first event since the sink appeared: made on it then ('new'), or moved there
            # ('change'). Events read meanwhile count too.
            while not events.empty(): seen.append(events.get())
            at = first("sink-input", i["index"], sink_at)
            res.write(f"stream {i['index']} {at if at is not None else up():.2f} {'event' if at is not None else 'listed'} {idles.get(at, clock()[1]):.2f}\n")
            sys.exit(0)
EOF
chmod 644 /etc/vm-rig/sink-watch.py
cat >/etc/systemd/user/vm-sink-watch.service <<'EOF'
[Unit]
Description=The VM rig's watch of the pulse server's sinks
After=pipewire-pulse.socket
Requires=pipewire-pulse.socket
[Service]
ExecStart=/usr/bin/python3 /etc/vm-rig/sink-watch.py %t/vm-sink-watch
[Install]
WantedBy=default.target
EOF
systemctl --global mask pulseaudio.service pulseaudio.socket >/dev/null 2>&1
systemctl --global enable pipewire-pulse.service vm-sink-watch.service >/dev/null 2>&1
# The package's user unit, for every user, with no options file.
systemctl --global enable keepalived.service >/dev/null 2>&1
vm_check units-enabled "$(systemctl --global is-enabled keepalived.service pipewire-pulse.socket pipewire-pulse.service pipewire.socket pipewire.service wireplumber.service pulseaudio.socket vm-sink-watch.service | tr '\n' ' ')" \
    sh -c '[ "$(systemctl --global is-enabled keepalived.service pipewire-pulse.socket pipewire-pulse.service pipewire.socket vm-sink-watch.service pulseaudio.socket | tr "\n" " ")" = "enabled enabled enabled enabled enabled masked " ]'

useradd -m -G audio kdesk
uid=$(id -u kdesk)
export XDG_RUNTIME_DIR=/run/user/$uid
# setpriv, not runuser and env: two execs and a PAM session fewer in every poll under TCG.
as_user() {
    HOME=/home/kdesk USER=kdesk LOGNAME=kdesk DBUS_SESSION_BUS_ADDRESS=unix:path=$XDG_RUNTIME_DIR/bus \
        setpriv --reuid=kdesk --regid=kdesk --init-groups "$@"
}
manager() { [ "$(systemctl is-active user@$uid.service)" = active ] && [ -S $XDG_RUNTIME_DIR/bus ]; }
manager_gone() { ! systemctl -q is-active user@$uid.service && [ ! -d $XDG_RUNTIME_DIR ]; }
watch=$XDG_RUNTIME_DIR/vm-sink-watch
watched() { grep -q '^stream ' $watch 2>/dev/null; }
field() { awk -v k="$1" -v n="$2" '$1 == k {print $n; exit}' $watch 2>/dev/null; }
status_json() { as_user keepalived status --json 2>&1; }
# Every output playing, none recovered (a status that is no JSON fails).
no_recovery() {
    status_json | python3 -c '
import json, sys
s = json.load(sys.stdin)
o = s["outputs"]
sys.exit(0 if o and all(x["state"] == "playing" and x["recoveries"] == 0 for x in o) else 1)'
}
describe_status() {
    status_json | python3 -c '
import json, sys
try: s = json.load(sys.stdin)
except ValueError: print("no status"); sys.exit()
print("; ".join("%s %s sink %s recoveries %s %s" % (x["device"], x["state"], x.get("sink"), x["recoveries"], x.get("recoveriesByReason") or "") for x in s["outputs"]) or "no output")'
}
# The daemon's journal since the login, "MONOTONIC <PRIORITY> MESSAGE" a line: every line of a
# keepalived process of the user's, whichever fields journald could give it.
daemon_journal() {
    journalctl --after-cursor="$cursor" _UID=$uid -o json --no-pager | python3 -c '
import json, sys
for l in sys.stdin:
    e = json.loads(l)
    if "keepalived" in (e.get("SYSLOG_IDENTIFIER"), e.get("_COMM")):
        print("%.3f <%s> %s" % (int(e["__MONOTONIC_TIMESTAMP"]) / 1e6, e.get("PRIORITY"), e.get("MESSAGE")))'
}

i=0
while [ $i -lt $logins ]; do
    i=$((i + 1)); l=login$i
    cursor=$(journalctl -n 1 --show-cursor --no-pager 2>/dev/null | sed -n 's/^-- cursor: //p')
    [ -n "$cursor" ] || vm_fail $l-journal-cursor "journalctl gave no cursor: the journal checks would read nothing"
    read -r login_at _ </proc/uptime
    loginctl enable-linger kdesk; rc=$?
    vm_wait 90 manager
    vm_check $l-user-manager "enable-linger: exit $rc; user@$uid.service $(systemctl is-active user@$uid.service) after $VM_WAITED s" manager
    vm_wait 120 watched
    sink_at=$(field sink 4); stream_at=$(field stream 3); start_at=$(field start 2)
    set -- $(vm_codec_power $card); off0=$2
    vm_note "$l: login at $login_at, watcher at ${start_at:-?}, the card's sink at ${sink_at:-?} ($(field sink 5)), keepalived's stream on it at ${stream_at:-?} ($(field stream 4)); unit $(as_user systemctl --user show -p ActiveState,ExecMainStartTimestampMonotonic,StatusText --value keepalived.service | tr '\n' ' ')"
    vm_check $l-sink-made "the card's sink $(field sink 3) made $(awk -v a="$sink_at" -v b="$login_at" 'BEGIN { if (a == "") print "never"; else printf "%.2f s after the login", a - b }'), not there when the watcher began" \
        sh -c "[ -n '$sink_at' ] && [ '$(field sink 5)' = event ]"
    delay=$(awk -v a="$sink_at" -v b="$stream_at" 'BEGIN { if (a == "" || b == "") print "none"; else printf "%.2f", b - a }')
    waited=$(awk -v a="$(field sink 6)" -v b="$(field stream 5)" 'BEGIN { if (a == "" || b == "") print "none"; else printf "%.2f", b - a }')
    vm_check $l-stream-on-sink "keepalived's stream on the card's sink $delay s after the sink appeared, the guest idle $waited s of them (bound $bound s, or $idle_bound s idle within $starved_bound s)" \
        awk -v d="$delay" -v w="$waited" -v m="$bound" -v i="$idle_bound" -v s="$starved_bound" \
            'BEGIN { exit !(d != "none" && (d <= m || (w != "none" && w <= i && d <= s))) }'
    # Kept awake from then on: the sink runs, the codec never powers off. 12 s: twice WirePlumber's
    # 5 s suspend of an idle node, and the 3 s keepalived waits for progress before it recovers.
    sleep 12
    set -- $(vm_codec_power $card); off1=$2
    vm_check $l-codec-awake "power_off_acct +$((off1 - off0)) ms over the 12 s after the stream reached the sink; sinks $(as_user pactl list short sinks 2>&1 | cut -f2,5 | tr '\n\t' '; ')" \
        sh -c "[ $off1 -eq $off0 ] && runuser -u kdesk -- env XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR pactl list short sinks | grep alsa_output.pci | grep -q RUNNING"
    vm_check $l-no-recovery "keepalived status: $(describe_status)" no_recovery
    warnings=$(daemon_journal | awk '$2 ~ /^<[0-4]>$/')
    vm_check $l-no-warning "lines of priority <= 4 in the daemon's journal since the login: $(echo "$warnings" | grep -c .)$(echo "$warnings" | head -3 | sed 's/^/ | /' | tr -d '\n')" \
        [ -z "$warnings" ]
    vm_note "$l: the unit's journal:"
    daemon_journal | grep -v "<7>" | head -30 | sed 's/^/#   /'
    if [ -z "$stream_at" ] || [ -n "$warnings" ] || ! no_recovery; then
        vm_note "$l: the server's events:"; grep -E "sink|server|card" $watch.events 2>&1 | head -50 | sed 's/^/#   /'
        vm_note "$l: the user's journal:"; journalctl --after-cursor="$cursor" _UID=$uid -o short-monotonic --no-pager 2>&1 | grep -v -E "systemd\[" | head -40 | sed 's/^/#   /'
    fi
    # Logged out: the manager stops, and with it keepalived and the sound services.
    loginctl disable-linger kdesk
    loginctl terminate-user kdesk 2>/dev/null
    vm_wait 60 manager_gone
    vm_check $l-logout "user@$uid.service $(systemctl is-active user@$uid.service) $VM_WAITED s after disable-linger; card: $(head -1 /proc/asound/card$card/pcm0p/sub0/status)" manager_gone
done
vm_finish
