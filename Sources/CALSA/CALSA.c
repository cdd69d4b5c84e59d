#include "CALSA.h"

#include <stdarg.h>
#include <stddef.h>

// alsa-lib's default handler prints every internal failure (an underrun, a lost server) to
// stderr; a daemon that recovers from those on purpose must not spray them into its journal.
static void calsa_quiet_error_handler(const char *file, int line, const char *function, int err,
                                      const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

void calsa_silence_library_errors(void) {
    snd_lib_error_set_handler(calsa_quiet_error_handler);
}

// The head of the kernel's struct snd_pcm_hw_params (include/uapi/sound/asound.h) up to `info`:
// its header cannot be included beside alsa-lib's, which define the same structs.
struct calsa_kernel_hw_params_head {
    unsigned int flags;
    unsigned int masks[3][8];
    unsigned int mres[5][8];
    struct { unsigned int min, max, bits; } intervals[12];
    struct { unsigned int min, max, bits; } ires[9];
    unsigned int rmask;
    unsigned int cmask;
    unsigned int info;
};

_Static_assert(offsetof(struct calsa_kernel_hw_params_head, info) == 520, "the kernel's hw_params layout");

#define CALSA_SNDRV_PCM_INFO_SYNC_APPLPTR 0x00000020u

int calsa_hw_params_is_indirect(const snd_pcm_hw_params_t *params) {
    if (snd_pcm_hw_params_sizeof() < sizeof(struct calsa_kernel_hw_params_head)) return 0;
    return (((const struct calsa_kernel_hw_params_head *)(const void *)params)->info & CALSA_SNDRV_PCM_INFO_SYNC_APPLPTR) != 0;
}
