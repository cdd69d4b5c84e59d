// CALSA: the few pieces of ALSA's PCM API that Swift cannot call comfortably.
//
// Everything else (snd_pcm_open, hw/sw parameters through their malloc'd forms, writei, poll
// descriptors, drop, close, device hints) is plain C that Swift imports directly from
// <alsa/asoundlib.h>, which this header re-exports. What lives here is a varargs callback (the
// library's error printer). Calls that are Linux's rather than ALSA's live in CSystem.
#ifndef CALSA_H
#define CALSA_H

#include <alsa/asoundlib.h>
#include <poll.h>
#include <sys/eventfd.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Keeps alsa-lib from printing its own diagnostics to stderr, for the whole process. The daemon
/// calls it once at start (it reports every error itself, once, through its logger); the
/// KeepAlive library never does, so an embedding application keeps its own ALSA diagnostics.
/// Idempotent.
void calsa_silence_library_errors(void);

#ifdef __cplusplus
}
#endif

#endif
