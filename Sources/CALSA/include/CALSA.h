// CALSA: the few pieces of ALSA's PCM API that Swift cannot call comfortably.
//
// Everything else (snd_pcm_open, writei, poll descriptors, recover, drop, close, device hints)
// is plain C that Swift imports directly from <alsa/asoundlib.h>, which this header re-exports.
// What lives here is what needs alloca-backed parameter structs (the snd_pcm_*_params_alloca
// macros) or a varargs callback (the library's error printer).
#ifndef CALSA_H
#define CALSA_H

#include <alsa/asoundlib.h>
#include <poll.h>
#include <sys/eventfd.h>
// mallopt (one malloc arena for the daemon): <malloc.h> is not part of Swift's Glibc module.
#include <malloc.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What the engine asks of a device, and what the device then agreed to.
typedef struct calsa_hw_config {
    snd_pcm_format_t format;
    unsigned int rate;
    unsigned int channels;
    /// In: wanted buffer length in microseconds. Out: unchanged.
    unsigned int buffer_time_us;
    /// In: wanted number of periods in the buffer. Out: unchanged.
    unsigned int periods;
    /// Out: the buffer and period the device granted, in frames.
    snd_pcm_uframes_t buffer_frames;
    snd_pcm_uframes_t period_frames;
} calsa_hw_config;

/// Keeps alsa-lib from printing its own diagnostics to stderr: the engine reports every error
/// itself, once, through its logger. Idempotent; safe to call from any thread.
void calsa_silence_library_errors(void);

/// Negotiates hardware parameters: RW interleaved access; the requested format, rate and channel
/// count when the device takes them, otherwise the nearest it offers (formats among S16_LE,
/// S24_LE, S32_LE, FLOAT_LE and U8, by closeness in resolution); then a buffer near the requested
/// length with about the requested number of periods.
/// Returns 0 or a negative errno value; `config` holds what was granted.
int calsa_pcm_configure_hardware(snd_pcm_t *pcm, calsa_hw_config *config);

/// Sets the start threshold and the minimum free space that makes the device's descriptors
/// signal writable. Returns 0 or a negative errno value.
int calsa_pcm_configure_software(snd_pcm_t *pcm, snd_pcm_uframes_t start_threshold,
                                 snd_pcm_uframes_t avail_min);

/// Names the calling thread (visible in `top -H` and /proc/PID/task/TID/comm). glibc declares
/// pthread_setname_np only under _GNU_SOURCE, which a Swift module cannot set per header.
void calsa_name_current_thread(const char *name);

#ifdef __cplusplus
}
#endif

#endif
