#!/bin/sh
# vm: release=yes devices=hda mode=systemd timeout=300
# The Debian package's maintainer scripts under a real systemd (PID 1): `dpkg -i` installs the
# command, the man page, the completions and both units, and neither enables nor starts the
# system unit; `systemctl enable --now` is what starts it; `dpkg -r` stops it and keeps the
# conffile; `dpkg -P` removes the conffile, its directory and the unit's enablement.
# Between the install and `enable --now`, the package's user unit under `systemd --user` for a
# user whose manager logind started (`loginctl enable-linger`, as at a login), on the HDA card
# directly (no sound server in the guest; the user is in the audio group): it plays as that
# user, `keepalived status` finds it on the user's default socket, the journal has its lines,
# and `systemctl --user stop` ends it. (One guest for both: a boot and an install fewer.)
. "$VM_GUEST/vmlib.sh"
UNIT=keepalived-audio.service
CONF=/etc/keepalived-audio/keepalived-audio.conf
# This machine's architecture: dist/ may also hold a package built for another.
deb=$(ls -t "$VM_REPO"/dist/keepalived-audio_*_$(dpkg --print-architecture).deb 2>/dev/null | head -1)
if [ -z "$deb" ]; then vm_fail package-built "no dist/keepalived-audio_*_$(dpkg --print-architecture).deb: run scripts/package first"; vm_finish; fi
# The host's policy-rc.d (a container's "never start services") would hide what the package's
# scripts do; a real box has none. mandb over 9p under TCG takes minutes: the index is not tested.
rm -f /usr/sbin/policy-rc.d /var/lib/man-db/auto-update
version=$(dpkg-deb -f "$deb" Version)

out=$(dpkg -i "$deb" 2>&1); rc=$?
vm_check install "dpkg -i $(basename "$deb"): exit $rc" [ $rc -eq 0 ]
v=$(keepalived --version 2>&1)
vm_check version "keepalived --version: $v (package $version), $(command -v keepalived)" [ "$v" = "$version" -a "$(command -v keepalived)" = /usr/bin/keepalived ]
page=$(man -w keepalived 2>&1)
vm_check man-page "man -w keepalived: $page" [ "$page" = /usr/share/man/man1/keepalived.1.gz ]
vm_check completions "bash, zsh and fish completions installed" test -s /usr/share/bash-completion/completions/keepalived \
    -a -s /usr/share/zsh/vendor-completions/_keepalived -a -s /usr/share/fish/vendor_completions.d/keepalived.fish
# bash-completion loads the file on the first <TAB> after `keepalived`; this is what it runs.
vm_check bash-completion-loads "complete -p keepalived after sourcing: $(bash -c '. /usr/share/bash-completion/completions/keepalived && complete -p keepalived' 2>&1)" \
    bash -c '. /usr/share/bash-completion/completions/keepalived && complete -p keepalived'
vm_check conffile "dpkg lists $CONF as a conffile" sh -c "dpkg-query -W -f='\${Conffiles}' keepalived-audio | grep -q ' $CONF '"
exec_start=$(systemctl show -p ExecStart --value $UNIT | grep -o 'path=[^ ;]*')
state="$(systemctl is-enabled $UNIT) / $(systemctl is-active $UNIT)"
vm_check system-unit-not-enabled "$UNIT: $state, $exec_start (dpkg said: $(echo "$out" | grep -i 'not starting' | tr -s ' '))" \
    [ "$state" = "disabled / inactive" -a "$exec_start" = path=/usr/bin/keepalived ]
user_state=$(systemctl --global is-enabled keepalived.service 2>&1)
vm_check user-unit-installed "/usr/lib/systemd/user/keepalived.service, globally $user_state" \
    [ -f /usr/lib/systemd/user/keepalived.service -a "$user_state" = disabled ]

# The user unit, with the system unit installed and not started.
udevadm settle --timeout=60
useradd -m -G audio kaudio
uid=$(id -u kaudio)
export XDG_RUNTIME_DIR=/run/user/$uid
# setpriv, not runuser and env: two execs and a PAM session fewer in every poll under TCG.
as_user() { HOME=/home/kaudio USER=kaudio LOGNAME=kaudio setpriv --reuid=kaudio --regid=kaudio --init-groups "$@"; }

loginctl enable-linger kaudio; rc=$?
manager() { [ "$(systemctl is-active user@$uid.service)" = active ] && [ -S $XDG_RUNTIME_DIR/systemd/private ]; }
vm_wait 60 manager
vm_check user-manager "loginctl enable-linger: exit $rc; user@$uid.service $(systemctl is-active user@$uid.service) after $VM_WAITED s" manager

# No sound server for this user, as this part means: this root enables PipeWire's and
# PulseAudio's user sockets side by side (no real box has both), and a running WirePlumber
# reserves the card (org.freedesktop.ReserveDevice1), which keepalived then leaves to it.
servers="wireplumber.service pipewire.service pipewire.socket pulseaudio.service pulseaudio.socket"
as_user systemctl --user stop $servers 2>/dev/null
as_user systemctl --user mask $servers >/dev/null 2>&1

device="hw:CARD=$(cat /proc/asound/card${VM_CARD_HDA:-0}/id),DEV=0"
as_user mkdir -p /home/kaudio/.config/keepalived
echo "KEEPALIVED_OPTIONS=\"--device $device\"" | as_user tee /home/kaudio/.config/keepalived/keepalived.conf >/dev/null
as_user systemctl --user start keepalived.service; rc=$?
playing() { [ "$(as_user systemctl --user show -p StatusText --value keepalived.service)" = "playing on $device" ]; }
vm_wait 20 playing
vm_check user-unit-plays "systemctl --user start: exit $rc; $(as_user systemctl --user show -p ActiveState -p SubState -p StatusText keepalived.service | tr '\n' ' ')" playing
pid=$(as_user systemctl --user show -p MainPID --value keepalived.service)
vm_check runs-as-user "pid $pid runs as $(stat -c %U /proc/$pid 2>&1), PCM $(grep -h state /proc/asound/card0/pcm0p/sub0/status 2>&1 | tr -s ' ')" \
    sh -c "[ \$(stat -c %u /proc/$pid) = $uid ] && grep -q RUNNING /proc/asound/card0/pcm0p/sub0/status"
out=$(as_user keepalived status 2>&1); rc=$?
vm_check user-status-default-socket "keepalived status as kaudio: exit $rc, $(echo "$out" | grep '^socket')" \
    sh -c "[ $rc -eq 0 ] && echo '$out' | grep -q '^socket: $XDG_RUNTIME_DIR/keepalived/control.sock\$'"
line=$(journalctl _SYSTEMD_USER_UNIT=keepalived.service _UID=$uid -o json --no-pager | grep -m1 '"MESSAGE":"playing')
vm_check user-journal "$(echo "$line" | grep -o '"PRIORITY":"[0-9]"') $(echo "$line" | grep -o '"MESSAGE":"[^"]*"')" \
    sh -c "echo '$line' | grep -q '\"PRIORITY\":\"6\"'"
as_user systemctl --user stop keepalived.service; rc=$?
vm_check user-unit-stops "systemctl --user stop: exit $rc; $(as_user systemctl --user is-active keepalived.service), PCM $(cat /proc/asound/card0/pcm0p/sub0/status)" \
    sh -c "[ $rc -eq 0 ] && [ ! -d /proc/$pid ] && grep -q closed /proc/asound/card0/pcm0p/sub0/status"

systemctl enable --now keepalived-audio >/dev/null 2>&1
active() { [ "$(systemctl is-active $UNIT)" = active ]; }
vm_wait 20 active
pid=$(systemctl show -p MainPID --value $UNIT)
state="$(systemctl is-enabled $UNIT) / $(systemctl is-active $UNIT)"
vm_check enable-now "$state, pid $pid, $(systemctl show -p StatusText $UNIT)" [ "$state" = "enabled / active" ]

dpkg -r keepalived-audio >/dev/null 2>&1; rc=$?
gone() { [ ! -d /proc/$pid ]; }
vm_wait 15 gone
vm_check remove-stops "dpkg -r: exit $rc; pid $pid $( [ -d /proc/$pid ] && echo still runs || echo gone), unit $(systemctl is-active $UNIT 2>&1)" \
    [ $rc -eq 0 -a ! -d /proc/$pid -a ! -e /usr/bin/keepalived -a ! -e /lib/systemd/system/$UNIT ]
vm_check remove-keeps-conffile "$CONF $( [ -f $CONF ] && echo kept || echo gone), status $(dpkg-query -W -f='${Status}' keepalived-audio)" \
    sh -c "[ -f $CONF ] && dpkg-query -W -f='\${Status}' keepalived-audio | grep -q config-files"

dpkg -P keepalived-audio >/dev/null 2>&1; rc=$?
links=$(find /etc/systemd/system -name $UNIT 2>/dev/null | tr '\n' ' ')
vm_check purge "dpkg -P: exit $rc; /etc/keepalived-audio $( [ -e /etc/keepalived-audio ] && echo left || echo gone), enablement links: ${links:-none}" \
    sh -c "[ $rc -eq 0 ] && [ ! -e /etc/keepalived-audio ] && [ -z '$links' ] && ! dpkg-query -W keepalived-audio >/dev/null 2>&1"
vm_finish
