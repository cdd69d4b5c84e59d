# Helpers for sh test scripts inside the VM rig's guest: . "$VM_GUEST/vmlib.sh"
#   vm_ok NAME DETAIL / vm_fail NAME DETAIL / vm_skip NAME DETAIL   one result line each
#   vm_check NAME DETAIL CMD...      ok if CMD succeeds, FAIL otherwise
#   vm_wait SECONDS CMD...           poll CMD (every 50 ms) until it succeeds; 1 on timeout;
#                                    sets VM_WAITED to the seconds waited (e.g. 0.35)
#   vm_host VERB ARGS...             ask the host (see vmhost)
#   vm_codec_power [CARD [CODEC]]    prints "ON_MS OFF_MS" of an HDA codec
#   vm_finish                        exit 1 if any FAIL was reported, else 0
VM_FAILED=0
vm_ok()   { echo "ok $1: $2"; }
vm_fail() { echo "FAIL $1: $2"; VM_FAILED=$((VM_FAILED + 1)); }
vm_skip() { echo "SKIP $1: $2"; }
vm_note() { echo "# $*"; }
vm_check() {
    _n="$1"; _d="$2"; shift 2
    if "$@"; then vm_ok "$_n" "$_d"; else vm_fail "$_n" "$_d"; fi
}
_vm_ms() { read -r _u _ </proc/uptime; echo "$_u" | tr -d . ; }   # uptime in centiseconds
vm_wait() {
    _lim=$1; shift
    _t0=$(_vm_ms)
    _end=$((_t0 + _lim * 100))
    while :; do
        if "$@"; then
            _t=$(_vm_ms); VM_WAITED=$(printf '%d.%02d' $(((_t - _t0) / 100)) $(((_t - _t0) % 100)))
            return 0
        fi
        _t=$(_vm_ms)
        if [ "$_t" -ge "$_end" ]; then
            VM_WAITED=$(printf '%d.%02d' $(((_t - _t0) / 100)) $(((_t - _t0) % 100)))
            return 1
        fi
        sleep 0.05
    done
}
vm_host() { "$VM_GUEST/vmhost" "$@"; }
vm_codec_power() {
    _b=/sys/class/sound/hwC${1:-0}D${2:-0}
    echo "$(cat $_b/power_on_acct) $(cat $_b/power_off_acct)"
}
vm_finish() { [ "$VM_FAILED" -eq 0 ]; exit $?; }
