// SPDX-License-Identifier: GPL-2.0
/*
 * Stand-ins for a Raspberry Pi's own sound outputs, for keepalived's VM tests (issue 47).
 *
 * No emulator has a Pi's sound hardware, so this module makes cards that declare to ALSA exactly
 * what the Pi's drivers declare, over a clock of their own (an hrtimer) instead of the SoC:
 *
 *  - vc4hdmi0, vc4hdmi1: the HDMI outputs of raspberrypi/linux drivers/gpu/drm/vc4/vc4_hdmi.c, an
 *    ASoC card (driver name "vc4-hdmi", so alsa-lib applies cards/vc4-hdmi.conf) whose PCM is the
 *    generic dmaengine PCM: a cyclic DMA over the ring, its position continuous (BCM2835's DMA
 *    reports its residue per burst: no BATCH), a period interrupt per period, the ring replayed
 *    for ever when nothing new is written. IEC958_SUBFRAME_LE only (vc4_hdmi_audio_cpu_dai_drv
 *    and hdmi-codec's i2s DAI), 2-8 channels, 32-192 kHz; hdmi-codec's startup calls the vc4
 *    driver's audio_startup, which returns -ENOTSUPP while the output has no display (here: the
 *    `display` parameter, writable in /sys/module/snd_pi_standin/parameters/display), and
 *    constrains the stream by the display's ELD once there is one.
 *  - Headphones: the headphone jack of drivers/staging/vc04_services/bcm2835-audio/bcm2835-pcm.c,
 *    an indirect driver: its .ack hands the VideoCore the frames whose appl_ptr advanced since the
 *    last ack (pcm-indirect.h, included as the real driver does), the VideoCore plays what it was
 *    handed and reports it consumed, and the position moves only over what was reported. A ring
 *    written once is not replayed: once the VideoCore has played it, the position stops.
 *
 * What each card "played" can be read back, continuously, from debugfs
 * (/sys/kernel/debug/pi-standin/CARD/played): records of a 32-byte header (struct played_record)
 * and the frames themselves, in the order the DMA or the VideoCore consumed them. A bounded log
 * and not a capture PCM: it adds no PCM or card that a program under test could see, needs no
 * format negotiation to read, and says what it lost (`lost`) instead of silently overrunning.
 * /sys/kernel/debug/pi-standin/CARD/status has the counters the tests compare.
 */

#include <linux/debugfs.h>
#include <linux/hrtimer.h>
#include <linux/kfifo.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <sound/asoundef.h>
#include <sound/control.h>
#include <sound/core.h>
#include <sound/pcm.h>
#include <sound/pcm_drm_eld.h>
#include <sound/pcm_params.h>
#include <sound/pcm-indirect.h>

MODULE_DESCRIPTION("Stand-ins for the Raspberry Pi's vc4-hdmi and bcm2835 headphone sound outputs (tests only)");
MODULE_LICENSE("GPL");

static bool display[2] = { true, false };
static int display_set(const char *val, const struct kernel_param *kp);
static int display_get(char *buffer, const struct kernel_param *kp)
{
	return param_array_ops.get(buffer, kp);
}
static struct kparam_array display_arr = {
	.max = ARRAY_SIZE(display), .elemsize = sizeof(bool), .ops = &param_ops_bool, .elem = display,
};
static const struct kernel_param_ops display_ops = { .set = display_set, .get = display_get };
module_param_cb(display, &display_ops, &display_arr, 0644);
MODULE_PARM_DESC(display, "Whether vc4hdmi0, vc4hdmi1 have a display (without one the PCM's open fails with -ENOTSUPP); "
		 "a change is announced as a hotplug is, on the HDMI Jack and ELD controls");
static bool hdmi = true;
module_param(hdmi, bool, 0444);
MODULE_PARM_DESC(hdmi, "Make the two vc4-hdmi cards");
static bool headphones = true;
module_param(headphones, bool, 0444);
MODULE_PARM_DESC(headphones, "Make the bcm2835 headphones card");
static int log_kib = 4096;
module_param(log_kib, int, 0444);
MODULE_PARM_DESC(log_kib, "Size of each card's log of played frames in KiB (a power of two)");

#define RECORD_MAGIC 0x314c5350 /* "PSL1" */
#define RECORD_STARVED 1	/* the device played `frames` of silence: nothing was handed over */

/* One record of the played log; `frames` frames of `frame_bytes` follow unless RECORD_STARVED. */
struct played_record {
	u32 magic;
	u32 stream;	  /* which stream since the module was loaded (a prepare starts a new one) */
	u64 frame;	  /* the first frame's index in its stream */
	u32 frames;
	u32 frame_bytes;
	u32 lost;	  /* frames left out just before this record: the log was full */
	u16 flags;
	u16 substream;
};

struct standin_card {
	struct platform_device *pdev;	/* the card's parent, as the SoC's device is a Pi's */
	struct snd_card *card;
	struct dentry *dir;
	const char *id;
	int index;		  /* vc4hdmi0/1: 0/1; headphones: -1 */
	/* The played log: written in the clock's context, read by one reader. */
	spinlock_t log_lock;
	struct mutex read_lock;
	DECLARE_KFIFO_PTR(log, u8);
	wait_queue_head_t readers;
	u32 lost;		  /* frames not yet reported as lost */
	u64 lost_total;
	u64 frames_logged;
	u64 starved_total;
	u32 streams;
	atomic_t opens, refused, running;
	u8 iec958[4];
	struct snd_kcontrol *jack, *eld;
	bool had_display;
};

static struct standin_card cards[3];

static void log_played(struct standin_card *c, u32 stream, u64 frame, u16 sub, u32 frame_bytes,
		       const u8 *a, u32 a_frames, const u8 *b, u32 b_frames, u16 flags)
{
	struct played_record r = {
		.magic = RECORD_MAGIC, .stream = stream, .frame = frame, .frames = a_frames + b_frames,
		.frame_bytes = frame_bytes, .flags = flags, .substream = sub,
	};
	size_t payload = (flags & RECORD_STARVED) ? 0 : (size_t)r.frames * frame_bytes;
	unsigned long irq;

	if (!r.frames)
		return;
	spin_lock_irqsave(&c->log_lock, irq);
	if (kfifo_avail(&c->log) < sizeof(r) + payload) {
		c->lost += r.frames;
		c->lost_total += r.frames;
	} else {
		r.lost = c->lost;
		c->lost = 0;
		kfifo_in(&c->log, (u8 *)&r, sizeof(r));
		if (payload) {
			kfifo_in(&c->log, a, (size_t)a_frames * frame_bytes);
			if (b_frames)
				kfifo_in(&c->log, b, (size_t)b_frames * frame_bytes);
		}
		if (flags & RECORD_STARVED)
			c->starved_total += r.frames;
		else
			c->frames_logged += r.frames;
	}
	spin_unlock_irqrestore(&c->log_lock, irq);
	wake_up_interruptible(&c->readers);
}

/* ------------------------------------------------------------------------------------------ */
/* vc4-hdmi: the dmaengine PCM's ring, the DMA's position from the clock. */

struct vc4_stream {
	struct standin_card *c;
	struct snd_pcm_substream *substream;
	spinlock_t lock;
	struct hrtimer timer;
	ktime_t tick;
	u64 start_ns;
	u64 played;		  /* frames the DMA has read since the start */
	u64 period_seen;	  /* periods reported */
	u32 stream;
	bool running;
};

/*
 * What the generic dmaengine PCM (sound/soc/soc-generic-dmaengine-pcm.c,
 * dmaengine_pcm_set_runtime_hwparams with pcm_conf's defaults) and ASoC's merge of the CPU DAI
 * (vc4_hdmi_audio_cpu_dai_drv: 1-8 channels, 32-192 kHz, IEC958_SUBFRAME_LE) with hdmi-codec's
 * i2s DAI (2-8 channels, the same rates) declare on a Pi: MMAP | MMAP_VALID | INTERLEAVED and
 * no BATCH (bcm2835-dma's residue granularity is a burst), no PAUSE (bcm2835-dma has no
 * device_pause); periods of at least maxburst (2) * 8 bytes, at most the DMA's segment
 * (0x3fffffff); at least 2 periods, a whole number of them (snd_dmaengine_pcm_open); any buffer
 * size (SIZE_MAX; 512 KiB preallocated).
 */
static const struct snd_pcm_hardware vc4_hw = {
	.info = SNDRV_PCM_INFO_MMAP | SNDRV_PCM_INFO_MMAP_VALID | SNDRV_PCM_INFO_INTERLEAVED,
	.formats = SNDRV_PCM_FMTBIT_IEC958_SUBFRAME_LE,
	.rates = SNDRV_PCM_RATE_32000 | SNDRV_PCM_RATE_44100 | SNDRV_PCM_RATE_48000 |
		 SNDRV_PCM_RATE_88200 | SNDRV_PCM_RATE_96000 | SNDRV_PCM_RATE_176400 |
		 SNDRV_PCM_RATE_192000,
	.rate_min = 32000,
	.rate_max = 192000,
	.channels_min = 2,
	.channels_max = 8,
	.buffer_bytes_max = SIZE_MAX,
	.period_bytes_min = 2 * 8,
	.period_bytes_max = 0x3fffffff,
	.periods_min = 2,
	.periods_max = UINT_MAX,
};

/*
 * The display's ELD, as the connector holds it once a display answered: a TV with two-channel
 * LPCM at 32 to 96 kHz, 16/20/24 bits (hdmi-codec's startup narrows the stream to it with
 * snd_pcm_hw_constraint_eld). 88.2 and 96 kHz, as most TVs and receivers list, so that a stream
 * at a player's hi-res rate reaches the card (the channel status' rate code at 96 kHz, issue 58).
 */
static const u8 vc4_eld[] = {
	0x10, 0x00, 0x05, 0x00,			/* ELD version 2, baseline of 5 * 4 bytes */
	0x6a, 0x10, 0x00, 0x01,			/* CEA-861-D, monitor name of 10; 1 SAD, HDMI; FL/FR */
	0, 0, 0, 0, 0, 0, 0, 0,			/* port id */
	0x00, 0x00, 0x00, 0x00,			/* manufacturer, product */
	's', 't', 'a', 'n', 'd', 'i', 'n', ' ', 'T', 'V',
	0x09, 0x1f, 0x07,			/* SAD: LPCM, 2 channels, 32/44.1/48/88.2/96 kHz, 16/20/24 bit */
	0x00, 0x00, 0x00,
};

static void vc4_advance(struct vc4_stream *s, u64 now_ns)
{
	struct snd_pcm_runtime *rt = s->substream->runtime;
	u32 fb = frames_to_bytes(rt, 1), size = rt->buffer_size;
	u64 due, from;
	u32 n, off, first;

	if (!s->running || now_ns <= s->start_ns)
		return;
	due = mul_u64_u32_div(now_ns - s->start_ns, rt->rate, NSEC_PER_SEC);
	while (s->played < due) {
		from = s->played;
		/* The DMA reads the ring round and round; a late clock logs every lap it read. */
		n = min_t(u64, due - from, size);
		div_u64_rem(from, size, &off);
		first = min(n, size - off);
		log_played(s->c, s->stream, from, 0, fb, rt->dma_area + (size_t)off * fb, first,
			   rt->dma_area, n - first, 0);
		s->played += n;
	}
}

static enum hrtimer_restart vc4_tick(struct hrtimer *t)
{
	struct vc4_stream *s = container_of(t, struct vc4_stream, timer);
	struct snd_pcm_runtime *rt = s->substream->runtime;
	unsigned long irq;
	bool elapsed = false;

	spin_lock_irqsave(&s->lock, irq);
	if (!s->running) {
		spin_unlock_irqrestore(&s->lock, irq);
		return HRTIMER_NORESTART;
	}
	vc4_advance(s, ktime_get_ns());
	if (div_u64(s->played, rt->period_size) > s->period_seen) {
		s->period_seen = div_u64(s->played, rt->period_size);
		elapsed = true;
	}
	spin_unlock_irqrestore(&s->lock, irq);
	/* The DMA's completion callback of each period (dmaengine_pcm_dma_complete). */
	if (elapsed)
		snd_pcm_period_elapsed(s->substream);
	hrtimer_forward_now(t, s->tick);
	return HRTIMER_RESTART;
}

static int vc4_open(struct snd_pcm_substream *substream)
{
	struct standin_card *c = snd_pcm_substream_chip(substream);
	struct snd_pcm_runtime *rt = substream->runtime;
	struct vc4_stream *s;
	int err;

	atomic_inc(&c->opens);
	/* vc4_hdmi_audio_startup: no display (the encoder is not in HDMI mode), no stream. */
	if (!READ_ONCE(display[c->index])) {
		atomic_inc(&c->refused);
		return -ENOTSUPP;
	}
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	s->c = c;
	s->substream = substream;
	spin_lock_init(&s->lock);
	hrtimer_init(&s->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	s->timer.function = vc4_tick;
	rt->private_data = s;
	rt->hw = vc4_hw;
	/* Both return 1 when they narrowed a parameter: only a negative value is an error. */
	err = snd_pcm_hw_constraint_integer(rt, SNDRV_PCM_HW_PARAM_PERIODS);
	if (err >= 0)
		err = snd_pcm_hw_constraint_eld(rt, (void *)vc4_eld);
	if (err < 0) {
		kfree(s);
		return err;
	}
	return 0;
}

static int vc4_close(struct snd_pcm_substream *substream)
{
	struct vc4_stream *s = substream->runtime->private_data;

	hrtimer_cancel(&s->timer);
	kfree(s);
	return 0;
}

static int vc4_prepare(struct snd_pcm_substream *substream)
{
	struct vc4_stream *s = substream->runtime->private_data;
	unsigned long irq;

	spin_lock_irqsave(&s->lock, irq);
	s->played = 0;
	s->period_seen = 0;
	s->stream = ++s->c->streams;
	spin_unlock_irqrestore(&s->lock, irq);
	return 0;
}

static int vc4_trigger(struct snd_pcm_substream *substream, int cmd)
{
	struct vc4_stream *s = substream->runtime->private_data;
	struct snd_pcm_runtime *rt = substream->runtime;
	u64 period_ns;

	switch (cmd) {
	case SNDRV_PCM_TRIGGER_START:
		spin_lock(&s->lock);
		/* A cyclic transfer from the ring's start (dmaengine_pcm_prepare_and_submit). */
		s->played = 0;
		s->period_seen = 0;
		s->start_ns = ktime_get_ns();
		s->running = true;
		spin_unlock(&s->lock);
		atomic_inc(&s->c->running);
		/* The clock looks at least every 50 ms, so that the log trails the DMA closely. */
		period_ns = div_u64((u64)rt->period_size * NSEC_PER_SEC, rt->rate);
		s->tick = ns_to_ktime(clamp_t(u64, period_ns, NSEC_PER_MSEC, 50 * NSEC_PER_MSEC));
		hrtimer_start(&s->timer, s->tick, HRTIMER_MODE_REL_SOFT);
		return 0;
	case SNDRV_PCM_TRIGGER_STOP:
	case SNDRV_PCM_TRIGGER_SUSPEND:
		spin_lock(&s->lock);
		vc4_advance(s, ktime_get_ns());
		s->running = false;
		spin_unlock(&s->lock);
		atomic_dec(&s->c->running);
		hrtimer_try_to_cancel(&s->timer);
		return 0;
	}
	return -EINVAL;
}

static int vc4_sync_stop(struct snd_pcm_substream *substream)
{
	struct vc4_stream *s = substream->runtime->private_data;

	hrtimer_cancel(&s->timer);
	return 0;
}

static snd_pcm_uframes_t vc4_pointer(struct snd_pcm_substream *substream)
{
	struct vc4_stream *s = substream->runtime->private_data;
	u32 pos;

	/* Logged up to the position reported: the program cannot refill frames not yet logged. */
	spin_lock(&s->lock);
	vc4_advance(s, ktime_get_ns());
	div_u64_rem(s->played, substream->runtime->buffer_size, &pos);
	spin_unlock(&s->lock);
	return pos;
}

static const struct snd_pcm_ops vc4_ops = {
	.open = vc4_open,
	.close = vc4_close,
	.prepare = vc4_prepare,
	.trigger = vc4_trigger,
	.sync_stop = vc4_sync_stop,
	.pointer = vc4_pointer,
};

/* hdmi-codec's IEC958 controls, which cards/vc4-hdmi.conf's hook writes (and locks). */
static int iec958_info(struct snd_kcontrol *k, struct snd_ctl_elem_info *uinfo)
{
	uinfo->type = SNDRV_CTL_ELEM_TYPE_IEC958;
	uinfo->count = 1;
	return 0;
}

static int iec958_default_get(struct snd_kcontrol *k, struct snd_ctl_elem_value *v)
{
	struct standin_card *c = snd_kcontrol_chip(k);

	memcpy(v->value.iec958.status, c->iec958, sizeof(c->iec958));
	return 0;
}

static int iec958_default_put(struct snd_kcontrol *k, struct snd_ctl_elem_value *v)
{
	struct standin_card *c = snd_kcontrol_chip(k);
	int changed = memcmp(c->iec958, v->value.iec958.status, sizeof(c->iec958)) != 0;

	memcpy(c->iec958, v->value.iec958.status, sizeof(c->iec958));
	return changed;
}

static int iec958_mask_get(struct snd_kcontrol *k, struct snd_ctl_elem_value *v)
{
	memset(v->value.iec958.status, 0xff, sizeof(v->value.iec958.status));
	return 0;
}

static int eld_info(struct snd_kcontrol *k, struct snd_ctl_elem_info *uinfo)
{
	uinfo->type = SNDRV_CTL_ELEM_TYPE_BYTES;
	uinfo->count = 128;	/* MAX_ELD_BYTES */
	return 0;
}

static int eld_get(struct snd_kcontrol *k, struct snd_ctl_elem_value *v)
{
	struct standin_card *c = snd_kcontrol_chip(k);

	memset(v->value.bytes.data, 0, 128);
	if (READ_ONCE(display[c->index]))
		memcpy(v->value.bytes.data, vc4_eld, sizeof(vc4_eld));
	return 0;
}

static int jack_info(struct snd_kcontrol *k, struct snd_ctl_elem_info *uinfo)
{
	uinfo->type = SNDRV_CTL_ELEM_TYPE_BOOLEAN;
	uinfo->count = 1;
	uinfo->value.integer.min = 0;
	uinfo->value.integer.max = 1;
	return 0;
}

static int jack_get(struct snd_kcontrol *k, struct snd_ctl_elem_value *v)
{
	struct standin_card *c = snd_kcontrol_chip(k);

	v->value.integer.value[0] = READ_ONCE(display[c->index]);
	return 0;
}

/* vc4_hdmi_codec_init's "HDMI Jack" (hdmi-codec reports a hotplug on it, and a new ELD). */
static const struct snd_kcontrol_new vc4_jack = {
	.iface = SNDRV_CTL_ELEM_IFACE_CARD, .name = "HDMI Jack",
	.access = SNDRV_CTL_ELEM_ACCESS_READ | SNDRV_CTL_ELEM_ACCESS_VOLATILE,
	.info = jack_info, .get = jack_get,
};

static const struct snd_kcontrol_new vc4_controls[] = {
	{ .iface = SNDRV_CTL_ELEM_IFACE_PCM, .name = "ELD",
	  .access = SNDRV_CTL_ELEM_ACCESS_READ | SNDRV_CTL_ELEM_ACCESS_VOLATILE,
	  .info = eld_info, .get = eld_get },
	{ .iface = SNDRV_CTL_ELEM_IFACE_PCM, .name = SNDRV_CTL_NAME_IEC958("", PLAYBACK, DEFAULT),
	  .info = iec958_info, .get = iec958_default_get, .put = iec958_default_put },
	{ .iface = SNDRV_CTL_ELEM_IFACE_PCM, .name = SNDRV_CTL_NAME_IEC958("", PLAYBACK, MASK),
	  .access = SNDRV_CTL_ELEM_ACCESS_READ, .info = iec958_info, .get = iec958_mask_get },
};

/* ------------------------------------------------------------------------------------------ */
/* bcm2835 headphones: an indirect driver in front of the VideoCore's own queue. */

#define BCM_SUBSTREAMS 8

struct bcm_stream {
	struct standin_card *c;
	struct snd_pcm_substream *substream;
	struct snd_pcm_indirect pcm_indirect;
	/* bcm2835_alsa_stream's position bookkeeping (bcm2835_playback_fifo) */
	atomic_t pos;
	unsigned int period_offset, buffer_size, period_size;
	bool draining;
	u64 interpolate_start;
	/* The VideoCore: what it was handed and has not played yet, and its clock. */
	spinlock_t vc_lock;
	u8 *vc_queue;
	size_t vc_size, vc_head, vc_queued;
	u64 vc_start_ns, vc_clock, vc_frame;
	u32 vc_completed;	  /* bytes played, not yet reported (VC_AUDIO_MSG_TYPE_COMPLETE) */
	u32 stream, generation;
	bool vc_running;
	struct hrtimer timer;
	struct work_struct complete;
};

/*
 * bcm2835-pcm.c's snd_bcm2835_playback_hw (raspberrypi/linux): INTERLEAVED | BLOCK_TRANSFER |
 * MMAP | MMAP_VALID | SYNC_APPLPTR | BATCH, U8 and S16_LE, 8-192 kHz continuous, 1-8 channels,
 * 512 KiB of buffer at most (the managed buffer allows 128 KiB), periods of 1 KiB to 512 KiB,
 * 1-128 periods.
 */
static const struct snd_pcm_hardware bcm_hw = {
	.info = SNDRV_PCM_INFO_INTERLEAVED | SNDRV_PCM_INFO_BLOCK_TRANSFER | SNDRV_PCM_INFO_MMAP |
		SNDRV_PCM_INFO_MMAP_VALID | SNDRV_PCM_INFO_SYNC_APPLPTR | SNDRV_PCM_INFO_BATCH,
	.formats = SNDRV_PCM_FMTBIT_U8 | SNDRV_PCM_FMTBIT_S16_LE,
	.rates = SNDRV_PCM_RATE_CONTINUOUS | SNDRV_PCM_RATE_8000_192000,
	.rate_min = 8000,
	.rate_max = 192000,
	.channels_min = 1,
	.channels_max = 8,
	.buffer_bytes_max = 512 * 1024,
	.period_bytes_min = 1 * 1024,
	.period_bytes_max = 512 * 1024,
	.periods_min = 1,
	.periods_max = 128,
};

/* The VideoCore reports what it consumed about every 10 ms ("position update is in 10ms order"). */
#define VC_TICK_NS (10 * NSEC_PER_MSEC)

static enum hrtimer_restart bcm_tick(struct hrtimer *t)
{
	struct bcm_stream *s = container_of(t, struct bcm_stream, timer);
	struct snd_pcm_runtime *rt = s->substream->runtime;
	u32 fb = frames_to_bytes(rt, 1);
	u64 due, now = ktime_get_ns();
	size_t have, take, tail, first;
	unsigned long irq;
	bool report;

	spin_lock_irqsave(&s->vc_lock, irq);
	if (!s->vc_running) {
		spin_unlock_irqrestore(&s->vc_lock, irq);
		return HRTIMER_NORESTART;
	}
	due = mul_u64_u32_div(now - s->vc_start_ns, rt->rate, NSEC_PER_SEC) - s->vc_clock;
	s->vc_clock += due;
	have = s->vc_queued / fb;
	take = min_t(u64, due, have);
	if (take) {
		tail = (s->vc_head + s->vc_size - s->vc_queued) % s->vc_size;
		first = min(take * fb, s->vc_size - tail) / fb;
		log_played(s->c, s->stream, s->vc_frame, s->substream->number, fb, s->vc_queue + tail,
			   first, s->vc_queue, take - first, 0);
		s->vc_frame += take;
		s->vc_queued -= take * fb;
		s->vc_completed += take * fb;
	}
	/* Nothing handed over: the VideoCore plays silence and reports nothing. */
	if (due > take)
		log_played(s->c, s->stream, s->vc_frame, s->substream->number, fb, NULL, due - take,
			   NULL, 0, RECORD_STARVED);
	report = s->vc_completed > 0;
	spin_unlock_irqrestore(&s->vc_lock, irq);
	if (report)
		schedule_work(&s->complete);
	hrtimer_forward_now(t, ns_to_ktime(VC_TICK_NS));
	return HRTIMER_RESTART;
}

/* audio_vchi_callback's VC_AUDIO_MSG_TYPE_COMPLETE: bcm2835_playback_fifo, in process context
 * as the vchiq callback is (the PCM is nonatomic). */
static void bcm_complete(struct work_struct *w)
{
	struct bcm_stream *s = container_of(w, struct bcm_stream, complete);
	struct snd_pcm_substream *substream = s->substream;
	unsigned int bytes, pos;
	unsigned long irq;
	u32 generation;

	spin_lock_irqsave(&s->vc_lock, irq);
	bytes = s->vc_completed;
	s->vc_completed = 0;
	generation = s->generation;
	spin_unlock_irqrestore(&s->vc_lock, irq);
	if (!bytes || !s->period_size)
		return;
	snd_pcm_stream_lock(substream);
	if (generation != READ_ONCE(s->generation) || !snd_pcm_running(substream)) {
		snd_pcm_stream_unlock(substream);
		return;
	}
	if (bytes >= s->buffer_size) {
		snd_pcm_stop(substream, s->draining ? SNDRV_PCM_STATE_SETUP : SNDRV_PCM_STATE_XRUN);
		snd_pcm_stream_unlock(substream);
		return;
	}
	snd_pcm_stream_unlock(substream);
	pos = atomic_read(&s->pos);
	pos = (pos + bytes) % s->buffer_size;
	atomic_set(&s->pos, pos);
	s->interpolate_start = ktime_get_ns();
	s->period_offset += bytes;
	if (s->period_offset >= s->period_size) {
		s->period_offset %= s->period_size;
		snd_pcm_period_elapsed(substream);
	}
}

static int bcm_open(struct snd_pcm_substream *substream)
{
	struct standin_card *c = snd_pcm_substream_chip(substream);
	struct snd_pcm_runtime *rt = substream->runtime;
	struct bcm_stream *s;
	int err;

	atomic_inc(&c->opens);
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	s->c = c;
	s->substream = substream;
	spin_lock_init(&s->vc_lock);
	hrtimer_init(&s->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	s->timer.function = bcm_tick;
	INIT_WORK(&s->complete, bcm_complete);
	rt->private_data = s;
	rt->hw = bcm_hw;
	/* minimum 16 bytes alignment (for vchiq bulk transfers) */
	err = snd_pcm_hw_constraint_step(rt, 0, SNDRV_PCM_HW_PARAM_PERIOD_BYTES, 16);
	/* position update is in 10ms order */
	if (err >= 0)
		err = snd_pcm_hw_constraint_minmax(rt, SNDRV_PCM_HW_PARAM_PERIOD_TIME, 10 * 1000, UINT_MAX);
	if (err < 0) {
		kfree(s);
		return err;
	}
	return 0;
}

static void bcm_vc_stop(struct bcm_stream *s)
{
	unsigned long irq;

	spin_lock_irqsave(&s->vc_lock, irq);
	s->vc_running = false;
	spin_unlock_irqrestore(&s->vc_lock, irq);
}

static int bcm_close(struct snd_pcm_substream *substream)
{
	struct bcm_stream *s = substream->runtime->private_data;

	bcm_vc_stop(s);
	hrtimer_cancel(&s->timer);
	cancel_work_sync(&s->complete);
	kvfree(s->vc_queue);
	kfree(s);
	return 0;
}

static int bcm_hw_params(struct snd_pcm_substream *substream, struct snd_pcm_hw_params *params)
{
	struct bcm_stream *s = substream->runtime->private_data;
	size_t size = params_buffer_bytes(params);

	if (s->vc_size != size) {
		kvfree(s->vc_queue);
		s->vc_queue = kvzalloc(size, GFP_KERNEL);
		s->vc_size = s->vc_queue ? size : 0;
	}
	return s->vc_queue ? 0 : -ENOMEM;
}

static int bcm_prepare(struct snd_pcm_substream *substream)
{
	struct bcm_stream *s = substream->runtime->private_data;
	unsigned long irq;

	bcm_vc_stop(s);
	hrtimer_cancel(&s->timer);
	memset(&s->pcm_indirect, 0, sizeof(s->pcm_indirect));
	s->pcm_indirect.hw_buffer_size = s->pcm_indirect.sw_buffer_size = snd_pcm_lib_buffer_bytes(substream);
	s->buffer_size = snd_pcm_lib_buffer_bytes(substream);
	s->period_size = snd_pcm_lib_period_bytes(substream);
	atomic_set(&s->pos, 0);
	s->period_offset = 0;
	s->draining = false;
	s->interpolate_start = ktime_get_ns();
	spin_lock_irqsave(&s->vc_lock, irq);
	s->vc_head = s->vc_queued = 0;
	s->vc_completed = 0;
	s->vc_frame = 0;
	s->generation++;
	s->stream = ++s->c->streams;
	spin_unlock_irqrestore(&s->vc_lock, irq);
	return 0;
}

/* bcm2835_audio_write: the bytes go to the VideoCore's queue. */
static void bcm_transfer(struct snd_pcm_substream *substream, struct snd_pcm_indirect *rec, size_t bytes)
{
	struct bcm_stream *s = substream->runtime->private_data;
	const u8 *src = substream->runtime->dma_area + rec->sw_data;
	unsigned long irq;
	size_t n;

	spin_lock_irqsave(&s->vc_lock, irq);
	while (bytes && s->vc_queued < s->vc_size) {
		n = min3(bytes, s->vc_size - s->vc_head, s->vc_size - s->vc_queued);
		memcpy(s->vc_queue + s->vc_head, src, n);
		s->vc_head = (s->vc_head + n) % s->vc_size;
		s->vc_queued += n;
		src += n;
		bytes -= n;
	}
	spin_unlock_irqrestore(&s->vc_lock, irq);
}

static int bcm_ack(struct snd_pcm_substream *substream)
{
	struct bcm_stream *s = substream->runtime->private_data;

	return snd_pcm_indirect_playback_transfer(substream, &s->pcm_indirect, bcm_transfer);
}

static int bcm_trigger(struct snd_pcm_substream *substream, int cmd)
{
	struct bcm_stream *s = substream->runtime->private_data;
	unsigned long irq;

	switch (cmd) {
	case SNDRV_PCM_TRIGGER_START:
		spin_lock_irqsave(&s->vc_lock, irq);
		s->vc_start_ns = ktime_get_ns();
		s->vc_clock = 0;
		s->vc_running = true;
		spin_unlock_irqrestore(&s->vc_lock, irq);
		atomic_inc(&s->c->running);
		hrtimer_start(&s->timer, ns_to_ktime(VC_TICK_NS), HRTIMER_MODE_REL_SOFT);
		return 0;
	case SNDRV_PCM_TRIGGER_DRAIN:
		s->draining = true;
		return 0;
	case SNDRV_PCM_TRIGGER_STOP:
		bcm_vc_stop(s);
		atomic_dec(&s->c->running);
		hrtimer_cancel(&s->timer);
		return 0;
	}
	return -EINVAL;
}

static snd_pcm_uframes_t bcm_pointer(struct snd_pcm_substream *substream)
{
	struct bcm_stream *s = substream->runtime->private_data;
	struct snd_pcm_runtime *rt = substream->runtime;
	u64 now = ktime_get_ns();

	/* Give userspace better delay reporting by interpolating between GPU notifications. */
	if (s->interpolate_start && s->interpolate_start < now)
		rt->delay = -(snd_pcm_sframes_t)div_u64((now - s->interpolate_start) * rt->rate, NSEC_PER_SEC);
	return snd_pcm_indirect_playback_pointer(substream, &s->pcm_indirect, atomic_read(&s->pos));
}

static const struct snd_pcm_ops bcm_ops = {
	.open = bcm_open,
	.close = bcm_close,
	.hw_params = bcm_hw_params,
	.prepare = bcm_prepare,
	.trigger = bcm_trigger,
	.pointer = bcm_pointer,
	.ack = bcm_ack,
};

/* snd_bcm2835_ctl: the headphones' volume and mute ("PCM Playback Volume/Switch"). */
static int bcm_volume_info(struct snd_kcontrol *k, struct snd_ctl_elem_info *uinfo)
{
	uinfo->type = SNDRV_CTL_ELEM_TYPE_INTEGER;
	uinfo->count = 1;
	uinfo->value.integer.min = -10239;
	uinfo->value.integer.max = 400;
	return 0;
}

static int bcm_switch_info(struct snd_kcontrol *k, struct snd_ctl_elem_info *uinfo)
{
	uinfo->type = SNDRV_CTL_ELEM_TYPE_BOOLEAN;
	uinfo->count = 1;
	uinfo->value.integer.min = 0;
	uinfo->value.integer.max = 1;
	return 0;
}

static int bcm_ctl_get(struct snd_kcontrol *k, struct snd_ctl_elem_value *v)
{
	v->value.integer.value[0] = k->private_value;
	return 0;
}

static int bcm_ctl_put(struct snd_kcontrol *k, struct snd_ctl_elem_value *v)
{
	int changed = k->private_value != v->value.integer.value[0];

	k->private_value = v->value.integer.value[0];
	return changed;
}

static const struct snd_kcontrol_new bcm_controls[] = {
	{ .iface = SNDRV_CTL_ELEM_IFACE_MIXER, .name = "PCM Playback Volume", .private_value = 0,
	  .info = bcm_volume_info, .get = bcm_ctl_get, .put = bcm_ctl_put },
	{ .iface = SNDRV_CTL_ELEM_IFACE_MIXER, .name = "PCM Playback Switch", .private_value = 1,
	  .info = bcm_switch_info, .get = bcm_ctl_get, .put = bcm_ctl_put },
};

/* ------------------------------------------------------------------------------------------ */
/* debugfs: the played log and the counters */

static ssize_t played_read(struct file *f, char __user *buf, size_t len, loff_t *ppos)
{
	struct standin_card *c = f->private_data;
	unsigned int copied = 0;
	int err;

	if (mutex_lock_interruptible(&c->read_lock))
		return -ERESTARTSYS;
	while (kfifo_is_empty(&c->log)) {
		mutex_unlock(&c->read_lock);
		if (f->f_flags & O_NONBLOCK)
			return -EAGAIN;
		if (wait_event_interruptible(c->readers, !kfifo_is_empty(&c->log)))
			return -ERESTARTSYS;
		if (mutex_lock_interruptible(&c->read_lock))
			return -ERESTARTSYS;
	}
	err = kfifo_to_user(&c->log, buf, len, &copied);
	mutex_unlock(&c->read_lock);
	return err ? err : copied;
}

static int played_open(struct inode *inode, struct file *f)
{
	f->private_data = inode->i_private;
	return nonseekable_open(inode, f);
}

static const struct file_operations played_fops = {
	.owner = THIS_MODULE,
	.open = played_open,
	.read = played_read,
	.llseek = no_llseek,
};

static int status_show(struct seq_file *m, void *unused)
{
	struct standin_card *c = m->private;
	unsigned long irq;
	u64 logged, lost, starved;

	spin_lock_irqsave(&c->log_lock, irq);
	logged = c->frames_logged;
	lost = c->lost_total;
	starved = c->starved_total;
	spin_unlock_irqrestore(&c->log_lock, irq);
	seq_printf(m, "card: %s\n", c->id);
	if (c->index >= 0)
		seq_printf(m, "display: %d\n", READ_ONCE(display[c->index]));
	seq_printf(m, "opens: %d\nrefused: %d\nrunning: %d\nstreams: %u\n", atomic_read(&c->opens),
		   atomic_read(&c->refused), atomic_read(&c->running), c->streams);
	seq_printf(m, "frames_logged: %llu\nframes_lost: %llu\nframes_starved: %llu\n", logged, lost, starved);
	seq_printf(m, "log_queued: %u\n", kfifo_len(&c->log));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(status);

/* ------------------------------------------------------------------------------------------ */

static struct dentry *debug_root;

/* A display plugged or unplugged: the events a hotplug gives on a Pi's card. */
static int display_set(const char *val, const struct kernel_param *kp)
{
	int err = param_array_ops.set(val, kp);
	int i;

	for (i = 0; i < 2; i++) {
		struct standin_card *c = &cards[i];

		if (!c->card || c->had_display == READ_ONCE(display[i]))
			continue;
		c->had_display = display[i];
		snd_ctl_notify(c->card, SNDRV_CTL_EVENT_MASK_VALUE, &c->jack->id);
		snd_ctl_notify(c->card, SNDRV_CTL_EVENT_MASK_VALUE, &c->eld->id);
	}
	return err;
}

static int make_card(struct standin_card *c, const char *id, int index)
{
	struct snd_card *card;
	struct snd_pcm *pcm;
	size_t size = roundup_pow_of_two((size_t)max(log_kib, 64) * 1024);
	void *buf;
	int err, i;

	c->id = id;
	c->index = index;
	spin_lock_init(&c->log_lock);
	mutex_init(&c->read_lock);
	init_waitqueue_head(&c->readers);
	buf = vmalloc(size);
	if (!buf)
		return -ENOMEM;
	err = kfifo_init(&c->log, buf, size);
	if (err) {
		vfree(buf);
		return err;
	}
	c->pdev = platform_device_register_simple("snd_pi_standin", index + 1, NULL, 0);
	if (IS_ERR(c->pdev)) {
		err = PTR_ERR(c->pdev);
		c->pdev = NULL;
		goto fail_log;
	}
	err = snd_card_new(&c->pdev->dev, -1, id, THIS_MODULE, 0, &card);
	if (err < 0)
		goto fail_log;
	c->card = card;
	if (index >= 0) {
		/* vc4_hdmi_audio_init: card->driver_name "vc4-hdmi", the variant's card name. */
		strscpy(card->driver, "vc4-hdmi", sizeof(card->driver));
		snprintf(card->shortname, sizeof(card->shortname), "vc4-hdmi-%d", index);
		strscpy(card->longname, card->shortname, sizeof(card->longname));
		/* The dai_link "MAI", stream "MAI PCM", hdmi-codec's DAI "i2s-hifi". */
		err = snd_pcm_new(card, "MAI PCM i2s-hifi-0", 0, 1, 0, &pcm);
		if (err < 0)
			goto fail_card;
		strscpy(pcm->name, "MAI PCM i2s-hifi-0", sizeof(pcm->name));
		snd_pcm_set_ops(pcm, SNDRV_PCM_STREAM_PLAYBACK, &vc4_ops);
		snd_pcm_set_managed_buffer_all(pcm, SNDRV_DMA_TYPE_VMALLOC, NULL, 512 * 1024, 0);
		c->iec958[0] = IEC958_AES0_CON_EMPHASIS_NONE;
		c->iec958[1] = IEC958_AES1_CON_ORIGINAL | IEC958_AES1_CON_PCM_CODER;
		c->iec958[3] = IEC958_AES3_CON_FS_48000;
		c->had_display = display[index];
		c->jack = snd_ctl_new1(&vc4_jack, c);
		err = snd_ctl_add(card, c->jack);
		for (i = 0; i < ARRAY_SIZE(vc4_controls) && !err; i++) {
			struct snd_kcontrol *k = snd_ctl_new1(&vc4_controls[i], c);

			if (i == 0)
				c->eld = k;
			err = snd_ctl_add(card, k);
		}
	} else {
		/* snd_add_child_device with bcm2835_audio_headphones; the driver name as strscpy
		 * cuts "bcm2835_headphones" to the card's 16 bytes. */
		strscpy(card->driver, "bcm2835_headphones", sizeof(card->driver));
		strscpy(card->shortname, "bcm2835 Headphones", sizeof(card->shortname));
		strscpy(card->longname, "bcm2835 Headphones", sizeof(card->longname));
		strscpy(card->mixername, "Broadcom Mixer", sizeof(card->mixername));
		err = snd_pcm_new(card, "bcm2835 Headphones", 0, BCM_SUBSTREAMS, 0, &pcm);
		if (err < 0)
			goto fail_card;
		pcm->nonatomic = true;
		strscpy(pcm->name, "bcm2835 Headphones", sizeof(pcm->name));
		snd_pcm_set_ops(pcm, SNDRV_PCM_STREAM_PLAYBACK, &bcm_ops);
		snd_pcm_set_managed_buffer_all(pcm, SNDRV_DMA_TYPE_CONTINUOUS, NULL, 128 * 1024, 128 * 1024);
		for (i = 0; i < ARRAY_SIZE(bcm_controls) && !err; i++)
			err = snd_ctl_add(card, snd_ctl_new1(&bcm_controls[i], c));
	}
	if (err < 0)
		goto fail_card;
	pcm->private_data = c;
	err = snd_card_register(card);
	if (err < 0)
		goto fail_card;
	c->dir = debugfs_create_dir(id, debug_root);
	debugfs_create_file("played", 0400, c->dir, c, &played_fops);
	debugfs_create_file("status", 0444, c->dir, c, &status_fops);
	return 0;

fail_card:
	snd_card_free(card);
	c->card = NULL;
fail_log:
	if (c->pdev)
		platform_device_unregister(c->pdev);
	c->pdev = NULL;
	vfree(c->log.kfifo.data);
	return err;
}

static void free_card(struct standin_card *c)
{
	if (!c->card)
		return;
	snd_card_free(c->card);
	c->card = NULL;
	platform_device_unregister(c->pdev);
	c->pdev = NULL;
	vfree(c->log.kfifo.data);
}

static int __init standin_init(void)
{
	int err = 0;

	debug_root = debugfs_create_dir("pi-standin", NULL);
	if (hdmi) {
		err = make_card(&cards[0], "vc4hdmi0", 0);
		if (!err)
			err = make_card(&cards[1], "vc4hdmi1", 1);
	}
	if (!err && headphones)
		err = make_card(&cards[2], "Headphones", -1);
	if (err) {
		free_card(&cards[0]);
		free_card(&cards[1]);
		free_card(&cards[2]);
		debugfs_remove_recursive(debug_root);
	}
	return err;
}

static void __exit standin_exit(void)
{
	debugfs_remove_recursive(debug_root);
	free_card(&cards[2]);
	free_card(&cards[1]);
	free_card(&cards[0]);
}

module_init(standin_init);
module_exit(standin_exit);
