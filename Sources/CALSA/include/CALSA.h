// CALSA: the few pieces of ALSA's PCM API that Swift cannot call comfortably.
//
// Everything else (snd_pcm_open, hw/sw parameters through their malloc'd forms, writei, poll
// descriptors, drop, close, device hints) is plain C that Swift imports directly from
// <alsa/asoundlib.h>, which this header re-exports. What lives here is a varargs callback (the
// library's error printer), a macro (the version of the external-plug-in protocol through which
// keepalived builds the PCM of a sound server's sink in process) and one flag of the hardware
// parameters that alsa-lib does not expose. Calls that are Linux's rather
// than ALSA's live in CKeepAliveLinux.
#ifndef CALSA_H
#define CALSA_H

#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <poll.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Keeps alsa-lib from printing its own diagnostics to stderr, for the whole process. The daemon
/// calls it once at start (it reports every error itself, once, through its logger); the
/// KeepAlive library never does, so an embedding application keeps its own ALSA diagnostics.
/// Idempotent.
void calsa_silence_library_errors(void);

/// Whether the device's driver asks to be told of every move of the application's pointer
/// (the kernel's SNDRV_PCM_INFO_SYNC_APPLPTR): an indirect driver, which copies out only the
/// frames written since its last look (a Raspberry Pi's headphone jack, bcm2835), so a ring
/// written once is played once. alsa-lib has no accessor for this flag; the parameter block is
/// the kernel's `struct snd_pcm_hw_params`, whose layout is a fixed ABI. 0 when the block is not
/// that struct (a size alsa-lib reports otherwise).
int calsa_hw_params_is_indirect(const snd_pcm_hw_params_t *params);

/// SND_PCM_IOPLUG_VERSION, which an snd_pcm_ioplug_t must carry.
static inline unsigned int calsa_ioplug_version(void) { return SND_PCM_IOPLUG_VERSION; }

#ifdef __cplusplus
}
#endif

#endif
