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
// A device whose hardware takes no linear format but IEC958 subframes (a Raspberry Pi's HDMI,
// vc4-hdmi: the card frames nothing itself, alsa-lib's `hdmi:` does it in software) would refuse
// every player's S16/S24/S32. For such a device the player gets alsa-lib's own `iec958` PCM
// over that same hw handle: its samples go unchanged into the subframes' 24-bit field, at its
// own rate, with the channel status vc4-hdmi.conf sets. (alsa-lib's plug converts to IEC958
// only from 1.2.12 on: `keepalived-plug:` alone did not play there on Debian 12.)
//
// Before the release, a playback open of a card the player named (no `slave`) asks keepalived
// to *carry* the player (issue 60): where keepalived grants it, the player gets an ioplug PCM whose
// frames go into memory shared with keepalived (CKeepalivedCarry.h), and keepalived plays them on
// the stream it never stops; the device is not released. Without a grant (an old keepalived, a
// refusal, silence within the release's timeout, no daemon) the open goes on as described here;
// `{"busy":true}` (keepalived carries another player there) fails it with -EBUSY, as a second open
// of the hw device would.
//
// With a `slave` (a PCM's name) the player is carried through the slave's own chain where that
// chain ends on the device's hw PCM through layers that each hand their frames to one slave in
// the player's process (ckeepalived_pcm_carried_chain_text): its audio goes exactly as before,
// and a program that only probes the PCM takes nothing from keepalived. Otherwise the player
// gets that PCM after the release instead of the device's hw: pcm.keepalived-default names the
// card's own default chain, so that a box's `default` can go through keepalived
// (60-keepalived-default.conf) without changing how the player's audio is played. A slave that
// leads back to a keepalived PCM being opened (a `default` whose slave is `default`) fails the
// open with -ELOOP, the loop named, and asks for the release once at most.
//
// keepalived's own open of such a PCM (its output on a box's `default` through the front door)
// asks nothing: its process says it is the daemon (KEEPALIVED_DAEMON_PID, its own pid, set by
// `keepalived run`), and it gets the device's hw PCM where a player's chain would be carried,
// the slave otherwise. A round trip to its own control socket, bounded as a player's is, fell
// back to the slave's chain when the answer came late or before the socket listened (a loaded
// machine, the daemon's first open), and keepalived then played where it can carry no player.
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

/// Room for any request line ckeepalived_pcm_request_line(_for) writes, its NUL included: the name's
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

/// The longest request name ckeepalived_pcm_request_line_for takes.
#define CKEEPALIVED_PCM_REQUEST_NAME_MAX 32

/// The same line for any request that names a card's device (`release`, `carry`):
///
///     {"request":"carry","card":0,"device":0,"program":"aplay"}
///
/// `request` is 1 to CKEEPALIVED_PCM_REQUEST_NAME_MAX bytes of ASCII letters, digits, '_' and
/// '-' (written as it is); anything else (NULL included) gives -1 and "". `program` as above.
int ckeepalived_pcm_request_line_for(char *buffer, size_t size, const char *request, int card, int device, const char *program);

/// Writes `hw:CARD=<card>,DEV=<device>,SUBDEV=<subdevice>` into `buffer`. Returns its length, or
/// -1 when `size` is too small (CKEEPALIVED_PCM_HW_NAME_MAX always suffices); then `buffer` holds
/// "" if `size` > 0.
int ckeepalived_pcm_hw_name(char *buffer, size_t size, int card, int device, int subdevice);

/// What the player is handed over a hw PCM, from the formats its hardware takes.
enum ckeepalived_pcm_framing {
    /// The hw PCM itself: it takes a linear format (or nothing keepalived could frame for it).
    CKEEPALIVED_PCM_FRAMING_NONE = 0,
    /// alsa-lib's iec958 PCM over it, framing into IEC958_SUBFRAME_LE.
    CKEEPALIVED_PCM_FRAMING_IEC958_LE = 1,
    /// The same into IEC958_SUBFRAME_BE (no known card; the one other subframe order ALSA has).
    CKEEPALIVED_PCM_FRAMING_IEC958_BE = 2,
};

/// How to hand over a hw PCM whose hardware takes the formats in `formats`: bit N set when it
/// takes snd_pcm_format_t N (snd_pcm_format_mask_test over SND_PCM_FORMAT_S8..63). Framing only
/// when no linear integer format is there, so that every card that plays PCM as it is keeps
/// getting the player's samples untouched.
enum ckeepalived_pcm_framing ckeepalived_pcm_framing_for(unsigned long long formats);

/// Bytes of IEC958 channel status ckeepalived_pcm_iec958_status writes (one 192-frame block).
#define CKEEPALIVED_PCM_IEC958_STATUS_BYTES 24

/// Writes the channel status the framing starts from into `status` (24 bytes): consumer, PCM
/// audio, not copyrighted, no emphasis (0x04), original, PCM coder (0x82), source and channel
/// unspecified (0x00), sample rate not indicated (0x01): alsa-lib's iec958 PCM puts the
/// negotiated rate (and the word length) there at hw_params, as for vc4-hdmi.conf's `hdmi:`.
void ckeepalived_pcm_iec958_status(unsigned char status[CKEEPALIVED_PCM_IEC958_STATUS_BYTES]);

/// The preambles the framing marks subframes with, in the order snd_pcm_iec958_open takes them:
/// Z (the first subframe of a block), X (any other first subframe), Y (the second): 0x08, 0x02,
/// 0x04, as vc4-hdmi's driver reads them (alsa-lib's defaults).
void ckeepalived_pcm_iec958_preambles(unsigned char preambles[3]);

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

// MARK: - Carrying (issue 60: a player carried on keepalived's running stream)
//
// For a playback stream of a card the player named (no `slave`), the plug-in first asks keepalived
// to *carry* the player: to take the player's frames into the stream it keeps running on the card,
// instead of releasing the card. On a grant the player gets an ioplug PCM whose frames go through
// memory shared with keepalived (CKeepalivedCarry.h); without one, the release and the hw open
// go on as above.

/// The most rates a grant may list.
#define CKEEPALIVED_PCM_GRANT_RATES_MAX 32
/// The highest rate a grant may list (8 × 192 kHz, what DSD512 over DoP would need).
#define CKEEPALIVED_PCM_GRANT_RATE_MAX 1536000u
/// The most channels a grant may allow (alsa-lib's own bound on a PCM's channels is higher, but
/// no card keepalived carries has more).
#define CKEEPALIVED_PCM_GRANT_CHANNELS_MAX 256u
/// The bounds of a grant's maxBufferBytes: two periods of 64 bytes at least, and a buffer that
/// a player could not mean (or that would have the player map more than that) at most.
#define CKEEPALIVED_PCM_GRANT_BUFFER_MIN 128u
#define CKEEPALIVED_PCM_GRANT_BUFFER_MAX 67108864u  // 64 MiB

/// What keepalived can carry of the device, from its grant.
struct ckeepalived_pcm_grant {
    /// Bit N set when it takes snd_pcm_format_t N.
    unsigned long long formats;
    /// The rates it takes, in the grant's order (rate_count of them, at least one).
    unsigned int rates[CKEEPALIVED_PCM_GRANT_RATES_MAX];
    unsigned int rate_count;
    unsigned int channels_min;
    unsigned int channels_max;
    /// The most the player's buffer may hold, in bytes.
    unsigned int max_buffer_bytes;
};

/// Reads keepalived's answer to a carry request (`length` bytes, a trailing newline allowed).
/// Returns 1 for a grant, `{"ok":true,"carry":true,"formats":[…],"rates":[…],"channels":[min,max],
/// "maxBufferBytes":N}`, with `grant` filled in; 2 for `{"ok":false,"busy":true,…}` (keepalived
/// carries another player on the device already); 0 for any other answer with a boolean "ok"
/// (a refusal, an old keepalived's "unknown request", an ok without "carry":true); -1 when the
/// line is not a JSON object with a boolean "ok", or a grant lacks one of its four fields, or
/// any of them is out of range: a format outside 0..63, an empty list or more than
/// CKEEPALIVED_PCM_GRANT_RATES_MAX rates, a rate outside 1..CKEEPALIVED_PCM_GRANT_RATE_MAX,
/// channels that are not [min, max] with 1 <= min <= max <= CKEEPALIVED_PCM_GRANT_CHANNELS_MAX,
/// maxBufferBytes outside CKEEPALIVED_PCM_GRANT_BUFFER_MIN..CKEEPALIVED_PCM_GRANT_BUFFER_MAX.
/// Fields it does not know are skipped. `grant` is zeroed first unless NULL.
int ckeepalived_pcm_parse_grant(const char *line, size_t length, struct ckeepalived_pcm_grant *grant);

/// Under a `slave`, the player is carried where the slave's chain can be: the slave's definition
/// (alsa-lib's own lookup, aliases, `pcm_slave` names and asym's playback followed) passes its
/// frames through layers that each hand them to one slave in the player's own process (plug,
/// softvol, iec958, hooks, route, linear, lfloat, rate, copy, empty, mmap_emul) down to the hw
/// PCM of the card's device, which asks for nothing else (no format, rate or channels of its
/// own). That hw PCM is replaced by `{ type keepalived card "N" device D carried_below true }`,
/// the carried stream without the plug-in's own framing (the chain frames); a hooks layer on the
/// way loses its hooks (they act on the card at the player's hw_params, which the card's stream,
/// keepalived's, never sees, and find no card under the carried PCM). dmix and the like,
/// multi, file and external plug-ins are not carried: the release follows, as before.
///
/// Loads `config` (alsa-lib's configuration syntax) as the whole configuration, and writes the
/// chain `slave` names, rewritten so, into `out` as alsa-lib saves a configuration. Returns 1
/// when it was rewritten, 0 when that chain cannot be carried (`out` untouched), a negative
/// errno on an error (-ENOSPC: `out` too small; alsa-lib's own for a configuration it cannot
/// read or a `slave` it does not define). Card ids in `config` are looked up on this machine.
int ckeepalived_pcm_carried_chain_text(const char *config, const char *slave, int card, int device, char *out, size_t out_size);

/// Whether `text` (KEEPALIVED_DAEMON_PID's value, or NULL) names the process `pid`: keepalived's
/// daemon marks its own process so, and its children (hooks, a chime's player), which inherit
/// the variable, are players with pids of their own. Only decimal digits, no sign or space.
int ckeepalived_pcm_is_daemon(const char *text, long pid);

/// Room for any line ckeepalived_pcm_format_line writes, its NUL included.
#define CKEEPALIVED_PCM_FORMAT_LINE_MAX 160

/// Writes the format request the carried PCM sends at each hw_params, NUL-terminated:
///
///     {"request":"format","format":2,"rate":48000,"channels":2,"bufferFrames":24000,"periodFrames":6000}
///
/// Returns its length, or -1 (and "" if `size` > 0) when `size` is too small.
int ckeepalived_pcm_format_line(char *buffer, size_t size, int format, unsigned int rate, unsigned int channels,
                                unsigned long buffer_frames, unsigned long period_frames);

/// Whether a playback stream may start with `queued` frames in its buffer, as the kernel decides
/// at `snd_pcm_start` (snd_pcm_playback_data): yes with anything queued, and with nothing queued
/// only when it never stops on an underrun (`stop_threshold` >= `boundary`). Otherwise the start
/// fails with -EPIPE and the stream stays prepared. 1 or 0.
int ckeepalived_pcm_start_allowed(unsigned long long queued, unsigned long stop_threshold, unsigned long boundary);

/// How long a carried PCM's position, estimated at one read, answers the reads that follow.
#define CKEEPALIVED_PCM_POSITION_HOLD_NS 100000
/// Whether the position estimated at `estimated_ns` (CLOCK_MONOTONIC; 0: none yet) answers a read
/// at `now_ns` too: alsa-lib's htimestamp for a plug-in reads the position until two reads
/// agree, and a position estimated anew at each read moves between two of them whenever a read
/// takes longer than a frame (5.2 us at 192 kHz: on a slow or emulated CPU it read for ever).
/// Held 100 us, the answer is that much old at most. 1 or 0.
int ckeepalived_pcm_position_holds(long long estimated_ns, long long now_ns);

#ifdef __cplusplus
}
#endif

#endif
