#!/bin/sh
# The demonstration in README.md: a private mosquitto, keepalived publishing its discovery to
# it, Home Assistant core discovering the entities; their states through HA's REST API; then
# keepalived stopped (its will/offline message) and the entities unavailable. Run as root.
#
#   Tests/HomeAssistant/demo.sh [WORKDIR]      (default: a new directory under /tmp)
#
# KEEPALIVED=path/to/keepalived overrides .build/debug/keepalived; without a binary the three
# discovery configs and a state are published with mosquitto_pub instead (as keepalived 0.2.0
# publishes them).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=${1:-$(mktemp -d /tmp/ha-demo.XXXXXX)}
mkdir -p "$work"
ka=${KEEPALIVED:-$repo/.build/debug/keepalived}
ha() { python3 "$here/homeassistant.py" "$@"; }
cfg=$work/config

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'listener %s 127.0.0.1\nallow_anonymous true\nuser root\npersistence false\n' "$port" >"$work/mosquitto.conf"
mpid= kpid=
cleanup() {
    ha stop --config-dir "$cfg" || true
    [ -z "$kpid" ] || kill -TERM "$kpid" 2>/dev/null || true
    [ -z "$mpid" ] || kill -TERM "$mpid" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
/usr/sbin/mosquitto -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
mpid=$!
sleep 0.5
echo "== mosquitto pid $mpid on 127.0.0.1:$port"

if [ -x "$ka" ]; then
    "$ka" run -d null --socket "$work/k.sock" --mqtt "mqtt://127.0.0.1:$port" --mqtt-prefix keepalived/test \
        >"$work/keepalived.log" 2>&1 &
    kpid=$!
    echo "== keepalived pid $kpid ($ka)"
else
    echo "== no $ka: publishing keepalived's discovery configs with mosquitto_pub"
    dev='"device":{"identifiers":["keepalived_test"],"manufacturer":"keepalived","name":"keepalived on vm"}'
    av='"availability_topic":"keepalived/test/availability","state_topic":"keepalived/test/state"'
    pub() { mosquitto_pub -p "$port" -r -t "$1" -m "$2"; }
    pub homeassistant/binary_sensor/keepalived_test/playing/config \
        "{$dev,$av,\"device_class\":\"sound\",\"name\":\"Music playing\",\"object_id\":\"keepalived_vm_playing\",\"unique_id\":\"keepalived_test_playing\",\"value_template\":\"{{ 'ON' if value_json.activity.state == 'active' else 'OFF' }}\"}"
    pub homeassistant/sensor/keepalived_test/player/config \
        "{$dev,$av,\"name\":\"Player\",\"object_id\":\"keepalived_vm_player\",\"unique_id\":\"keepalived_test_player\",\"value_template\":\"{{ value_json.activity.programs | join(', ') if value_json.activity.programs else 'none' }}\"}"
    pub homeassistant/sensor/keepalived_test/keepalive/config \
        "{$dev,$av,\"name\":\"Keep-alive\",\"object_id\":\"keepalived_vm_keepalive\",\"unique_id\":\"keepalived_test_keepalive\",\"value_template\":\"{{ value_json.state }}\"}"
    pub keepalived/test/availability online
    pub keepalived/test/state '{"activity":{"programs":[],"state":"idle"},"state":"playing"}'
fi

echo "== prepare"
ha prepare
echo "== start"
ha start --broker "127.0.0.1:$port" --config-dir "$cfg"
for e in "binary_sensor.keepalived_vm_playing off" "sensor.keepalived_vm_player none" \
         "sensor.keepalived_vm_keepalive playing"; do
    set -- $e
    ha --config-dir "$cfg" wait-state "$1" "$2" --timeout 30 >/dev/null
done
echo "== states --match keepalived"
ha --config-dir "$cfg" states --match keepalived
echo "== call homeassistant update_entity sensor.keepalived_vm_keepalive"
ha --config-dir "$cfg" call homeassistant update_entity sensor.keepalived_vm_keepalive
if [ -n "$kpid" ]; then
    echo "== SIGTERM to keepalived: its entities go unavailable"
    kill -TERM "$kpid"
    kpid=
    for e in binary_sensor.keepalived_vm_playing sensor.keepalived_vm_player sensor.keepalived_vm_keepalive; do
        ha --config-dir "$cfg" wait-state "$e" unavailable --timeout 30 >/dev/null
        echo "$e: unavailable"
    done
fi
echo "== Home Assistant's warnings and errors"
grep -E ' (WARNING|ERROR) ' "$cfg/home-assistant.log" | cut -c1-400 || true
echo "== stop"
