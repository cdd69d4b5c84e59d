// CKeepalivedPCM: alsa-lib's external PCM plug-in `keepalived`, built as
// libasound_module_pcm_keepalived.so (scripts/build-alsa-plugin, packaging/alsa/50-keepalived.conf).
//
// A music player opens `keepalived:CARD=Intel,DEV=0` (or `keepalived:0,0`) where it would open
// `hw:…`. For a playback stream the plug-in first asks keepalived, on its control socket(s), to
// release that card's device, waits at most 200 ms for the answers (longer only when keepalived
// says it is switching the amplifier on first: --power-on-wait), and then opens
// `hw:CARD=<index>,DEV=<d>,SUBDEV=<s>` for the player with the player's own mode: the player
// then has the hardware itself, with nothing in between. A capture stream only opens the hardware.
//
// What this header declares are the plug-in's pure pieces (no I/O), so that the tests call the
// very code the plug-in runs. The plug-in's entry point, _snd_pcm_keepalived_open, is alsa-lib's
// (SND_PCM_PLUGIN_DEFINE_FUNC) and not declared here.
#ifndef CKEEPALIVED_PCM_H
#define CKEEPALIVED_PCM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// How many bytes of the program's name a request carries (whole UTF-8 characters only).
#define CKEEPALIVED_PCM_PROGRAM_MAX 64

/// Room for any request line ckeepalived_pcm_request_line writes, its NUL included: the name's
/// 64 bytes escaped (at most 6 bytes each) and the rest of the line.
#define CKEEPALIVED_PCM_REQUEST_MAX 512

/// Room for any name ckeepalived_pcm_hw_name writes, its NUL included.
#define CKEEPALIVED_PCM_HW_NAME_MAX 64

/// Writes the release request, one JSON line ending in '\n' and NUL-terminated, into `buffer`:
///
///     {"request":"release","card":0,"device":0,"program":"mpd"}
///
/// `program` (NULL is taken as "") is cut to its first CKEEPALIVED_PCM_PROGRAM_MAX bytes,
/// never inside a UTF-8 character; a byte that is not part of valid UTF-8 becomes '?', and
/// '"', '\\' and control characters are escaped, so the line is always valid JSON. Returns the
/// line's length without the NUL, or -1 when `size` is too small (CKEEPALIVED_PCM_REQUEST_MAX
/// always suffices); then `buffer` holds "" if `size` > 0.
int ckeepalived_pcm_request_line(char *buffer, size_t size, int card, int device, const char *program);

/// Writes `hw:CARD=<card>,DEV=<device>,SUBDEV=<subdevice>` into `buffer`. Returns its length, or
/// -1 when `size` is too small (CKEEPALIVED_PCM_HW_NAME_MAX always suffices); then `buffer` holds
/// "" if `size` > 0.
int ckeepalived_pcm_hw_name(char *buffer, size_t size, int card, int device, int subdevice);

/// How long an open waits for keepalived's answers by default, in milliseconds.
#define CKEEPALIVED_PCM_RELEASE_TIMEOUT_DEFAULT_MS 200
/// The longest wait KEEPALIVED_RELEASE_TIMEOUT may ask for: a player's open blocks that long.
#define CKEEPALIVED_PCM_RELEASE_TIMEOUT_MAX_MS 10000

/// The wait `text` (KEEPALIVED_RELEASE_TIMEOUT's value: whole milliseconds, 0 to
/// CKEEPALIVED_PCM_RELEASE_TIMEOUT_MAX_MS) asks for; the default for NULL or "", and -1 for
/// anything else (the caller says so and waits the default).
int ckeepalived_pcm_release_timeout_ms(const char *text);

/// The longest a `wait` line (below) may extend the open's wait: keepalived's --power-on-wait
/// is at most 30 s, and it announces the time left plus a margin (250 ms), so the plug-in's
/// bound lies a second beyond the daemon's: a player must never give up on a hold and open the
/// device while keepalived still has it (KeepAliveDaemonTests checks the two bounds together).
#define CKEEPALIVED_PCM_POWER_WAIT_MAX_MS 31000

/// Reads one reply line of keepalived's (`length` bytes, a trailing newline allowed):
/// `{"ok":true,…}` or `{"ok":false,"error":"…",…}`. Returns 1 for ok, 0 for not ok, with the
/// error's text (unescaped, control characters as spaces, cut to whole UTF-8 characters) in
/// `error` (NUL-terminated; "" when the reply has none; `error` may be NULL), and -1 when the
/// line is not a JSON object with a boolean "ok".
///
/// Returns 2 for an interim line, `{"ok":true,"wait":N}`: keepalived released the device and
/// holds the open N ms more while the amplifier is switched on (--power-on-wait); its final
/// reply follows on the same connection. `wait_ms` (may be NULL) gets N, at most
/// CKEEPALIVED_PCM_POWER_WAIT_MAX_MS; a "wait" that is not a whole number makes the line -1.
int ckeepalived_pcm_parse_reply(const char *reply, size_t length, char *error, size_t error_size, int *wait_ms);

#ifdef __cplusplus
}
#endif

#endif
