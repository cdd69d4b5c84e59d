// CALSA: the few pieces of ALSA's PCM API that Swift cannot call comfortably.
//
// Everything else (snd_pcm_open, hw/sw parameters through their malloc'd forms, writei, poll
// descriptors, drop, close, device hints) is plain C that Swift imports directly from
// <alsa/asoundlib.h>, which this header re-exports. What lives here is a varargs callback (the
// library's error printer) and a call glibc hides behind _GNU_SOURCE.
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

/// Keeps alsa-lib from printing its own diagnostics to stderr, for the whole process. The daemon
/// calls it once at start (it reports every error itself, once, through its logger); the
/// KeepAlive library never does, so an embedding application keeps its own ALSA diagnostics.
/// Idempotent.
void calsa_silence_library_errors(void);

/// Names the calling thread (visible in `top -H` and /proc/PID/task/TID/comm). glibc declares
/// pthread_setname_np only under _GNU_SOURCE, which a Swift module cannot set per header.
void calsa_name_current_thread(const char *name);

#ifdef __cplusplus
}
#endif

#endif
