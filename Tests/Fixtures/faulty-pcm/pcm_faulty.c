/*
 * pcm_faulty.c - an ALSA external I/O plug-in (ioplug) for tests.
 *
 * A playback-only PCM that consumes audio in real time on CLOCK_MONOTONIC,
 * records what it receives under a state directory and fails on command.
 * See README.md next to this file for the configuration, the control
 * commands and the files it writes.
 *
 * Build: ./build.sh OUTDIR  ->  OUTDIR/libasound_module_pcm_faulty.so
 */

#define _GNU_SOURCE
/* libtool passes -DPIC; without it <alsa/global.h> would emit the
 * static-build dlsym registration instead of the versioned symbol
 * _snd_pcm_faulty_open_dlsym_pcm_001 that alsa-lib checks on dlopen. */
#ifndef PIC
#define PIC
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>

#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const struct {
	const char *name;
	int err;
} err_names[] = {
	{ "EPIPE", EPIPE }, { "ESTRPIPE", ESTRPIPE }, { "EIO", EIO },
	{ "ENODEV", ENODEV }, { "EBUSY", EBUSY }, { "ENOENT", ENOENT },
	{ "EAGAIN", EAGAIN }, { "EINVAL", EINVAL }, { "ENXIO", ENXIO },
	{ "EBADFD", EBADFD }, { "EINTR", EINTR }, { "EPERM", EPERM },
	{ "EACCES", EACCES },
};

static int err_from_name(const char *s)
{
	size_t i;
	char *end;
	long v;

	for (i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (strcmp(s, err_names[i].name) == 0)
			return err_names[i].err;
	v = strtol(s, &end, 10);
	if (*s && !*end && v > 0 && v < 4096)
		return (int)v;
	return 0;
}

static const char *err_name(int err)
{
	static __thread char buf[16];
	size_t i;

	if (err < 0)
		err = -err;
	for (i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (err_names[i].err == err)
			return err_names[i].name;
	snprintf(buf, sizeof(buf), "%d", err);
	return buf;
}

/* read a small file into buf (NUL terminated); returns length or -1 */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, total = 0;

	if (fd < 0)
		return -1;
	while ((size_t)total < size - 1) {
		n = read(fd, buf + total, size - 1 - total);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	buf[total] = 0;
	return total;
}

static unsigned int tmp_counter;

/* write a small file atomically (tmp + rename) */
static int write_atomic(const char *dir, const char *name, const char *text)
{
	char tmp[4096], path[4096];
	int fd;
	size_t len = strlen(text);

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%d.%u", dir, name, (int)getpid(),
		 __atomic_add_fetch(&tmp_counter, 1, __ATOMIC_RELAXED));
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		unlink(tmp);
		return -EIO;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		unlink(tmp);
		return -errno;
	}
	return 0;
}

/* Take a one-shot file: rename it away (only one taker wins), read it and
 * delete it.  Returns 1 and fills buf if taken, 0 if absent. */
static int take_file(const char *dir, const char *name, const char *keep_as,
		     char *buf, size_t size)
{
	char src[4096], tmp[4096], keep[4096];

	snprintf(src, sizeof(src), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.taking.%d.%u", dir, name, (int)getpid(),
		 __atomic_add_fetch(&tmp_counter, 1, __ATOMIC_RELAXED));
	if (rename(src, tmp) < 0)
		return 0;
	if (read_small(tmp, buf, size) < 0)
		buf[0] = 0;
	if (keep_as) {
		snprintf(keep, sizeof(keep), "%s/%s", dir, keep_as);
		if (rename(tmp, keep) < 0)
			unlink(tmp);
	} else {
		unlink(tmp);
	}
	return 1;
}

static int file_exists(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* ------------------------------------------------------------------ */
/* the plug-in                                                         */

typedef struct {
	snd_pcm_ioplug_t io;
	char *state;		/* state directory */
	char *dump;		/* `dump`: the first line snd_pcm_dump prints, or NULL */
	unsigned int handle_id;
	int log_fd;
	int cap_fd;
	int timer_fd;		/* wake-up when the stream becomes ready */
	int inotify_fd;		/* changes in the state directory */
	int poll_fd;		/* epoll set of the two above = io.poll_fd */
	uint64_t open_ns;

	/* config restrictions */
	unsigned int formats[16];
	unsigned int nformats;
	unsigned int rate_min, rate_max;
	unsigned int ch_min, ch_max;

	/* negotiated */
	unsigned int frame_bytes;
	snd_pcm_uframes_t avail_min;

	/* real-time clock: hw position = base + (now - t0) * rate while on */
	int want_clock;		/* logically running (RUNNING/DRAINING) */
	int stalled;
	uint64_t base;		/* frames since prepare at t0 (or frozen) */
	uint64_t t0;

	int opened;
	int dead;		/* handle observed ENODEV: state DISCONNECTED */
	snd_pcm_state_t suspended_from;
	snd_pcm_sframes_t last_pos;

	unsigned char *copybuf;
	size_t copybuf_size;
} faulty_t;

static unsigned int handle_counter;

static void logev(faulty_t *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void logev(faulty_t *f, const char *fmt, ...)
{
	char line[1024];
	int n, m;
	va_list ap;

	if (f->log_fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%llu ", (unsigned long long)now_ns());
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - n - 64, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof(line) - 64)
		n = sizeof(line) - 64;
	n += snprintf(line + n, sizeof(line) - n, " pid=%d h=%u\n",
		      (int)getpid(), f->handle_id);
	/* one write() per line, O_APPEND: lines never interleave */
	if (write(f->log_fd, line, n) < 0) {
		/* nothing sensible to do */
	}
}

/* --- clock --- */

static uint64_t hw_now(faulty_t *f)
{
	uint64_t dt;

	if (!f->want_clock || f->stalled || !f->io.rate)
		return f->base;
	dt = now_ns() - f->t0;
	return f->base + (uint64_t)(((unsigned __int128)dt * f->io.rate) / 1000000000u);
}

static void clock_set(faulty_t *f, int want, int stalled)
{
	int was_on = f->want_clock && !f->stalled;
	int is_on = want && !stalled;

	if (was_on && !is_on)
		f->base = hw_now(f);
	if (!was_on && is_on)
		f->t0 = now_ns();
	f->want_clock = want;
	f->stalled = stalled;
}

/* --- poll timer --- */

static void timer_arm(faulty_t *f, int flags, uint64_t sec, uint64_t nsec)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = sec;
	its.it_value.tv_nsec = nsec;
	timerfd_settime(f->timer_fd, flags, &its, NULL);
}

static void timer_off(faulty_t *f)
{
	timer_arm(f, 0, 0, 0);
}

/* make the descriptor readable now (level-triggered readiness) */
static void timer_now(faulty_t *f)
{
	timer_arm(f, 0, 0, 1);
}

/* consume whatever made the poll descriptor readable */
static void drain_wakeups(faulty_t *f)
{
	uint64_t exp;
	char evbuf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(f->timer_fd, &exp, sizeof(exp)) == (ssize_t)sizeof(exp))
		;
	while (read(f->inotify_fd, evbuf, sizeof(evbuf)) > 0)
		;
}

/* frames queued (appl - hw); negative once real time overtook the app.
 * appl_ptr wraps at the PCM boundary, which on 64-bit is ~2^62 frames. */
static snd_pcm_sframes_t fill_of(uint64_t appl, uint64_t hw)
{
	return (snd_pcm_sframes_t)(appl - hw);
}

/*
 * Program the wake-up for state st with application pointer appl:
 *  RUNNING   - at the instant avail reaches avail_min (or the buffer runs
 *              empty, whichever is first); readable at once if already so.
 *              With the default avail_min this is once per period.
 *  DRAINING  - at the instant the buffer is empty.
 *  PREPARED,
 *  PAUSED    - readable while avail >= avail_min, else silent.
 *  SETUP, XRUN, SUSPENDED, DISCONNECTED - readable (revents says POLLERR).
 *  stalled   - silent (only state-directory changes wake the descriptor).
 */
static void arm(faulty_t *f, snd_pcm_state_t st, uint64_t appl)
{
	uint64_t hw = hw_now(f), target, frames, ns;
	snd_pcm_sframes_t fill = fill_of(appl, hw), target_fill;
	snd_pcm_sframes_t bs = (snd_pcm_sframes_t)f->io.buffer_size;
	snd_pcm_sframes_t am = (snd_pcm_sframes_t)f->avail_min;

	switch (st) {
	case SND_PCM_STATE_RUNNING:
	case SND_PCM_STATE_DRAINING:
		if (f->stalled || !f->io.rate) {
			timer_off(f);
			return;
		}
		if (st == SND_PCM_STATE_DRAINING)
			target_fill = 0;
		else
			target_fill = bs - (am < bs + 1 ? am : bs + 1);
		if (fill <= target_fill) {
			timer_now(f);
			return;
		}
		/* absolute time at which hw reaches appl - target_fill */
		target = appl - (uint64_t)target_fill;
		frames = target - f->base;
		ns = (uint64_t)((((unsigned __int128)frames * 1000000000u) +
				 f->io.rate - 1) / f->io.rate) + f->t0;
		timer_arm(f, TFD_TIMER_ABSTIME, ns / 1000000000u, ns % 1000000000u);
		return;
	case SND_PCM_STATE_PREPARED:
	case SND_PCM_STATE_PAUSED:
		if (bs - fill >= am)
			timer_now(f);
		else
			timer_off(f);
		return;
	case SND_PCM_STATE_OPEN:
		timer_off(f);
		return;
	default:
		timer_now(f);
		return;
	}
}

/* --- faults --- */

static void go_dead(faulty_t *f, const char *where)
{
	if (!f->dead)
		logev(f, "fault ENODEV %s", where);
	f->dead = 1;
	clock_set(f, 0, f->stalled);
	snd_pcm_ioplug_set_state(&f->io, SND_PCM_STATE_DISCONNECTED);
	timer_now(f);
}

/* apply an injected error to the stream state, like a real device would */
static void apply_fault(faulty_t *f, int err, const char *where)
{
	logev(f, "fault %s %s", err_name(err), where);
	switch (err) {
	case EPIPE:
		clock_set(f, 0, f->stalled);
		snd_pcm_ioplug_set_state(&f->io, SND_PCM_STATE_XRUN);
		logev(f, "xrun injected");
		timer_now(f);
		break;
	case ESTRPIPE:
		f->suspended_from = f->io.state;
		clock_set(f, 0, f->stalled);
		snd_pcm_ioplug_set_state(&f->io, SND_PCM_STATE_SUSPENDED);
		logev(f, "suspend");
		timer_now(f);
		break;
	case ENODEV:
		f->dead = 1;
		clock_set(f, 0, f->stalled);
		snd_pcm_ioplug_set_state(&f->io, SND_PCM_STATE_DISCONNECTED);
		timer_now(f);
		break;
	default:		/* EIO etc.: state unchanged */
		break;
	}
}

/* --- control file --- */

static void apply_command(faulty_t *f, char *line)
{
	char *argv[4] = { 0 };
	int argc = 0, err;
	char *save = NULL, *tok;
	char buf[4200];

	for (tok = strtok_r(line, " \t\r", &save); tok && argc < 4;
	     tok = strtok_r(NULL, " \t\r", &save))
		argv[argc++] = tok;
	if (argc == 0 || argv[0][0] == '#')
		return;

	if ((strcmp(argv[0], "fail-write") == 0 || strcmp(argv[0], "fail-poll") == 0) &&
	    argc == 2 && (err = err_from_name(argv[1])) > 0) {
		snprintf(buf, sizeof(buf), "%s\n", err_name(err));
		write_atomic(f->state, argv[0], buf);
		logev(f, "control %s %s", argv[0], err_name(err));
	} else if (strcmp(argv[0], "refuse-open") == 0 && argc == 3 &&
		   (err = err_from_name(argv[1])) > 0) {
		long ms = strtol(argv[2], NULL, 10);
		if (ms < 0)
			ms = 0;
		snprintf(buf, sizeof(buf), "%s %llu\n", err_name(err),
			 (unsigned long long)(now_ns() + (uint64_t)ms * 1000000u));
		write_atomic(f->state, "refuse", buf);
		logev(f, "control refuse-open %s %ld", err_name(err), ms);
	} else if (strcmp(argv[0], "vanish") == 0 && argc == 1) {
		write_atomic(f->state, "vanished", "1\n");
		logev(f, "control vanish");
	} else if (strcmp(argv[0], "appear") == 0 && argc == 1) {
		snprintf(buf, sizeof(buf), "%s/vanished", f->state);
		unlink(buf);
		logev(f, "control appear");
	} else if (strcmp(argv[0], "stall") == 0 && argc == 1) {
		snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)now_ns());
		write_atomic(f->state, "stall", buf);
		logev(f, "control stall");
	} else if (strcmp(argv[0], "unstall") == 0 && argc == 1) {
		snprintf(buf, sizeof(buf), "%s/stall", f->state);
		unlink(buf);
		logev(f, "control unstall");
	} else if (strcmp(argv[0], "hold-open") == 0 && argc == 1) {
		/* Opens wait inside snd_pcm_open until the test deletes STATE/hold-open: a
		 * program held in its open at a moment the test chooses. */
		write_atomic(f->state, "hold-open", "1\n");
		logev(f, "control hold-open");
	} else if (strcmp(argv[0], "hang") == 0 && argc == 1) {
		/* A driver that never returns from write: the next transfer blocks until the
		 * test deletes STATE/hang (a wedged playback thread, for watchdog tests). */
		write_atomic(f->state, "hang", "1\n");
		logev(f, "control hang");
	} else {
		int i;
		char msg[256] = "";
		for (i = 0; i < argc; i++) {
			strncat(msg, " ", sizeof(msg) - strlen(msg) - 1);
			strncat(msg, argv[i], sizeof(msg) - strlen(msg) - 1);
		}
		logev(f, "control-error%s", msg);
	}
}

static void take_control(faulty_t *f)
{
	char buf[4096];
	char *save = NULL, *line;

	if (!take_file(f->state, "control", "control.taken", buf, sizeof(buf)))
		return;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		apply_command(f, line);
}

/* is this handle stalled? (stall file newer than our open) */
static int stall_active(faulty_t *f)
{
	char path[4096], buf[64];

	snprintf(path, sizeof(path), "%s/stall", f->state);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	return strtoull(buf, NULL, 10) > f->open_ns;
}

/* run at every callback; returns 1 if the device has vanished */
static int checks(faulty_t *f)
{
	int st;

	take_control(f);
	st = stall_active(f);
	if (st != f->stalled) {
		clock_set(f, f->want_clock, st);
		logev(f, st ? "stalled" : "unstalled");
		arm(f, f->io.state, f->io.appl_ptr);
	}
	return file_exists(f->state, "vanished");
}

/* take a pending one-shot fault ("fail-write" / "fail-poll") */
static int take_fault(faulty_t *f, const char *name)
{
	char buf[64];
	char *nl;

	if (!take_file(f->state, name, NULL, buf, sizeof(buf)))
		return 0;
	nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	return err_from_name(buf);
}

/* --- callbacks --- */

static int faulty_start(snd_pcm_ioplug_t *io)
{
	faulty_t *f = io->private_data;

	if (checks(f) || f->dead) {
		go_dead(f, "start");
		return -ENODEV;
	}
	logev(f, "start");
	clock_set(f, 1, f->stalled);
	arm(f, SND_PCM_STATE_RUNNING, io->appl_ptr);
	return 0;
}

static int faulty_stop(snd_pcm_ioplug_t *io)
{
	faulty_t *f = io->private_data;

	logev(f, "stop");
	clock_set(f, 0, f->stalled);
	timer_now(f);		/* SETUP: POLLERR, like hw */
	return 0;
}

static snd_pcm_sframes_t faulty_pointer(snd_pcm_ioplug_t *io)
{
	faulty_t *f = io->private_data;
	uint64_t hw;
	snd_pcm_sframes_t fill;

	if (checks(f) || f->dead) {
		/* Returning an error here would be turned into XRUN by ioplug;
		 * mark the stream DISCONNECTED and keep the position instead. */
		go_dead(f, "pointer");
		return f->last_pos;
	}
	if (!io->buffer_size)
		return 0;
	if (io->state == SND_PCM_STATE_XRUN)
		return -EPIPE;
	hw = hw_now(f);
	fill = fill_of(io->appl_ptr, hw);
	if (io->state == SND_PCM_STATE_RUNNING && fill < 0) {
		logev(f, "xrun hw=%llu appl=%llu", (unsigned long long)hw,
		      (unsigned long long)io->appl_ptr);
		clock_set(f, 0, f->stalled);
		timer_now(f);
		return -EPIPE;	/* ioplug sets XRUN, client gets -EPIPE */
	}
	if (io->state == SND_PCM_STATE_DRAINING && fill <= 0) {
		/* drained: report hw == appl so ioplug stops the stream */
		hw = io->appl_ptr;
		clock_set(f, 0, f->stalled);
		f->base = hw;
	}
	f->last_pos = (snd_pcm_sframes_t)(hw % io->buffer_size);
	return f->last_pos;
}

static snd_pcm_sframes_t faulty_transfer(snd_pcm_ioplug_t *io,
					 const snd_pcm_channel_area_t *areas,
					 snd_pcm_uframes_t offset,
					 snd_pcm_uframes_t size)
{
	faulty_t *f = io->private_data;
	unsigned int ch, sbits = snd_pcm_format_physical_width(io->format);
	unsigned int fbits = sbits * io->channels;
	size_t bytes = (size_t)size * f->frame_bytes;
	const unsigned char *src = NULL;
	int err, contiguous = 1;

	if (checks(f) || f->dead) {
		go_dead(f, "write");
		return -ENODEV;
	}
	err = take_fault(f, "fail-write");
	if (err > 0) {
		apply_fault(f, err, "write");
		return -err;
	}
	{
		char hang[PATH_MAX + 16];
		snprintf(hang, sizeof(hang), "%s/hang", f->state);
		if (access(hang, F_OK) == 0) {
			logev(f, "hung write");
			while (access(hang, F_OK) == 0)
				usleep(10000);
			logev(f, "unhung write");
		}
	}

	for (ch = 0; ch < io->channels; ch++)
		if (areas[ch].addr != areas[0].addr || areas[ch].step != fbits ||
		    areas[ch].first != areas[0].first + ch * sbits)
			contiguous = 0;
	if (contiguous && areas[0].first % 8 == 0) {
		src = (const unsigned char *)areas[0].addr + areas[0].first / 8 +
		      (size_t)offset * (fbits / 8);
	} else {
		snd_pcm_channel_area_t dst[64];
		if (io->channels > 64)
			return -EINVAL;
		if (f->copybuf_size < bytes) {
			unsigned char *nb = realloc(f->copybuf, bytes);
			if (!nb)
				return -ENOMEM;
			f->copybuf = nb;
			f->copybuf_size = bytes;
		}
		for (ch = 0; ch < io->channels; ch++) {
			dst[ch].addr = f->copybuf;
			dst[ch].first = ch * sbits;
			dst[ch].step = fbits;
		}
		snd_pcm_areas_copy(dst, 0, areas, offset, io->channels, size, io->format);
		src = f->copybuf;
	}
	if (f->cap_fd >= 0 && bytes) {
		size_t done = 0;
		while (done < bytes) {
			ssize_t n = write(f->cap_fd, src + done, bytes - done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			done += n;
		}
	}
	logev(f, "write %lu", (unsigned long)size);
	/* appl_ptr is advanced by ioplug after we return */
	if (io->state == SND_PCM_STATE_RUNNING || io->state == SND_PCM_STATE_PREPARED)
		arm(f, io->state, (uint64_t)io->appl_ptr + size);
	return size;
}

static int faulty_close(snd_pcm_ioplug_t *io)
{
	faulty_t *f = io->private_data;

	if (f->opened)
		logev(f, "close");
	if (f->poll_fd >= 0)
		close(f->poll_fd);
	if (f->inotify_fd >= 0)
		close(f->inotify_fd);
	if (f->timer_fd >= 0)
		close(f->timer_fd);
	if (f->cap_fd >= 0)
		close(f->cap_fd);
	if (f->log_fd >= 0)
		close(f->log_fd);
	free(f->copybuf);
	free(f->dump);
	free(f->state);
	free(f);
	return 0;
}

/* What snd_pcm_dump prints: ioplug's own text, or with `dump` set the line given there, so
 * that a test can make the device look like another layer to a program that reads the dump
 * (keepalived's PCMChain: "Hardware PCM card 31 'Faulty' device 0 subdevice 0" makes it a
 * card's ring, played as a ring loop). */
static void faulty_dump(snd_pcm_ioplug_t *io, snd_output_t *out)
{
	faulty_t *f = io->private_data;

	snd_output_printf(out, "%s\n", f->dump ? f->dump : io->name);
	if (io->state != SND_PCM_STATE_OPEN) {
		snd_output_printf(out, "Its setup is:\n");
		snd_pcm_dump_setup(io->pcm, out);
	}
}

static int faulty_hw_params(snd_pcm_ioplug_t *io, snd_pcm_hw_params_t *params)
{
	faulty_t *f = io->private_data;
	char line[256];

	(void)params;
	if (checks(f) || f->dead) {
		go_dead(f, "hw_params");
		return -ENODEV;
	}
	f->frame_bytes = snd_pcm_format_physical_width(io->format) / 8 * io->channels;
	f->avail_min = io->period_size;
	snprintf(line, sizeof(line), "%s %u %u %lu %lu\n", snd_pcm_format_name(io->format),
		 io->rate, io->channels, (unsigned long)io->buffer_size,
		 (unsigned long)io->period_size);
	write_atomic(f->state, "format", line);
	line[strlen(line) - 1] = 0;
	logev(f, "hw_params %s access=%s", line, snd_pcm_access_name(io->access));
	return 0;
}

static int faulty_sw_params(snd_pcm_ioplug_t *io, snd_pcm_sw_params_t *params)
{
	faulty_t *f = io->private_data;
	snd_pcm_uframes_t am = 0, start = 0, stop = 0;

	snd_pcm_sw_params_get_avail_min(params, &am);
	snd_pcm_sw_params_get_start_threshold(params, &start);
	snd_pcm_sw_params_get_stop_threshold(params, &stop);
	f->avail_min = am ? am : 1;
	logev(f, "sw_params avail_min=%lu start_threshold=%lu stop_threshold=%lu",
	      (unsigned long)am, (unsigned long)start, (unsigned long)stop);
	return 0;
}

static int faulty_prepare(snd_pcm_ioplug_t *io)
{
	faulty_t *f = io->private_data;

	if (checks(f) || f->dead) {
		go_dead(f, "prepare");
		return -ENODEV;
	}
	logev(f, "prepare");
	clock_set(f, 0, f->stalled);
	f->base = 0;
	f->last_pos = 0;
	arm(f, SND_PCM_STATE_PREPARED, 0);	/* ioplug reset appl_ptr to 0 */
	return 0;
}

static int faulty_pause(snd_pcm_ioplug_t *io, int enable)
{
	faulty_t *f = io->private_data;

	logev(f, "pause %s", enable ? "on" : "off");
	clock_set(f, !enable, f->stalled);
	arm(f, enable ? SND_PCM_STATE_PAUSED : SND_PCM_STATE_RUNNING, io->appl_ptr);
	return 0;
}

/* ioplug ignores our return value and always reports success to
 * snd_pcm_resume(), so resume must really bring the stream back. */
static int faulty_resume(snd_pcm_ioplug_t *io)
{
	faulty_t *f = io->private_data;

	if (checks(f) || f->dead) {
		go_dead(f, "resume");
		return -ENODEV;
	}
	if (io->state != SND_PCM_STATE_SUSPENDED)
		return 0;
	if (f->suspended_from == SND_PCM_STATE_RUNNING ||
	    f->suspended_from == SND_PCM_STATE_DRAINING) {
		logev(f, "resume running");
		snd_pcm_ioplug_set_state(io, f->suspended_from);
		clock_set(f, 1, f->stalled);
		arm(f, f->suspended_from, io->appl_ptr);
	} else {
		logev(f, "resume prepared");
		snd_pcm_ioplug_set_state(io, SND_PCM_STATE_PREPARED);
		arm(f, SND_PCM_STATE_PREPARED, io->appl_ptr);
	}
	return 0;
}

static int faulty_poll_revents(snd_pcm_ioplug_t *io, struct pollfd *pfd,
			       unsigned int nfds, unsigned short *revents)
{
	faulty_t *f = io->private_data;
	snd_pcm_sframes_t fill, avail;
	uint64_t hw;
	int err;

	(void)pfd;
	(void)nfds;
	*revents = 0;
	drain_wakeups(f);
	if (checks(f)) {
		go_dead(f, "poll");
		return -ENODEV;
	}
	err = take_fault(f, "fail-poll");
	if (err > 0) {
		apply_fault(f, err, "poll");
		return -err;
	}

	hw = hw_now(f);
	fill = fill_of(io->appl_ptr, hw);
	avail = (snd_pcm_sframes_t)io->buffer_size - fill;
	switch (io->state) {
	case SND_PCM_STATE_RUNNING:
		if (f->stalled)
			break;
		if (fill < 0) {
			logev(f, "xrun hw=%llu appl=%llu", (unsigned long long)hw,
			      (unsigned long long)io->appl_ptr);
			clock_set(f, 0, f->stalled);
			snd_pcm_ioplug_set_state(io, SND_PCM_STATE_XRUN);
			*revents = POLLOUT | POLLERR;
			break;
		}
		if (avail >= (snd_pcm_sframes_t)f->avail_min)
			*revents = POLLOUT;
		break;
	case SND_PCM_STATE_DRAINING:
		if (!f->stalled && fill <= 0)
			*revents = POLLOUT;	/* ioplug's drain loop then stops */
		break;
	case SND_PCM_STATE_PREPARED:
	case SND_PCM_STATE_PAUSED:
		if (avail >= (snd_pcm_sframes_t)f->avail_min)
			*revents = POLLOUT;
		break;
	case SND_PCM_STATE_OPEN:
		break;
	default:		/* SETUP, XRUN, SUSPENDED, DISCONNECTED */
		*revents = POLLOUT | POLLERR;
		break;
	}
	arm(f, io->state, io->appl_ptr);	/* level-triggered, like hw */
	return 0;
}

#define FAULTY_COMMON_CALLBACKS \
	.start = faulty_start, \
	.stop = faulty_stop, \
	.pointer = faulty_pointer, \
	.transfer = faulty_transfer, \
	.close = faulty_close, \
	.hw_params = faulty_hw_params, \
	.sw_params = faulty_sw_params, \
	.prepare = faulty_prepare, \
	.pause = faulty_pause, \
	.poll_revents = faulty_poll_revents, \
	.dump = faulty_dump

static const snd_pcm_ioplug_callback_t faulty_callback = {
	FAULTY_COMMON_CALLBACKS,
	.resume = faulty_resume,
};

/* `resume false`: a device that cannot resume.  ioplug then still returns 0
 * from snd_pcm_resume() but the stream stays SUSPENDED; only prepare helps. */
static const snd_pcm_ioplug_callback_t faulty_callback_noresume = {
	FAULTY_COMMON_CALLBACKS,
};

/* --- open --- */

static int parse_format_node(faulty_t *f, snd_config_t *n)
{
	const char *s;
	snd_pcm_format_t fmt;

	if (snd_config_get_string(n, &s) < 0)
		return -EINVAL;
	fmt = snd_pcm_format_value(s);
	if (fmt == SND_PCM_FORMAT_UNKNOWN) {
		SNDERR("faulty: unknown format %s", s);
		return -EINVAL;
	}
	if (f->nformats >= 16)
		return -EINVAL;
	f->formats[f->nformats++] = fmt;
	return 0;
}

static int get_uint(snd_config_t *n, unsigned int *v)
{
	long l;
	const char *s;

	if (snd_config_get_integer(n, &l) >= 0) {
		if (l <= 0)
			return -EINVAL;
		*v = (unsigned int)l;
		return 0;
	}
	if (snd_config_get_string(n, &s) >= 0) {
		l = strtol(s, NULL, 10);
		if (l <= 0)
			return -EINVAL;
		*v = (unsigned int)l;
		return 0;
	}
	return -EINVAL;
}

SND_PCM_PLUGIN_DEFINE_FUNC(faulty)
{
	snd_config_iterator_t i, next;
	faulty_t *f;
	const char *state = NULL;
	char path[4096], buf[128];
	int err, can_resume = 1;
	unsigned int v;
	static const unsigned int default_formats[] = {
		SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_S24_LE, SND_PCM_FORMAT_S32_LE,
		SND_PCM_FORMAT_FLOAT_LE, SND_PCM_FORMAT_U8,
	};
	static const unsigned int accesses[] = {
		SND_PCM_ACCESS_RW_INTERLEAVED, SND_PCM_ACCESS_MMAP_INTERLEAVED,
	};

	(void)root;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->log_fd = f->cap_fd = f->timer_fd = f->inotify_fd = f->poll_fd = -1;
	f->rate_min = 8000;
	f->rate_max = 384000;
	f->ch_min = 1;
	f->ch_max = 8;
	f->handle_id = __atomic_add_fetch(&handle_counter, 1, __ATOMIC_RELAXED);

	snd_config_for_each(i, next, conf) {
		snd_config_t *n = snd_config_iterator_entry(i);
		const char *id;

		if (snd_config_get_id(n, &id) < 0)
			continue;
		if (strcmp(id, "comment") == 0 || strcmp(id, "type") == 0 ||
		    strcmp(id, "hint") == 0)
			continue;
		if (strcmp(id, "state") == 0) {
			if (snd_config_get_string(n, &state) < 0) {
				SNDERR("faulty: state must be a string");
				err = -EINVAL;
				goto fail;
			}
			continue;
		}
		if (strcmp(id, "format") == 0) {
			if (snd_config_get_type(n) == SND_CONFIG_TYPE_COMPOUND) {
				snd_config_iterator_t j, jn;
				snd_config_for_each(j, jn, n) {
					err = parse_format_node(f, snd_config_iterator_entry(j));
					if (err < 0)
						goto fail;
				}
			} else {
				err = parse_format_node(f, n);
				if (err < 0)
					goto fail;
			}
			continue;
		}
		if (strcmp(id, "rate") == 0) {
			if (get_uint(n, &v) < 0) {
				SNDERR("faulty: invalid rate");
				err = -EINVAL;
				goto fail;
			}
			f->rate_min = f->rate_max = v;
			continue;
		}
		if (strcmp(id, "channels") == 0) {
			if (get_uint(n, &v) < 0 || v > 64) {
				SNDERR("faulty: invalid channels");
				err = -EINVAL;
				goto fail;
			}
			f->ch_min = f->ch_max = v;
			continue;
		}
		if (strcmp(id, "dump") == 0) {
			const char *text;
			if (snd_config_get_string(n, &text) < 0 || !(f->dump = strdup(text))) {
				SNDERR("faulty: dump must be a string");
				err = -EINVAL;
				goto fail;
			}
			continue;
		}
		if (strcmp(id, "resume") == 0) {
			if ((can_resume = snd_config_get_bool(n)) < 0) {
				SNDERR("faulty: resume must be a boolean");
				err = -EINVAL;
				goto fail;
			}
			continue;
		}
		SNDERR("faulty: unknown field %s", id);
		err = -EINVAL;
		goto fail;
	}
	if (!state) {
		SNDERR("faulty: 'state' (directory) is required");
		err = -EINVAL;
		goto fail;
	}
	if (stream != SND_PCM_STREAM_PLAYBACK) {
		SNDERR("faulty: playback only");
		err = -EINVAL;
		goto fail;
	}
	f->state = strdup(state);
	if (!f->state) {
		err = -ENOMEM;
		goto fail;
	}
	mkdir(f->state, 0755);	/* single level; may already exist */
	snprintf(path, sizeof(path), "%s/events.log", f->state);
	f->log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (f->log_fd < 0) {
		SNDERR("faulty: cannot open %s: %s", path, strerror(errno));
		err = -errno;
		goto fail;
	}

	take_control(f);
	if (file_exists(f->state, "hold-open")) {
		/* Bounded, so that a test that died leaves no program held for ever. */
		uint64_t until = now_ns() + 60ull * 1000000000u;
		logev(f, "open-held");
		while (file_exists(f->state, "hold-open") && now_ns() < until)
			usleep(5000);
		logev(f, "open-released");
	}
	/* after take_control: a "stall" taken by this open does not stall us */
	f->open_ns = now_ns();
	if (file_exists(f->state, "vanished")) {
		logev(f, "open-refused ENOENT vanished");
		err = -ENOENT;
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/refuse", f->state);
	if (read_small(path, buf, sizeof(buf)) > 0) {
		char ename[32];
		unsigned long long deadline;
		if (sscanf(buf, "%31s %llu", ename, &deadline) == 2 &&
		    now_ns() < deadline && err_from_name(ename) > 0) {
			err = -err_from_name(ename);
			logev(f, "open-refused %s refuse", err_name(err));
			goto fail;
		}
	}

	snprintf(path, sizeof(path), "%s/capture.raw", f->state);
	f->cap_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (f->cap_fd < 0) {
		err = -errno;
		goto fail;
	}
	f->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (f->timer_fd < 0) {
		err = -errno;
		goto fail;
	}
	f->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (f->inotify_fd < 0) {
		err = -errno;
		goto fail;
	}
	/* control files arrive by rename (IN_MOVED_TO); unstall/appear delete */
	inotify_add_watch(f->inotify_fd, f->state, IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE);
	f->poll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (f->poll_fd < 0) {
		err = -errno;
		goto fail;
	}
	{
		struct epoll_event ev = { .events = EPOLLIN };
		ev.data.fd = f->timer_fd;
		epoll_ctl(f->poll_fd, EPOLL_CTL_ADD, f->timer_fd, &ev);
		ev.data.fd = f->inotify_fd;
		epoll_ctl(f->poll_fd, EPOLL_CTL_ADD, f->inotify_fd, &ev);
	}

	f->io.version = SND_PCM_IOPLUG_VERSION;
	f->io.name = "faulty: fault-injecting test PCM";
	f->io.callback = can_resume ? &faulty_callback : &faulty_callback_noresume;
	f->io.private_data = f;
	f->io.poll_fd = f->poll_fd;
	f->io.poll_events = POLLIN;	/* epoll fd signals POLLIN; revents maps to POLLOUT */
	f->io.mmap_rw = 0;
	f->io.flags = SND_PCM_IOPLUG_FLAG_MONOTONIC;

	err = snd_pcm_ioplug_create(&f->io, name, stream, mode);
	if (err < 0)
		goto fail;

	if (!f->nformats) {
		memcpy(f->formats, default_formats, sizeof(default_formats));
		f->nformats = sizeof(default_formats) / sizeof(default_formats[0]);
	}
	if ((err = snd_pcm_ioplug_set_param_list(&f->io, SND_PCM_IOPLUG_HW_ACCESS, 2, accesses)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_list(&f->io, SND_PCM_IOPLUG_HW_FORMAT,
						 f->nformats, f->formats)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(&f->io, SND_PCM_IOPLUG_HW_CHANNELS,
						   f->ch_min, f->ch_max)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(&f->io, SND_PCM_IOPLUG_HW_RATE,
						   f->rate_min, f->rate_max)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(&f->io, SND_PCM_IOPLUG_HW_PERIOD_BYTES,
						   64, 16 * 1024 * 1024)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(&f->io, SND_PCM_IOPLUG_HW_BUFFER_BYTES,
						   128, 32 * 1024 * 1024)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(&f->io, SND_PCM_IOPLUG_HW_PERIODS,
						   2, 1024)) < 0) {
		snd_pcm_ioplug_delete(&f->io);	/* calls faulty_close, frees f */
		return err;
	}

	f->opened = 1;
	logev(f, "open");
	*pcmp = f->io.pcm;
	return 0;

fail:
	if (f->poll_fd >= 0)
		close(f->poll_fd);
	if (f->inotify_fd >= 0)
		close(f->inotify_fd);
	if (f->timer_fd >= 0)
		close(f->timer_fd);
	if (f->cap_fd >= 0)
		close(f->cap_fd);
	if (f->log_fd >= 0)
		close(f->log_fd);
	free(f->dump);
	free(f->state);
	free(f);
	return err;
}

SND_PCM_PLUGIN_SYMBOL(faulty);
