#define _GNU_SOURCE
#include "CALSA.h"

#include <pthread.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

// alsa-lib's default handler prints every internal failure (an underrun, a lost server) to
// stderr; a daemon that recovers from those on purpose must not spray them into its journal.
static void calsa_quiet_error_handler(const char *file, int line, const char *function, int err,
                                      const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

void calsa_silence_library_errors(void) {
    snd_lib_error_set_handler(calsa_quiet_error_handler);
}

static int calsa_format_bits(snd_pcm_format_t format) {
    switch (format) {
    case SND_PCM_FORMAT_U8: return 8;
    case SND_PCM_FORMAT_S16_LE: return 16;
    case SND_PCM_FORMAT_S24_LE: return 24;
    case SND_PCM_FORMAT_S32_LE: return 32;
    case SND_PCM_FORMAT_FLOAT_LE: return 32;
    default: return 16;
    }
}

// Picks the first format the device accepts, trying the wanted one, then the others by distance
// in bits, preferring more resolution on a tie and integer over float at 32 bits for integer
// sources (a float request prefers float).
static int calsa_choose_format(snd_pcm_t *pcm, snd_pcm_hw_params_t *params, snd_pcm_format_t wanted,
                               snd_pcm_format_t *chosen) {
    static const snd_pcm_format_t candidates[] = {
        SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_S24_LE, SND_PCM_FORMAT_S32_LE,
        SND_PCM_FORMAT_FLOAT_LE, SND_PCM_FORMAT_U8,
    };
    enum { count = sizeof candidates / sizeof candidates[0] };
    snd_pcm_format_t order[count + 1];
    int used[count] = {0};
    int n = 0;
    order[n++] = wanted;
    int wanted_bits = calsa_format_bits(wanted);
    for (int round = 0; round < count; round++) {
        int best = -1, best_score = 1 << 30;
        for (int i = 0; i < count; i++) {
            if (used[i] || candidates[i] == wanted) continue;
            int bits = calsa_format_bits(candidates[i]);
            int distance = abs(bits - wanted_bits) * 4;
            if (bits < wanted_bits) distance += 2;
            if ((candidates[i] == SND_PCM_FORMAT_FLOAT_LE) != (wanted == SND_PCM_FORMAT_FLOAT_LE)) distance += 1;
            if (distance < best_score) { best_score = distance; best = i; }
        }
        if (best < 0) break;
        used[best] = 1;
        order[n++] = candidates[best];
    }
    for (int i = 0; i < n; i++) {
        if (snd_pcm_hw_params_test_format(pcm, params, order[i]) == 0) {
            *chosen = order[i];
            return snd_pcm_hw_params_set_format(pcm, params, order[i]);
        }
    }
    return -EINVAL;
}

int calsa_pcm_configure_hardware(snd_pcm_t *pcm, calsa_hw_config *config) {
    snd_pcm_hw_params_t *params;
    snd_pcm_hw_params_alloca(&params);
    int err = snd_pcm_hw_params_any(pcm, params);
    if (err < 0) return err;
    // Resampling inside alsa-lib would cost CPU on every period; the engine renders the clip at
    // the device's own rate once instead.
    snd_pcm_hw_params_set_rate_resample(pcm, params, 0);
    if ((err = snd_pcm_hw_params_set_access(pcm, params, SND_PCM_ACCESS_RW_INTERLEAVED)) < 0) return err;
    snd_pcm_format_t format = config->format;
    if ((err = calsa_choose_format(pcm, params, config->format, &format)) < 0) return err;
    unsigned int channels = config->channels;
    if ((err = snd_pcm_hw_params_set_channels_near(pcm, params, &channels)) < 0) return err;
    unsigned int rate = config->rate;
    if ((err = snd_pcm_hw_params_set_rate_near(pcm, params, &rate, NULL)) < 0) return err;

    unsigned int buffer_time = config->buffer_time_us;
    if ((err = snd_pcm_hw_params_set_buffer_time_near(pcm, params, &buffer_time, NULL)) < 0) return err;
    unsigned int period_time = buffer_time / (config->periods ? config->periods : 4);
    if ((err = snd_pcm_hw_params_set_period_time_near(pcm, params, &period_time, NULL)) < 0) return err;
    if ((err = snd_pcm_hw_params(pcm, params)) < 0) return err;

    snd_pcm_uframes_t buffer_frames = 0, period_frames = 0;
    if ((err = snd_pcm_hw_params_get_buffer_size(params, &buffer_frames)) < 0) return err;
    if ((err = snd_pcm_hw_params_get_period_size(params, &period_frames, NULL)) < 0) return err;
    config->format = format;
    config->channels = channels;
    config->rate = rate;
    config->buffer_frames = buffer_frames;
    config->period_frames = period_frames;
    return 0;
}

int calsa_pcm_configure_software(snd_pcm_t *pcm, snd_pcm_uframes_t start_threshold,
                                 snd_pcm_uframes_t avail_min) {
    snd_pcm_sw_params_t *params;
    snd_pcm_sw_params_alloca(&params);
    int err = snd_pcm_sw_params_current(pcm, params);
    if (err < 0) return err;
    if ((err = snd_pcm_sw_params_set_start_threshold(pcm, params, start_threshold)) < 0) return err;
    if ((err = snd_pcm_sw_params_set_avail_min(pcm, params, avail_min)) < 0) return err;
    return snd_pcm_sw_params(pcm, params);
}

void calsa_name_current_thread(const char *name) {
    pthread_setname_np(pthread_self(), name);
}
