# Helpers for sh test scripts inside the VM rig's guest: . "$VM_GUEST/vmlib.sh"
#   vm_ok NAME DETAIL / vm_fail NAME DETAIL / vm_skip NAME DETAIL   one result line each
#   vm_check NAME DETAIL CMD...      ok if CMD succeeds, FAIL otherwise
#   vm_wait SECONDS CMD...           poll CMD (every 50 ms; a slow CMD less often) until it succeeds; 1 on timeout;
#                                    sets VM_WAITED to the seconds waited (e.g. 0.35)
#   vm_host VERB ARGS...             ask the host (see vmhost)
#   vm_codec_power [CARD [CODEC]]    prints "ON_MS OFF_MS" of an HDA codec
#   vm_finish                        a note of the guest's CPU and the test's own; exit 1 if any FAIL
#                                    was reported, else 0
VM_FAILED=0
vm_ok()   { echo "ok $1: $2"; }
vm_fail() { echo "FAIL $1: $2"; VM_FAILED=$((VM_FAILED + 1)); }
vm_skip() { echo "SKIP $1: $2"; }
vm_note() { echo "# $*"; }
vm_check() {
    _n="$1"; _d="$2"; shift 2
    if "$@"; then vm_ok "$_n" "$_d"; else vm_fail "$_n" "$_d"; fi
}
_vm_ms() { _vm_now; echo "$VM_NOW"; }   # uptime in centiseconds
# Sets VM_NOW to the uptime in centiseconds without a process (the clock of every poll).
_vm_now() { read -r _u _ </proc/uptime; VM_NOW=${_u%.*}${_u#*.}; VM_NOW=${VM_NOW#0}; }
# The CPU this shell's children have used, in clock ticks (fields 16 and 17 of its stat).
_vm_children_cpu() { read -r _s </proc/$$/stat; set -- ${_s##*) }; VM_CHILDREN=$((${14} + ${15})); }
VM_WAIT_POLLS=0
VM_WAIT_TICKS=0
vm_wait() {
    _lim=$1; shift
    _vm_children_cpu; _vw_cpu0=$VM_CHILDREN
    _vm_now; _t0=$VM_NOW
    _end=$((_t0 + _lim * 100))
    while :; do
        _vw_c0=$VM_NOW
        VM_WAIT_POLLS=$((VM_WAIT_POLLS + 1))
        if "$@"; then
            _vm_now; VM_WAITED=$(printf '%d.%02d' $(((VM_NOW - _t0) / 100)) $(((VM_NOW - _t0) % 100)))
            _vm_children_cpu; VM_WAIT_TICKS=$((VM_WAIT_TICKS + VM_CHILDREN - _vw_cpu0))
            return 0
        fi
        _vm_now
        if [ "$VM_NOW" -ge "$_end" ]; then
            VM_WAITED=$(printf '%d.%02d' $(((VM_NOW - _t0) / 100)) $(((VM_NOW - _t0) % 100)))
            _vm_children_cpu; VM_WAIT_TICKS=$((VM_WAIT_TICKS + VM_CHILDREN - _vw_cpu0))
            return 1
        fi
        # Why: under TCG a check that starts a program (keepalived status, pactl) costs tens
        # to hundreds of ms of the guest's CPU; polled every 50 ms, waiting took the vCPU the
        # system under test needed, and a slower guest then polled still more. A check waits
        # about as long as it took, so waiting costs at most half the vCPU.
        _vw_c=$((VM_NOW - _vw_c0))
        if [ "$_vw_c" -lt 5 ]; then sleep 0.05
        elif [ "$_vw_c" -lt 20 ]; then sleep 0.15
        else sleep 0.4
        fi
        _vm_now
    done
}
vm_host() { "$VM_GUEST/vmhost" "$@"; }
vm_codec_power() {
    _b=/sys/class/sound/hwC${1:-0}D${2:-0}
    echo "$(cat $_b/power_on_acct) $(cat $_b/power_off_acct)"
}
vm_finish() {
    _vm_children_cpu
    read -r _ _u _n _s _ </proc/stat
    vm_note "cpu: the guest busy $(((_u + _n + _s) / 100)) s, the test's commands $((VM_CHILDREN / 100)) s, $((VM_WAIT_TICKS / 100)) s of it in $VM_WAIT_POLLS polls"
    [ "$VM_FAILED" -eq 0 ]; exit $?
}
