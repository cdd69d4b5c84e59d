#include "CALSA.h"

#include <stdarg.h>

// alsa-lib's default handler prints every internal failure (an underrun, a lost server) to
// stderr; a daemon that recovers from those on purpose must not spray them into its journal.
static void calsa_quiet_error_handler(const char *file, int line, const char *function, int err,
                                      const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

void calsa_silence_library_errors(void) {
    snd_lib_error_set_handler(calsa_quiet_error_handler);
}
