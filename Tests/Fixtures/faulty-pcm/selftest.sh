#!/bin/bash
# Self-test of the faulty ALSA test PCM (needs cc, libasound2-dev, aplay, sox).
# Usage: selftest.sh    (exit 0 = all checks passed; takes ~15 s)
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/faulty-selftest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok()   { echo "ok   $*"; }
bad()  { echo "FAIL $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

"$here/build.sh" "$tmp" || { echo "FAIL build"; exit 1; }
st=$tmp/state
mkdir -p "$tmp/home" "$st"
cat > "$tmp/home/.asoundrc" <<CONF
pcm_type.faulty { lib "$tmp/libasound_module_pcm_faulty.so" }
pcm.faulty { type faulty state "$st" }
pcm.faulty2 { type faulty state "$tmp/state2" format "S24_LE" rate 48000 channels 2 }
CONF
export HOME=$tmp/home
sox -n -r 44100 -c 1 -b 16 "$tmp/t.wav" synth 2 sine 440 vol 0.01 || exit 1

ctl() { printf '%s\n' "$@" > "$st/control.tmp" && mv "$st/control.tmp" "$st/control"; }
reset() { rm -rf "$st"; mkdir -p "$st"; }
ev() { grep -c " $1" "$st/events.log" 2>/dev/null || true; }

# 1. plays in real time, records everything, little CPU
reset
/usr/bin/time -f "%e %U %S" -o "$tmp/time" aplay -q -D faulty "$tmp/t.wav"
check "aplay exit 0" [ $? -eq 0 ]
read -r wall user sys < "$tmp/time"
bytes=$(stat -c %s "$st/capture.raw")
# aplay pads the last period with silence: 88200 .. 88200 + period frames
check "capture.raw ~2 s ($bytes bytes)" test "$bytes" -ge 176400 -a "$bytes" -le 200000
check "wall clock ~2 s ($wall s)" awk -v w="$wall" 'BEGIN{exit !(w >= 1.9 && w < 3.0)}'
check "low CPU (user $user s, sys $sys s)" awk -v u="$user" -v s="$sys" 'BEGIN{exit !(u + s < 0.2)}'
check "format file" grep -qx "S16_LE 44100 1 [0-9]* [0-9]*" "$st/format"

# 2. fail-write EPIPE during playback: fault, prepare in place, more writes
reset
aplay -q -D faulty -d 1 "$tmp/t.wav" 2>/dev/null &
pid=$!
sleep 0.5
ctl "fail-write EPIPE"
wait $pid
check "aplay survives EPIPE" [ $? -eq 0 ]
check "fault then prepare then write, no reopen" awk '
	/ fault EPIPE write / { f = 1; next }
	f == 1 && / prepare / { f = 2; next }
	f == 2 && / write [0-9]/ { f = 3 }
	f && / open / { reopened = 1 }
	END { exit !(f == 3 && !reopened) }' "$st/events.log"

# 3. vanish: running aplay fails with ENODEV, opens fail; appear restores
reset
timeout 5 aplay -q -D faulty "$tmp/t.wav" 2>"$tmp/err" &
pid=$!
sleep 0.5
ctl vanish
wait $pid
check "aplay fails after vanish" [ $? -ne 0 ]
check "write error No such device" grep -q "No such device" "$tmp/err"
aplay -q -D faulty "$tmp/t.wav" 2>"$tmp/err"
check "open fails while vanished" [ $? -ne 0 ]
check "open-refused ENOENT logged" grep -q " open-refused ENOENT" "$st/events.log"
ctl appear
aplay -q -D faulty -d 1 "$tmp/t.wav"
check "aplay works after appear" [ $? -eq 0 ]

# 4. refuse-open EBUSY 500
reset
sox -n -r 44100 -c 1 -b 16 "$tmp/short.wav" trim 0 0.01
ctl "refuse-open EBUSY 500"
for _ in $(seq 200); do
	aplay -q -D faulty "$tmp/short.wav" 2>/dev/null && break
	sleep 0.01
done
refused=$(awk '/ open-refused EBUSY/ { if (!a) a = $1 } / open / { if (!b) b = $1 }
	END { printf "%d", (b - a) / 1e6 }' "$st/events.log")
check "refused for ~500 ms (${refused} ms)" test "$refused" -ge 450 -a "$refused" -le 650

# 5. format restrictions through plug:
aplay -q -D faulty2 "$tmp/short.wav" 2>/dev/null
check "faulty2 refuses S16_LE/44100 mono" [ $? -ne 0 ]
aplay -q -D plug:faulty2 "$tmp/short.wav"
check "plug:faulty2 converts" grep -qx "S24_LE 48000 2 [0-9]* [0-9]*" "$tmp/state2/format"

# 6. API-level checks (xrun, suspend/resume, fail-poll, stall, vanish)
cat > "$tmp/client.c" <<'CSRC'
#include <alsa/asoundlib.h>
#include <poll.h>
#include <time.h>
static const char *st;
static int fails;
static short buf[44100];
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void ctl(const char *cmd)
{
	char tmp[4200], path[4200];
	snprintf(tmp, sizeof tmp, "%s/control.tmp", st);
	snprintf(path, sizeof path, "%s/control", st);
	FILE *f = fopen(tmp, "w"); fprintf(f, "%s\n", cmd); fclose(f); rename(tmp, path);
}
#define CHECK(c, ...) do { int ok_ = !!(c); if (!ok_) fails++; printf(ok_ ? "ok   " : "FAIL "); \
	printf(__VA_ARGS__); printf("\n"); } while (0)
static snd_pcm_t *open_setup(int mode)
{
	snd_pcm_t *p;
	if (snd_pcm_open(&p, "faulty", SND_PCM_STREAM_PLAYBACK, mode) < 0) return NULL;
	/* 100 ms buffer, 4 periods */
	if (snd_pcm_set_params(p, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, 1, 44100, 0, 100000) < 0) return NULL;
	return p;
}
int main(int argc, char **argv)
{
	snd_pcm_t *p, *q;
	snd_pcm_uframes_t bs, ps;
	snd_pcm_sframes_t n, n2;
	int err;
	double t;
	(void)argc;
	st = argv[1];

	/* poll-driven writer: ~1 wake-up per period, no spinning */
	p = open_setup(SND_PCM_NONBLOCK);
	snd_pcm_get_params(p, &bs, &ps);
	snd_pcm_writei(p, buf, bs);
	CHECK(snd_pcm_writei(p, buf, 10) == -EAGAIN, "non-blocking write on full buffer -> EAGAIN");
	struct pollfd pfd[4];
	int nf = snd_pcm_poll_descriptors(p, pfd, 4), wakes = 0;
	long written = 0;
	t = now();
	while (now() - t < 0.5) {
		unsigned short rev = 0;
		poll(pfd, nf, 1000);
		wakes++;
		snd_pcm_poll_descriptors_revents(p, pfd, nf, &rev);
		if ((rev & POLLOUT) && (n = snd_pcm_avail_update(p)) > 0)
			written += snd_pcm_writei(p, buf, n);
	}
	double periods = 0.5 * 44100 / ps;
	CHECK(wakes >= periods * 0.8 && wakes <= periods * 1.3 + 2, "poll wake-ups %d in 0.5 s (%.0f periods)", wakes, periods);
	CHECK(written > 44100 * 0.45 && written < 44100 * 0.55, "consumed in real time: %ld frames in 0.5 s", written);
	/* real underrun */
	usleep(150000);
	CHECK(snd_pcm_avail(p) == -EPIPE, "starved: avail -> EPIPE");
	CHECK(snd_pcm_state(p) == SND_PCM_STATE_XRUN, "state XRUN");
	unsigned short rev = 0;
	err = poll(pfd, nf, 500);
	snd_pcm_poll_descriptors_revents(p, pfd, nf, &rev);
	CHECK(err == 1 && (rev & POLLERR), "poll in XRUN: POLLERR");
	CHECK(snd_pcm_recover(p, -EPIPE, 1) == 0 && snd_pcm_state(p) == SND_PCM_STATE_PREPARED, "recover -> PREPARED");
	snd_pcm_close(p);

	/* blocking writer */
	p = open_setup(0);
	snd_pcm_get_params(p, &bs, &ps);
	snd_pcm_writei(p, buf, bs);
	usleep(150000);
	CHECK(snd_pcm_writei(p, buf, 100) == -EPIPE, "starved blocking write -> EPIPE");
	snd_pcm_recover(p, -EPIPE, 1);
	snd_pcm_writei(p, buf, bs);
	ctl("fail-write ESTRPIPE");
	n = snd_pcm_writei(p, buf, ps);
	CHECK(n == -ESTRPIPE && snd_pcm_state(p) == SND_PCM_STATE_SUSPENDED, "fail-write ESTRPIPE -> ESTRPIPE, SUSPENDED");
	err = snd_pcm_recover(p, -ESTRPIPE, 1);
	CHECK(err == 0 && snd_pcm_state(p) == SND_PCM_STATE_RUNNING, "recover resumes -> RUNNING");
	CHECK(snd_pcm_writei(p, buf, ps) == (snd_pcm_sframes_t)ps, "write after resume");
	ctl("fail-write EIO");
	CHECK(snd_pcm_writei(p, buf, ps) == -EIO && snd_pcm_state(p) == SND_PCM_STATE_RUNNING, "fail-write EIO -> EIO, still RUNNING");
	ctl("fail-poll EPIPE");
	snd_pcm_writei(p, buf, snd_pcm_avail(p));	/* full: wait must poll */
	err = snd_pcm_wait(p, 1000);
	CHECK(err == -EPIPE && snd_pcm_state(p) == SND_PCM_STATE_XRUN, "fail-poll EPIPE: wait -> EPIPE, XRUN");
	snd_pcm_recover(p, err, 1);
	snd_pcm_writei(p, buf, bs);
	ctl("stall");
	snd_pcm_avail(p);
	usleep(50000);
	n = snd_pcm_avail(p);
	err = snd_pcm_wait(p, 300);
	n2 = snd_pcm_avail(p);
	CHECK(err == 0 && n == n2, "stall: wait times out, avail frozen (%ld)", n2);
	q = open_setup(0);
	snd_pcm_writei(q, buf, 4410);
	n = snd_pcm_avail(q);
	usleep(50000);
	CHECK(snd_pcm_avail(q) > n + 1500, "a handle opened after stall is healthy");
	snd_pcm_close(q);
	ctl("unstall");
	err = snd_pcm_wait(p, 300);
	CHECK(err == 1 && snd_pcm_avail(p) > n2, "unstall: stream moves again");
	ctl("vanish");
	n = snd_pcm_writei(p, buf, ps);
	CHECK(n == -ENODEV && snd_pcm_state(p) == SND_PCM_STATE_DISCONNECTED, "vanish: write -> ENODEV, DISCONNECTED");
	CHECK(snd_pcm_prepare(p) == -ENODEV, "vanish: prepare -> ENODEV");
	CHECK(snd_pcm_open(&q, "faulty", SND_PCM_STREAM_PLAYBACK, 0) == -ENOENT, "vanish: open -> ENOENT");
	ctl("appear");
	CHECK(snd_pcm_writei(p, buf, ps) == -ENODEV, "old handle stays dead after appear");
	snd_pcm_close(p);
	p = open_setup(0);
	CHECK(p && snd_pcm_writei(p, buf, ps) == (snd_pcm_sframes_t)ps, "new handle works after appear");
	snd_pcm_close(p);
	return fails != 0;
}
CSRC
if cc -O1 -o "$tmp/client" "$tmp/client.c" -lasound; then
	timeout 20 "$tmp/client" "$st"
	rc=$?
	[ $rc -eq 0 ] || fails=$((fails + 1))
else
	bad "client build"
fi

if [ "$fails" -eq 0 ]; then echo "ALL OK"; else echo "$fails FAILED"; fi
[ "$fails" -eq 0 ]
