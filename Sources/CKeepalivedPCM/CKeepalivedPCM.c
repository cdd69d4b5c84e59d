// The `keepalived` PCM type: ask keepalived to carry the player on the stream it keeps running on
// the card (an ioplug PCM over memory shared with keepalived), or else to release the card's
// device, then open that device's hw PCM for the player (framed into IEC958 subframes when that
// is all the hardware takes). See CKeepalivedPCM.h.
#define _GNU_SOURCE
// alsa-lib's headers declare a plug-in's versioned entry symbol for a shared object only when PIC
// is defined (libtool's -DPIC); without it they expect alsa-lib's static build, and the object
// would need a symbol libasound.so does not have. This file is only ever a plug-in or a test's.
#ifndef PIC
#define PIC 1
#endif
#include "CKeepalivedPCM.h"
#include "CKeepalivedCarry.h"

#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

// MARK: - Writing into a fixed buffer

/// Appends to `buffer`, always leaving room for a NUL. Once something does not fit, nothing more
/// is appended: each append is all or nothing, so text is never cut inside a character.
typedef struct writer {
    char *buffer;
    size_t size;
    size_t used;
    bool overflow;
} writer;

static void put(writer *w, const void *bytes, size_t count) {
    if (w->overflow || count >= w->size - w->used) {
        w->overflow = true;
        return;
    }
    memcpy(w->buffer + w->used, bytes, count);
    w->used += count;
}

/// NUL-terminates what was written and returns its length, or "" and -1 if anything overflowed.
static int finish(writer *w) {
    if (w->overflow || w->used > INT_MAX) {
        if (w->size > 0) w->buffer[0] = '\0';
        return -1;
    }
    w->buffer[w->used] = '\0';
    return (int)w->used;
}

/// The length of the valid UTF-8 character at `s` (of `available` bytes), or 0 when the bytes
/// there are not one (a stray continuation byte, an overlong form, a surrogate, a cut sequence).
static size_t utf8_length(const unsigned char *s, size_t available) {
    unsigned char lead = s[0], low = 0x80, high = 0xBF;
    size_t length;
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) length = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else return 0;
    if (available < length || s[1] < low || s[1] > high) return 0;
    for (size_t i = 2; i < length; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return length;
}

/// Appends `code` (a Unicode scalar value) as UTF-8.
static void put_code_point(writer *w, uint32_t code) {
    unsigned char bytes[4];
    size_t count;
    if (code < 0x80) {
        bytes[0] = (unsigned char)code;
        count = 1;
    } else if (code < 0x800) {
        bytes[0] = (unsigned char)(0xC0 | code >> 6);
        bytes[1] = (unsigned char)(0x80 | (code & 0x3F));
        count = 2;
    } else if (code < 0x10000) {
        bytes[0] = (unsigned char)(0xE0 | code >> 12);
        bytes[1] = (unsigned char)(0x80 | (code >> 6 & 0x3F));
        bytes[2] = (unsigned char)(0x80 | (code & 0x3F));
        count = 3;
    } else {
        bytes[0] = (unsigned char)(0xF0 | code >> 18);
        bytes[1] = (unsigned char)(0x80 | (code >> 12 & 0x3F));
        bytes[2] = (unsigned char)(0x80 | (code >> 6 & 0x3F));
        bytes[3] = (unsigned char)(0x80 | (code & 0x3F));
        count = 4;
    }
    put(w, bytes, count);
}

// MARK: - The request and the hw name

int ckeepalived_pcm_request_line(char *buffer, size_t size, int card, int device, const char *program) {
    return ckeepalived_pcm_request_line_for(buffer, size, "release", card, device, program);
}

int ckeepalived_pcm_request_line_for(char *buffer, size_t size, const char *request, int card, int device, const char *program) {
    writer w = {buffer, size, 0, false};
    // The request's name is the plug-in's own constant, never escaped: one that would need it is
    // a mistake, refused rather than sent.
    size_t request_length = request ? strlen(request) : 0;
    bool plain = request_length > 0 && request_length <= CKEEPALIVED_PCM_REQUEST_NAME_MAX;
    for (size_t i = 0; plain && i < request_length; i++) {
        char ch = request[i];
        plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    }
    if (!plain) {
        w.overflow = true;
        return finish(&w);
    }
    char head[128];
    int length = snprintf(head, sizeof head, "{\"request\":\"%s\",\"card\":%d,\"device\":%d,\"program\":\"",
                          request, card, device);
    put(&w, head, (size_t)length);

    const unsigned char *name = (const unsigned char *)(program ? program : "");
    size_t total = strlen((const char *)name), taken = 0;
    while (taken < total) {
        size_t character = utf8_length(name + taken, total - taken);
        size_t consumed = character ? character : 1;
        if (taken + consumed > CKEEPALIVED_PCM_PROGRAM_MAX) break;
        unsigned char byte = name[taken];
        if (character == 0) {
            put(&w, "?", 1);
        } else if (character > 1) {
            put(&w, name + taken, character);
        } else if (byte == '"' || byte == '\\') {
            char escaped[2] = {'\\', (char)byte};
            put(&w, escaped, 2);
        } else if (byte < 0x20) {
            char escaped[7];
            snprintf(escaped, sizeof escaped, "\\u%04x", byte);
            put(&w, escaped, 6);
        } else {
            put(&w, &byte, 1);
        }
        taken += consumed;
    }
    put(&w, "\"}\n", 3);
    return finish(&w);
}

int ckeepalived_pcm_hw_name(char *buffer, size_t size, int card, int device, int subdevice) {
    int length = snprintf(buffer, size, "hw:CARD=%d,DEV=%d,SUBDEV=%d", card, device, subdevice);
    if (length < 0 || (size_t)length >= size) {
        if (size > 0) buffer[0] = '\0';
        return -1;
    }
    return length;
}

// MARK: - IEC958 framing

// alsa-lib has exported snd_pcm_iec958_open (version ALSA_0.9) since 2004, but declares it in
// <alsa/pcm_plugin.h> only from 1.2.12 on; Debian 12's 1.2.8 does not. The same prototype again
// is a compatible redeclaration where the header has it.
int snd_pcm_iec958_open(snd_pcm_t **pcmp, const char *name, snd_pcm_format_t sformat, snd_pcm_t *slave, int close_slave,
                        const unsigned char *status_bits, const unsigned char *preamble_vals, int hdmi_mode);

enum ckeepalived_pcm_framing ckeepalived_pcm_framing_for(unsigned long long formats) {
    // Any linear format: the player's own samples go to the hardware as they are, as with hw:.
    // A float-only or DSD-only device is no case for IEC958 either: it is handed over as is.
    for (int format = 0; format <= SND_PCM_FORMAT_LAST && format < 64; format++)
        if ((formats >> format & 1) && snd_pcm_format_linear((snd_pcm_format_t)format) == 1) return CKEEPALIVED_PCM_FRAMING_NONE;
    if (formats >> SND_PCM_FORMAT_IEC958_SUBFRAME_LE & 1) return CKEEPALIVED_PCM_FRAMING_IEC958_LE;
    if (formats >> SND_PCM_FORMAT_IEC958_SUBFRAME_BE & 1) return CKEEPALIVED_PCM_FRAMING_IEC958_BE;
    return CKEEPALIVED_PCM_FRAMING_NONE;
}

void ckeepalived_pcm_iec958_status(unsigned char status[CKEEPALIVED_PCM_IEC958_STATUS_BYTES]) {
    // vc4-hdmi.conf's AES0..AES3 for its `default` and `hdmi:`; the rest of the block is zero, so
    // that alsa-lib also fills in the word length (AES4) from the player's format.
    memset(status, 0, CKEEPALIVED_PCM_IEC958_STATUS_BYTES);
    status[0] = IEC958_AES0_CON_NOT_COPYRIGHT | IEC958_AES0_CON_EMPHASIS_NONE;
    status[1] = IEC958_AES1_CON_ORIGINAL | IEC958_AES1_CON_PCM_CODER;
    status[2] = IEC958_AES2_CON_SOURCE_UNSPEC | IEC958_AES2_CON_CHANNEL_UNSPEC;
    status[3] = IEC958_AES3_CON_FS_NOTID;
}

void ckeepalived_pcm_iec958_preambles(unsigned char preambles[3]) {
    preambles[0] = 0x08;  // Z
    preambles[1] = 0x02;  // X
    preambles[2] = 0x04;  // Y
}

/// The formats `pcm`'s hardware takes, as ckeepalived_pcm_framing_for reads them; 0 when its
/// configuration space cannot be read (the handle is then handed over as it is, and the player
/// meets the device's own answer).
static unsigned long long hardware_formats(snd_pcm_t *pcm) {
    snd_pcm_hw_params_t *params;
    snd_pcm_format_mask_t *mask;
    snd_pcm_hw_params_alloca(&params);
    snd_pcm_format_mask_alloca(&mask);
    // Only refines a local copy of the space: the handle's state and setup are untouched.
    if (snd_pcm_hw_params_any(pcm, params) < 0) return 0;
    snd_pcm_hw_params_get_format_mask(params, mask);
    unsigned long long formats = 0;
    for (int format = 0; format <= SND_PCM_FORMAT_LAST && format < 64; format++)
        if (snd_pcm_format_mask_test(mask, (snd_pcm_format_t)format)) formats |= 1ULL << format;
    return formats;
}

/// Hands `pcm` to the player in `*pcmp`: as it is, or inside alsa-lib's iec958 PCM (which then
/// owns it) when `formats` (a mask of what it takes) are IEC958 subframes only. On failure
/// `pcm` is closed.
static int frame_for_player(snd_pcm_t **pcmp, const char *name, snd_pcm_t *pcm, unsigned long long formats, bool carried) {
    enum ckeepalived_pcm_framing framing = ckeepalived_pcm_framing_for(formats);
    if (framing == CKEEPALIVED_PCM_FRAMING_NONE) {
        *pcmp = pcm;
        return 0;
    }
    unsigned char status[CKEEPALIVED_PCM_IEC958_STATUS_BYTES], preambles[3];
    ckeepalived_pcm_iec958_status(status);
    // Carried, the player's blocks run on in keepalived's stream, whose signal says 24-bit words
    // (IEC958Framer): said so here too, the receiver sees one channel status across every
    // hand-off, not a word length that changes with each player's sample format.
    if (carried) status[4] = IEC958_AES4_CON_WORDLEN_24_20 | IEC958_AES4_CON_MAX_WORDLEN_24;
    ckeepalived_pcm_iec958_preambles(preambles);
    snd_pcm_format_t format = framing == CKEEPALIVED_PCM_FRAMING_IEC958_LE ? SND_PCM_FORMAT_IEC958_SUBFRAME_LE
                                                                           : SND_PCM_FORMAT_IEC958_SUBFRAME_BE;
    // hdmi_mode as vc4-hdmi.conf sets it: it only changes how 8-channel non-audio streams are
    // counted, which a player's PCM never is, but keeps the framing exactly `hdmi:`'s.
    int err = snd_pcm_iec958_open(pcmp, name, format, pcm, 1, status, preambles, 1);
    if (err < 0) {
        SNDERR("keepalived: cannot frame %s into IEC958 subframes: %s", name ? name : "the device", snd_strerror(err));
        snd_pcm_close(pcm);
    }
    return err;
}

/// Hands `hw` to the player (frame_for_player, from what its hardware takes).
static int hand_over(snd_pcm_t **pcmp, const char *name, snd_pcm_t *hw) {
    return frame_for_player(pcmp, name, hw, hardware_formats(hw), false);
}

// MARK: - Reading a reply

/// The unread part of a reply.
typedef struct cursor {
    const unsigned char *at;
    const unsigned char *end;
} cursor;

static void skip_space(cursor *c) {
    while (c->at < c->end && (*c->at == ' ' || *c->at == '\t' || *c->at == '\n' || *c->at == '\r')) c->at++;
}

/// Takes `ch` after any white space.
static bool take(cursor *c, char ch) {
    skip_space(c);
    if (c->at == c->end || *c->at != (unsigned char)ch) return false;
    c->at++;
    return true;
}

/// Takes `word` exactly where the cursor is.
static bool take_word(cursor *c, const char *word) {
    size_t length = strlen(word);
    if ((size_t)(c->end - c->at) < length || memcmp(c->at, word, length) != 0) return false;
    c->at += length;
    return true;
}

static bool take_hex4(cursor *c, uint32_t *value) {
    if (c->end - c->at < 4) return false;
    *value = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char digit = *c->at++;
        uint32_t nibble;
        if (digit >= '0' && digit <= '9') nibble = digit - '0';
        else if (digit >= 'a' && digit <= 'f') nibble = digit - 'a' + 10;
        else if (digit >= 'A' && digit <= 'F') nibble = digit - 'A' + 10;
        else return false;
        *value = *value << 4 | nibble;
    }
    return true;
}

/// Reads a JSON string (after any white space), its text decoded into `out`: control characters
/// become spaces, anything that is not a character '?'. False when it is not a string.
static bool read_string(cursor *c, writer *out) {
    if (!take(c, '"')) return false;
    while (c->at < c->end) {
        const unsigned char *start = c->at;
        unsigned char byte = *c->at++;
        if (byte == '"') return true;
        if (byte < 0x20) return false;
        if (byte != '\\') {
            size_t character = utf8_length(start, (size_t)(c->end - start));
            if (character == 0) {
                put(out, "?", 1);
            } else {
                put(out, start, character);
                c->at = start + character;
            }
            continue;
        }
        if (c->at == c->end) return false;
        uint32_t code = *c->at++;
        switch (code) {
        case '"': case '\\': case '/': break;
        case 'b': case 'f': case 'n': case 'r': case 't': code = ' '; break;
        case 'u':
            if (!take_hex4(c, &code)) return false;
            if (code >= 0xD800 && code <= 0xDBFF) {
                cursor after = *c;
                uint32_t low;
                if (take_word(&after, "\\u") && take_hex4(&after, &low) && low >= 0xDC00 && low <= 0xDFFF) {
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    *c = after;
                } else {
                    code = '?';
                }
            } else if (code >= 0xDC00 && code <= 0xDFFF) {
                code = '?';
            } else if (code < 0x20) {
                code = ' ';
            }
            break;
        default: return false;
        }
        put_code_point(out, code);
    }
    return false;
}

/// Skips one JSON value (after any white space), nested at most 32 deep.
static bool skip_value(cursor *c, int depth) {
    writer nowhere = {NULL, 0, 0, false};
    skip_space(c);
    if (c->at == c->end || depth > 32) return false;
    switch (*c->at) {
    case '"':
        return read_string(c, &nowhere);
    case '{':
        c->at++;
        if (take(c, '}')) return true;
        do {
            if (!read_string(c, &nowhere) || !take(c, ':') || !skip_value(c, depth + 1)) return false;
        } while (take(c, ','));
        return take(c, '}');
    case '[':
        c->at++;
        if (take(c, ']')) return true;
        do {
            if (!skip_value(c, depth + 1)) return false;
        } while (take(c, ','));
        return take(c, ']');
    default: {
        // A number or a literal: what is not structure.
        const unsigned char *start = c->at;
        while (c->at < c->end && ((*c->at >= '0' && *c->at <= '9') || (*c->at >= 'a' && *c->at <= 'z') ||
                                  *c->at == '-' || *c->at == '+' || *c->at == '.' || *c->at == 'E'))
            c->at++;
        return c->at > start;
    }
    }
}

/// Reads a whole number (after any white space) into `value`, capped at `cap`. False when it
/// is not one (a sign, a fraction or an exponent included).
static bool read_whole(cursor *c, long cap, long *value) {
    skip_space(c);
    const unsigned char *start = c->at;
    *value = 0;
    while (c->at < c->end && *c->at >= '0' && *c->at <= '9') {
        if (*value < cap) *value = *value * 10 + (*c->at - '0');
        c->at++;
    }
    if (*value > cap) *value = cap;
    if (c->at == start) return false;
    // What a number may go on with: not a whole one.
    return c->at == c->end || (*c->at != '.' && *c->at != 'e' && *c->at != 'E');
}

int ckeepalived_pcm_parse_reply(const char *reply, size_t length, char *error, size_t error_size, int *wait_ms) {
    cursor c = {(const unsigned char *)reply, (const unsigned char *)reply + length};
    writer message = {error, error ? error_size : 0, 0, false};
    int ok = -1;
    long wait = -1;
    if (!take(&c, '{')) goto invalid;
    if (!take(&c, '}')) {
        do {
            char name[8];
            writer key = {name, sizeof name, 0, false};
            if (!read_string(&c, &key) || !take(&c, ':')) goto invalid;
            name[key.used] = '\0';
            bool known = !key.overflow;
            skip_space(&c);
            if (known && strcmp(name, "ok") == 0) {
                if (take_word(&c, "true")) ok = 1;
                else if (take_word(&c, "false")) ok = 0;
                else goto invalid;
            } else if (known && strcmp(name, "wait") == 0) {
                if (!read_whole(&c, CKEEPALIVED_PCM_POWER_WAIT_MAX_MS, &wait)) goto invalid;
            } else if (known && strcmp(name, "error") == 0 && c.at < c.end && *c.at == '"') {
                message.used = 0;
                message.overflow = false;
                if (!read_string(&c, &message)) goto invalid;
            } else if (!skip_value(&c, 0)) {
                goto invalid;
            }
        } while (take(&c, ','));
        if (!take(&c, '}')) goto invalid;
    }
    skip_space(&c);
    if (c.at != c.end || ok < 0) goto invalid;
    if (message.size > 0) message.buffer[message.used] = '\0';
    if (ok == 1 && wait >= 0) {
        if (wait_ms) *wait_ms = (int)wait;
        return 2;
    }
    return ok;
invalid:
    if (error && error_size > 0) error[0] = '\0';
    return -1;
}

// MARK: - Reading a grant

/// Reads a JSON array of whole numbers, each at most `max` (and at least `min`), into `values`
/// (room for `capacity`); `*count` gets how many. False when it is not one, when a number is out
/// of range or when there are more than `capacity`.
static bool read_whole_list(cursor *c, long min, long max, unsigned int *values, unsigned int capacity, unsigned int *count) {
    *count = 0;
    if (!take(c, '[')) return false;
    if (take(c, ']')) return true;
    do {
        long value;
        // Capped one above the bound, so that a larger number is seen as one, not cut to the bound.
        if (!read_whole(c, max + 1, &value) || value < min || value > max || *count == capacity) return false;
        values[(*count)++] = (unsigned int)value;
    } while (take(c, ','));
    return take(c, ']');
}

int ckeepalived_pcm_parse_grant(const char *line, size_t length, struct ckeepalived_pcm_grant *grant) {
    struct ckeepalived_pcm_grant read = {0};
    cursor c = {(const unsigned char *)line, (const unsigned char *)line + length};
    int ok = -1, carry = 0, busy = 0;
    bool formats = false, rates = false, channels = false, buffer = false;
    if (grant) memset(grant, 0, sizeof *grant);
    if (!take(&c, '{')) return -1;
    if (!take(&c, '}')) {
        do {
            char name[16];
            writer key = {name, sizeof name, 0, false};
            if (!read_string(&c, &key) || !take(&c, ':')) return -1;
            name[key.used] = '\0';
            bool known = !key.overflow;
            skip_space(&c);
            int *flag = !known ? NULL : strcmp(name, "ok") == 0 ? &ok : strcmp(name, "carry") == 0 ? &carry
                                      : strcmp(name, "busy") == 0 ? &busy : NULL;
            if (flag) {
                if (take_word(&c, "true")) *flag = 1;
                else if (take_word(&c, "false")) *flag = 0;
                else return -1;
            } else if (known && strcmp(name, "formats") == 0) {
                // A mask's bits: snd_pcm_format_t values 0..63 (alsa-lib's last is far below).
                unsigned int values[64], count;
                if (!read_whole_list(&c, 0, 63, values, 64, &count) || count == 0) return -1;
                read.formats = 0;
                for (unsigned int i = 0; i < count; i++) read.formats |= 1ULL << values[i];
                formats = true;
            } else if (known && strcmp(name, "rates") == 0) {
                if (!read_whole_list(&c, 1, CKEEPALIVED_PCM_GRANT_RATE_MAX, read.rates, CKEEPALIVED_PCM_GRANT_RATES_MAX,
                                     &read.rate_count) ||
                    read.rate_count == 0)
                    return -1;
                rates = true;
            } else if (known && strcmp(name, "channels") == 0) {
                unsigned int values[2], count;
                if (!read_whole_list(&c, 1, CKEEPALIVED_PCM_GRANT_CHANNELS_MAX, values, 2, &count) || count != 2 ||
                    values[0] > values[1])
                    return -1;
                read.channels_min = values[0];
                read.channels_max = values[1];
                channels = true;
            } else if (known && strcmp(name, "maxBufferBytes") == 0) {
                long value;
                if (!read_whole(&c, (long)CKEEPALIVED_PCM_GRANT_BUFFER_MAX + 1, &value) || value < CKEEPALIVED_PCM_GRANT_BUFFER_MIN ||
                    value > (long)CKEEPALIVED_PCM_GRANT_BUFFER_MAX)
                    return -1;
                read.max_buffer_bytes = (unsigned int)value;
                buffer = true;
            } else if (!skip_value(&c, 0)) {
                return -1;
            }
        } while (take(&c, ','));
        if (!take(&c, '}')) return -1;
    }
    skip_space(&c);
    if (c.at != c.end || ok < 0) return -1;
    if (ok == 0) return busy == 1 ? 2 : 0;
    if (carry != 1) return 0;
    // A grant that does not say what it can carry cannot be set up: it is no grant.
    if (!formats || !rates || !channels || !buffer) return -1;
    if (grant) *grant = read;
    return 1;
}

int ckeepalived_pcm_format_line(char *buffer, size_t size, int format, unsigned int rate, unsigned int channels,
                                unsigned long buffer_frames, unsigned long period_frames) {
    int length = snprintf(buffer, size,
                          "{\"request\":\"format\",\"format\":%d,\"rate\":%u,\"channels\":%u,\"bufferFrames\":%lu,\"periodFrames\":%lu}\n",
                          format, rate, channels, buffer_frames, period_frames);
    if (length < 0 || (size_t)length >= size) {
        if (size > 0) buffer[0] = '\0';
        return -1;
    }
    return length;
}

// MARK: - Asking keepalived

int ckeepalived_pcm_start_allowed(unsigned long long queued, unsigned long stop_threshold, unsigned long boundary) {
    return queued > 0 || stop_threshold >= boundary;
}

int ckeepalived_pcm_position_holds(long long estimated_ns, long long now_ns) {
    return estimated_ns > 0 && now_ns >= estimated_ns && now_ns - estimated_ns < CKEEPALIVED_PCM_POSITION_HOLD_NS;
}

int ckeepalived_pcm_release_timeout_ms(const char *text) {
    if (text == NULL || *text == '\0') return CKEEPALIVED_PCM_RELEASE_TIMEOUT_DEFAULT_MS;
    long value = 0;
    for (const char *c = text; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        value = value * 10 + (*c - '0');
        if (value > CKEEPALIVED_PCM_RELEASE_TIMEOUT_MAX_MS) return -1;
    }
    return (int)value;
}

int ckeepalived_pcm_is_daemon(const char *text, long pid) {
    if (text == NULL || *text == '\0' || pid <= 0) return 0;
    long value = 0;
    for (const char *c = text; *c; c++) {
        if (*c < '0' || *c > '9' || value > (LONG_MAX - 9) / 10) return 0;
        value = value * 10 + (*c - '0');
    }
    return value == pid;
}

/// The system service's socket; the user's daemon's is $XDG_RUNTIME_DIR/keepalived/control.sock.
#define SYSTEM_SOCKET "/run/keepalived-audio/control.sock"
#define REPLY_MAX 2048

#define SOCKET_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

/// One control socket asked to release the device.
typedef struct connection {
    char path[SOCKET_PATH_MAX];
    int fd;
    /// connect() is still under way (a non-blocking connect may finish later).
    bool connecting;
    /// Bytes of the request sent so far.
    size_t sent;
    size_t received;
    char reply[REPLY_MAX];
} connection;

static int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/// Whether a failure to connect means only that no keepalived listens there: the normal case,
/// which costs no message.
static bool nobody_there(int code) {
    return code == ENOENT || code == ECONNREFUSED || code == ENOTDIR;
}

/// Starts a non-blocking connection to `c->path`. False when there is nobody to ask.
static bool start_connection(connection *c) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    memcpy(address.sun_path, c->path, sizeof address.sun_path);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        SNDERR("keepalived: cannot create a socket: %s", strerror(errno));
        return false;
    }
    if (connect(c->fd, (struct sockaddr *)&address, sizeof address) == 0) return true;
    int code = errno;
    if (code == EINPROGRESS || code == EINTR) {
        // Under way: poll reports POLLOUT when it is done, SO_ERROR how.
        c->connecting = true;
        return true;
    }
    close(c->fd);
    c->fd = -1;
    if (!nobody_there(code)) SNDERR("cannot reach keepalived at %s: %s", c->path, strerror(code));
    return false;
}

/// Sends what is left of the request (after the connection, if it was under way, is done).
/// False when the connection is over (reported).
static bool send_request(connection *c, const char *line, size_t length) {
    if (c->connecting) {
        int code = 0;
        socklen_t size = sizeof code;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &code, &size) != 0) code = errno;
        if (code != 0) {
            if (!nobody_there(code)) SNDERR("cannot reach keepalived at %s: %s", c->path, strerror(code));
            return false;
        }
        c->connecting = false;
    }
    while (c->sent < length) {
        ssize_t count = send(c->fd, line + c->sent, length - c->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (count >= 0) {
            c->sent += (size_t)count;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return true;
        } else if (errno == EPIPE || errno == ECONNRESET) {
            // keepalived closed the connection: a refusal's reply may be waiting to be read.
            c->sent = length;
        } else {
            SNDERR("cannot send to keepalived at %s: %s", c->path, strerror(errno));
            return false;
        }
    }
    return true;
}

/// Reads one reply line: false when it is the final one (reported), true when keepalived holds
/// the open a while more, and `*deadline` (CLOCK_MONOTONIC ns) is moved to the end of that wait.
static bool read_reply_line(const connection *c, size_t length, int64_t *deadline) {
    char error[256];
    int wait_ms = 0;
    switch (ckeepalived_pcm_parse_reply(c->reply, length, error, sizeof error, &wait_ms)) {
    case 2: {
        int64_t until = monotonic_ns() + (int64_t)wait_ms * 1000000;
        if (until > *deadline) *deadline = until;
        return true;
    }
    case 1: break;
    case 0: SNDERR("keepalived did not release the device: %s", error[0] ? error : "no reason given"); break;
    default: SNDERR("keepalived at %s sent a reply that is not one", c->path); break;
    }
    return false;
}

/// Reads what has arrived of the reply. True when the connection is done with (answered,
/// closed or failed; reported). An interim line (keepalived switches the power on first) moves
/// `*deadline` and the reading goes on.
static bool receive_reply(connection *c, int64_t *deadline) {
    for (;;) {
        if (c->received == sizeof c->reply) {
            SNDERR("keepalived at %s sent a reply longer than %d bytes", c->path, REPLY_MAX);
            return true;
        }
        ssize_t count = recv(c->fd, c->reply + c->received, sizeof c->reply - c->received, MSG_DONTWAIT);
        if (count < 0 && errno == EINTR) continue;
        if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
        if (count < 0) {
            SNDERR("cannot read keepalived's reply at %s: %s", c->path, strerror(errno));
            return true;
        }
        if (count == 0) {
            SNDERR("keepalived at %s closed the connection without answering", c->path);
            return true;
        }
        size_t searched = c->received;
        c->received += (size_t)count;
        char *newline;
        while ((newline = memchr(c->reply + searched, '\n', c->received - searched))) {
            size_t line = (size_t)(newline - c->reply) + 1;
            if (!read_reply_line(c, line, deadline)) return true;
            memmove(c->reply, c->reply + line, c->received - line);
            c->received -= line;
            searched = 0;
        }
    }
}

/// Adds the socket at `directory` + `file` to those asked. False if its path is too long (reported).
static bool add_socket(connection *connections, size_t *count, const char *directory, const char *file) {
    connection *c = &connections[*count];
    int length = snprintf(c->path, sizeof c->path, "%s%s", directory, file);
    if (length < 0 || (size_t)length >= sizeof c->path) {
        SNDERR("keepalived: control socket path too long: %s%s", directory, file);
        return false;
    }
    c->fd = -1;
    c->connecting = false;
    c->sent = 0;
    c->received = 0;
    (*count)++;
    return true;
}

/// The keepalived control sockets a player asks, in order: the one at $KEEPALIVED_SOCKET, else
/// the system service's and the user's. Returns how many of `connections` (room for 2) it set.
static size_t add_sockets(connection connections[2]) {
    size_t count = 0;
    const char *chosen = secure_getenv("KEEPALIVED_SOCKET");
    if (chosen && *chosen) {
        add_socket(connections, &count, chosen, "");
    } else {
        add_socket(connections, &count, SYSTEM_SOCKET, "");
        const char *runtime = secure_getenv("XDG_RUNTIME_DIR");
        if (runtime && *runtime) add_socket(connections, &count, runtime, "/keepalived/control.sock");
    }
    return count;
}

/// Asks every keepalived listening (the one at $KEEPALIVED_SOCKET, else the system service's
/// and the user's) to release `card`'s `device`, and waits for their answers until `deadline`
/// (CLOCK_MONOTONIC ns; asked at `started`), or as long as a keepalived that switches the power
/// on first asks (`{"ok":true,"wait":N}`). Reports refusals and silence with SNDERR; fails nothing.
static void ask_release(int card, int device, int64_t started, int64_t deadline) {
    char line[CKEEPALIVED_PCM_REQUEST_MAX];
    int length = ckeepalived_pcm_request_line(line, sizeof line, card, device, program_invocation_short_name);
    if (length < 0) return;

    connection connections[2];
    size_t count = add_sockets(connections);
    for (size_t i = 0; i < count; i++) {
        connection *c = &connections[i];
        if (start_connection(c) && !c->connecting && !send_request(c, line, (size_t)length)) {
            close(c->fd);
            c->fd = -1;
        }
    }

    for (;;) {
        struct pollfd fds[2];
        connection *polled[2];
        nfds_t waiting = 0;
        for (size_t i = 0; i < count; i++) {
            if (connections[i].fd < 0) continue;
            bool sending = connections[i].connecting || connections[i].sent < (size_t)length;
            fds[waiting] = (struct pollfd){.fd = connections[i].fd, .events = sending ? POLLOUT : POLLIN};
            polled[waiting++] = &connections[i];
        }
        if (waiting == 0) break;
        int64_t left = deadline - monotonic_ns();
        if (left <= 0) {
            SNDERR("keepalived did not answer within %d ms", (int)((deadline - started + 999999) / 1000000));
            break;
        }
        int ready = poll(fds, waiting, (int)((left + 999999) / 1000000));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) {
            SNDERR("keepalived: poll failed: %s", strerror(errno));
            break;
        }
        for (nfds_t i = 0; i < waiting; i++) {
            connection *c = polled[i];
            if (fds[i].revents == 0) continue;
            bool done = fds[i].events == POLLOUT ? !send_request(c, line, (size_t)length) : receive_reply(c, &deadline);
            if (done) {
                close(c->fd);
                c->fd = -1;
            }
        }
    }
    for (size_t i = 0; i < count; i++)
        if (connections[i].fd >= 0) close(connections[i].fd);
}

// MARK: - Carrying

// When keepalived carries the player, the player's PCM is an ioplug of the plug-in's own: the
// player writes into ioplug's buffer (its own, or the caller's for writei), and each transfer
// copies the frames into the memory keepalived shares (CKeepalivedCarry.h), from which keepalived
// copies them into the stream it keeps running on the card. How far the card has played comes
// back through the same memory; the plug-in's pointer, delay and poll are made from it.

/// How long a hw_params waits for keepalived's answer: it may reopen its stream in the new
/// format first (its --lead-in then plays while the player's first frames wait in the memory).
#define FORMAT_TIMEOUT_MS 15000
/// Descriptors a reply may carry that are kept; any more are closed as they arrive.
#define REPLY_FDS_MAX 2

/// Waits until `fd` is ready for `events` or `deadline` (CLOCK_MONOTONIC ns) passes: 1 ready
/// (or hung up: the next call says how), 0 timed out, -errno.
static int wait_until(int fd, short events, int64_t deadline) {
    for (;;) {
        int64_t left = deadline - monotonic_ns();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int ready = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (ready > 0) return 1;
        if (ready < 0 && errno != EINTR) return -errno;
    }
}

/// Sends all of `line` on the connection by `deadline`. 0, or -ETIMEDOUT, -EPIPE, -errno.
static int send_all(int fd, const char *line, size_t length, int64_t deadline) {
    size_t sent = 0;
    while (sent < length) {
        ssize_t count = send(fd, line + sent, length - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (count >= 0) {
            sent += (size_t)count;
            continue;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
        int ready = wait_until(fd, POLLOUT, deadline);
        if (ready <= 0) return ready == 0 ? -ETIMEDOUT : ready;
    }
    return 0;
}

/// Keeps the descriptors of a message's SCM_RIGHTS in `fds` while there is room, and closes any
/// more: a reply carries two at most, and a descriptor kept open by mistake would stay open in
/// the player for as long as it runs.
static void keep_descriptors(struct msghdr *message, int *fds, size_t room, size_t *count) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(message); c; c = CMSG_NXTHDR(message, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
            if (*count < room) fds[(*count)++] = fd;
            else close(fd);
        }
    }
}

/// Reads one line from the connection, up to its '\n' and never beyond (what follows is
/// keepalived's next word, for poll to see), by `deadline`, with the descriptors that come with
/// it (see keep_descriptors; `room` may be 0). Returns the line's length, or -ETIMEDOUT,
/// -ECONNRESET (closed), -EMSGSIZE (longer than `size`), -errno.
static ssize_t receive_line(int fd, char *line, size_t size, int64_t deadline, int *fds, size_t room, size_t *count) {
    size_t used = 0;
    for (;;) {
        if (used == size) return -EMSGSIZE;
        // Looked at first, so that only the line is taken; a peek takes no descriptors.
        ssize_t peeked = recv(fd, line + used, size - used, MSG_PEEK | MSG_DONTWAIT);
        if (peeked == 0) return -ECONNRESET;
        if (peeked < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
            int ready = wait_until(fd, POLLIN, deadline);
            if (ready <= 0) return ready == 0 ? -ETIMEDOUT : ready;
            continue;
        }
        char *newline = memchr(line + used, '\n', (size_t)peeked);
        size_t wanted = newline ? (size_t)(newline - (line + used)) + 1 : (size_t)peeked;
        union {
            struct cmsghdr align;
            char bytes[CMSG_SPACE(sizeof(int) * REPLY_FDS_MAX * 2)];
        } control;
        struct iovec part = {.iov_base = line + used, .iov_len = wanted};
        struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control.bytes, .msg_controllen = sizeof control.bytes};
        ssize_t got = recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            return -errno;
        }
        // Descriptors that found no room in `control` the kernel has closed (MSG_CTRUNC).
        keep_descriptors(&message, fds, room, count);
        if (got == 0) return -ECONNRESET;
        used += (size_t)got;
        if (line[used - 1] == '\n') return (ssize_t)used;
    }
}

static void close_all(int *fds, size_t count) {
    for (size_t i = 0; i < count; i++) close(fds[i]);
}

/// Asks the keepalived at `path` to carry `line`'s device, by `deadline`. 1: granted, the
/// connection in `*fd` (it stays open while the player's PCM does) and what it can carry in
/// `grant`; 2: busy (reported); 0: not carried there (reported, unless nobody listens).
static int ask_carry_at(const char path[SOCKET_PATH_MAX], const char *line, size_t length, int64_t deadline, int *fd,
                        struct ckeepalived_pcm_grant *grant) {
    connection c;
    memset(&c, 0, sizeof c);
    memcpy(c.path, path, sizeof c.path);
    if (!start_connection(&c)) return 0;
    int result = 0;
    // As the release's sending, one connection at a time: wait while connecting or the socket is full.
    bool wait = c.connecting;
    while (c.connecting || c.sent < length) {
        if (wait) {
            int ready = wait_until(c.fd, POLLOUT, deadline);
            if (ready <= 0) {
                SNDERR("keepalived at %s did not take the carry request in time", c.path);
                goto done;
            }
        }
        if (!send_request(&c, line, length)) goto done;
        wait = true;
    }
    size_t unexpected = 0;
    int stray[1];
    ssize_t received = receive_line(c.fd, c.reply, sizeof c.reply, deadline, stray, 0, &unexpected);
    if (received < 0) {
        // An old keepalived answers every request; silence or a closed connection is a keepalived
        // that cannot carry now: the release below asks it (or the next one) again.
        if (received == -ETIMEDOUT) SNDERR("keepalived at %s did not answer the carry request in time", c.path);
        else if (received != -ECONNRESET) SNDERR("cannot read keepalived's answer at %s: %s", c.path, strerror((int)-received));
        goto done;
    }
    result = ckeepalived_pcm_parse_grant(c.reply, (size_t)received, grant);
    if (result == 1) {
        *fd = c.fd;
        return 1;
    }
    if (result == 2) {
        char error[256];
        ckeepalived_pcm_parse_reply(c.reply, (size_t)received, error, sizeof error, NULL);
        SNDERR("keepalived carries another player on the device: %s", error[0] ? error : "busy");
    } else if (result < 0) {
        SNDERR("keepalived at %s sent a carry answer that is not one", c.path);
        result = 0;
    }
    // A refusal (an old keepalived's "unknown request" too) costs no message: the release follows.
done:
    close(c.fd);
    return result;
}

/// Asks each keepalived listening, in the release's order, to carry `card`'s `device`, until one
/// grants or says it is busy; all within `deadline`. As ask_carry_at; the granting socket's path
/// in `path`.
static int ask_carry(int card, int device, int64_t deadline, int *fd, struct ckeepalived_pcm_grant *grant, char path[SOCKET_PATH_MAX]) {
    char line[CKEEPALIVED_PCM_REQUEST_MAX];
    int length = ckeepalived_pcm_request_line_for(line, sizeof line, "carry", card, device, program_invocation_short_name);
    if (length < 0) return 0;
    connection sockets[2];
    size_t count = add_sockets(sockets);
    for (size_t i = 0; i < count; i++) {
        int result = ask_carry_at(sockets[i].path, line, (size_t)length, deadline, fd, grant);
        if (result == 1) memcpy(path, sockets[i].path, SOCKET_PATH_MAX);
        if (result != 0) return result;
    }
    return 0;
}

/// The player's PCM while keepalived carries it.
typedef struct carrier {
    snd_pcm_ioplug_t io;
    /// The connection the grant came on: its end, on either side, ends the carrying.
    int socket;
    /// The plug-in's own, for poll: expired (readable) while the PCM is ready as the hardware's
    /// descriptor would be, else armed for when it should be (carrier_watch).
    int timer;
    /// keepalived's, from the last hw_params; -1 before.
    int event;
    ckeepalived_carry_shared *shared;
    size_t mapped;
    unsigned char *data;
    /// Copies of what the shared header said, checked once: keepalived could change the header
    /// under the player, and these say where the player writes.
    uint32_t buffer_frames, frame_bytes, rate;
    /// The player's counters, as last written to the shared memory.
    uint64_t written;
    uint32_t state, generation;
    /// keepalived's last position read whole.
    ckeepalived_carry_position position;
    /// The most this generation has been told it played: what it is told never goes back.
    uint64_t played;
    /// When `played` was estimated (CLOCK_MONOTONIC ns; 0: not in this generation).
    int64_t played_ns;
    /// The card device the player is carried on, and its watch (carrier_nudge): the position
    /// keepalived published last, when it was first seen, when the card was last asked.
    int card, device;
    ckeepalived_carry_position watched;
    int64_t watched_ns, nudged_ns;
    snd_pcm_uframes_t avail_min;
    /// The player's sw_params: a start with nothing queued fails as the kernel's does unless the
    /// stream never stops on an underrun.
    snd_pcm_uframes_t stop_threshold, boundary;
    /// The timer is set to expire at once (and stays readable: nobody reads it).
    bool ready;
    /// keepalived stopped carrying (it said so, or closed the connection).
    bool gone;
    struct ckeepalived_pcm_grant grant;
    char path[SOCKET_PATH_MAX];
} carrier;

/// Tells keepalived the player's counters, and wakes it.
static void publish(carrier *k) {
    if (!k->shared) return;
    ckeepalived_carry_player_write(k->shared, (ckeepalived_carry_player){k->written, k->state, k->generation});
    uint64_t one = 1;
    // The eventfd is non-blocking: a full counter (keepalived not reading) is no reason to wait.
    if (k->event >= 0 && write(k->event, &one, sizeof one) < 0 && errno != EAGAIN) {
        // Nothing to do: keepalived reads the counters at its own pace too.
    }
}

/// Whether keepalived carries the player no more. Once it has said so (ended, anything more on
/// the connection, the connection closed), it stays so.
static bool carrier_gone(carrier *k) {
    if (k->gone) return true;
    if (k->shared && ckeepalived_carry_ended(k->shared)) k->gone = true;
    // Between requests keepalived has nothing to say but why it stops (or it closed).
    struct pollfd p = {.fd = k->socket, .events = POLLIN};
    if (poll(&p, 1, 0) > 0) k->gone = true;
    if (!k->gone) return false;
    // Why, if keepalived said it: one line, read without waiting.
    char reason[REPLY_MAX], error[256] = "";
    ssize_t count = recv(k->socket, reason, sizeof reason - 1, MSG_DONTWAIT);
    if (count > 0) ckeepalived_pcm_parse_reply(reason, (size_t)count, error, sizeof error, NULL);
    SNDERR("keepalived at %s stopped carrying the player: %s", k->path, error[0] ? error : "no reason given");
    return true;
}

/// Frames the card has played of this generation's, now: keepalived's estimate, never more than
/// the player wrote, and never less than it said before. A position keepalived publishes later
/// may be a little behind the estimate from the one before (the card's position moves in steps,
/// its clock is not CLOCK_MONOTONIC; a pause takes queued frames back): ioplug would take a
/// pointer that goes back for one that went round the whole buffer.
static uint64_t carrier_played(carrier *k) {
    ckeepalived_carry_position position;
    if (ckeepalived_carry_read(k->shared, &position) == 0) k->position = position;
    if (k->position.generation != k->generation) return k->played;
    int64_t now = monotonic_ns();
    if (ckeepalived_pcm_position_holds(k->played_ns, now)) return k->played;
    uint64_t played = ckeepalived_carry_played_at(k->position, k->rate, now);
    if (played < k->played) played = k->played;
    if (played > k->written) played = k->written;
    k->played = played;
    k->played_ns = now;
    return played;
}

/// Arms the timer for when `missing` more frames should have played (at least 1 ms; 2 ms while
/// keepalived has queued none of this generation's yet, so nothing says when it will).
static void carrier_arm(carrier *k, uint64_t missing) {
    int64_t ns = 2000000;
    if (k->position.generation == k->generation && k->position.queued > 0) {
        ns = (int64_t)(missing > k->buffer_frames ? k->buffer_frames : missing) * 1000000000 / (k->rate ? k->rate : 1);
        if (ns < 1000000) ns = 1000000;
    }
    struct itimerspec when = {.it_value = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000}};
    timerfd_settime(k->timer, 0, &when, NULL);
    k->ready = false;
}

/// Makes the timer readable now, and keeps it so: setting it again is what ends that.
static void carrier_set_ready(carrier *k) {
    if (k->ready) return;
    struct itimerspec now = {.it_value = {.tv_nsec = 1}};
    timerfd_settime(k->timer, 0, &now, NULL);
    k->ready = true;
}

/// Sets the timer so that the descriptors poll as the hardware's would in `state` with `played`:
/// readable whenever a write can take avail_min frames (prepared, running or paused: the kernel
/// says so in all three), when a drain has played everything, and in any other state (set up,
/// an underrun: the kernel's poll reports an error there). A poll-driven player (MPD) writes
/// only when its poll wakes, a period at a time, prepared as well as running: a descriptor that
/// waits for the card to free room it already has never wakes it. Not ready: armed for when the
/// card should have played enough (running or draining), or not at all (prepared or paused,
/// where nothing frees room: a wait lasts, as on the hardware). Readiness is level-triggered,
/// as a hardware descriptor's: epoll (MPD's loop) keeps reporting it until a write takes it.
static void carrier_watch(carrier *k, snd_pcm_state_t state, uint64_t played) {
    uint64_t queued = k->written - played;
    uint64_t avail = queued < k->buffer_frames ? k->buffer_frames - queued : 0;
    bool running = state == SND_PCM_STATE_RUNNING;
    switch (state) {
    case SND_PCM_STATE_DRAINING:
        if (queued == 0) carrier_set_ready(k);
        else carrier_arm(k, queued);
        return;
    case SND_PCM_STATE_PREPARED:
    case SND_PCM_STATE_RUNNING:
    case SND_PCM_STATE_PAUSED:
        if (avail >= k->avail_min) {
            carrier_set_ready(k);
        } else if (running) {
            carrier_arm(k, k->avail_min - avail);
        } else {
            struct itimerspec never = {{0, 0}, {0, 0}};
            timerfd_settime(k->timer, 0, &never, NULL);
            k->ready = false;
        }
        return;
    default:
        carrier_set_ready(k);
        return;
    }
}

/// Drops the memory and eventfd of the last hw_params (the connection stays).
static void carrier_release_memory(carrier *k) {
    if (k->shared) munmap(k->shared, k->mapped);
    k->shared = NULL;
    k->data = NULL;
    k->mapped = 0;
    if (k->event >= 0) close(k->event);
    k->event = -1;
}

static int carrier_start(snd_pcm_ioplug_t *io) {
    carrier *k = io->private_data;
    if (!k->shared || carrier_gone(k)) return -ENODEV;
    // snapclient starts its stream before its first write: the hardware refuses that (-EPIPE,
    // still prepared) and its first write starts the stream; running empty here would be an
    // underrun at once, which the player then recovers from with its timing lost.
    if (!ckeepalived_pcm_start_allowed(k->written - carrier_played(k), k->stop_threshold, k->boundary)) return -EPIPE;
    k->state = CKEEPALIVED_CARRY_RUNNING;
    publish(k);
    // ioplug says RUNNING only once this returns; a write that waits next polls the timer.
    carrier_watch(k, SND_PCM_STATE_RUNNING, carrier_played(k));
    return 0;
}

static int carrier_stop(snd_pcm_ioplug_t *io) {
    carrier *k = io->private_data;
    // A new generation: what keepalived still holds of the old one is not played.
    k->generation++;
    k->written = 0;
    k->played = 0;
    k->played_ns = 0;
    k->state = CKEEPALIVED_CARRY_IDLE;
    publish(k);
    // Set up after a drop, prepared after a prepare: either way the player's poll must wake it
    // (MPD prepares again only once its poll wakes after a drop).
    carrier_set_ready(k);
    return 0;
}

static int carrier_prepare(snd_pcm_ioplug_t *io) {
    carrier *k = io->private_data;
    if (!k->shared) return -EBADFD;
    // A recovery after keepalived stopped carrying must fail, not wait for frames nobody plays.
    if (carrier_gone(k)) return -ENODEV;
    return carrier_stop(io);
}

static int carrier_pause(snd_pcm_ioplug_t *io, int enable) {
    carrier *k = io->private_data;
    k->state = enable ? CKEEPALIVED_CARRY_PAUSED : CKEEPALIVED_CARRY_RUNNING;
    publish(k);
    if (k->shared) carrier_watch(k, enable ? SND_PCM_STATE_PAUSED : SND_PCM_STATE_RUNNING, carrier_played(k));
    return 0;
}

/// keepalived publishes a position at each of its looks, at most about a quarter of a second
/// apart while it carries; one that stands still longer means keepalived is not running (stopped,
/// hung, starved). A card whose period interrupts are off (HDA under keepalived's ring loop) then
/// has nobody to tell the kernel where it is: it plays on round its ring, the player's last
/// frames again and again, once per ring. Reading the card's status in /proc makes the kernel
/// look, and once everything written has played the stream stops (keepalived's stop threshold
/// while it carries), as a card with interrupts stops by itself: an underrun, never a loop of
/// music. At most every 100 ms, only while the position stands still; a read while keepalived
/// runs does what its own next look does.
#define STALL_NS 500000000

static void carrier_nudge(carrier *k) {
    int64_t now = monotonic_ns();
    ckeepalived_carry_position p = k->position;
    if (k->watched_ns == 0 || p.stamp_ns != k->watched.stamp_ns || p.played != k->watched.played || p.queued != k->watched.queued) {
        k->watched = p;
        k->watched_ns = now;
        return;
    }
    if (now - k->watched_ns < STALL_NS || now - k->nudged_ns < 100000000) return;
    k->nudged_ns = now;
    // Every subdevice of the device: keepalived's is one of them, and a look at another is harmless.
    for (int sub = 0; sub < 32; sub++) {
        char path[96];
        snprintf(path, sizeof path, "/proc/asound/card%d/pcm%dp/sub%d/status", k->card, k->device, sub);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) break;
        char text[256];
        ssize_t ignored = read(fd, text, sizeof text);
        (void)ignored;
        close(fd);
    }
}

static snd_pcm_sframes_t carrier_pointer(snd_pcm_ioplug_t *io) {
    carrier *k = io->private_data;
    if (!k->shared) return 0;
    if (carrier_gone(k)) {
        carrier_set_ready(k);
        return -ENODEV;
    }
    // ioplug drains by polling (no drain callback): keepalived learns that no more frames come.
    if (io->state == SND_PCM_STATE_DRAINING && k->state == CKEEPALIVED_CARRY_RUNNING) {
        k->state = CKEEPALIVED_CARRY_DRAINING;
        publish(k);
    }
    uint64_t played = carrier_played(k);
    if (io->state == SND_PCM_STATE_RUNNING || io->state == SND_PCM_STATE_DRAINING) carrier_nudge(k);
    // Everything played: an underrun while running, as the hardware reports one at the default
    // stop threshold; while draining, the end (ioplug drops the stream on an error then). Also
    // the one case where the position alone would say nothing moved: a full buffer played out.
    if ((io->state == SND_PCM_STATE_RUNNING || io->state == SND_PCM_STATE_DRAINING) && played >= k->written) {
        // An underrun (ioplug's XRUN) polls as an error does on the hardware: at once.
        carrier_set_ready(k);
        return -EPIPE;
    }
    carrier_watch(k, io->state, played);
    return (snd_pcm_sframes_t)(played % io->buffer_size);
}

static int carrier_delay(snd_pcm_ioplug_t *io, snd_pcm_sframes_t *delay) {
    carrier *k = io->private_data;
    if (!k->shared) {
        *delay = 0;
        return 0;
    }
    // What the player wrote and the card has not played yet, keepalived's buffer included, and
    // the signal the card plays before the next of them: a lead-in, or the lead left in the card
    // before a run's first frame (shairport-sync sets its start by the delay it reads then: 480 ms
    // late when the signal ahead was left out during a lead-in).
    uint64_t played = carrier_played(k);
    uint64_t ahead = 0;
    if (k->position.generation == k->generation && played == k->position.played)
        ahead = ckeepalived_carry_ahead_at(k->position, k->rate, monotonic_ns());
    *delay = (snd_pcm_sframes_t)(k->written - played + ahead);
    return 0;
}

static snd_pcm_sframes_t carrier_transfer(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas, snd_pcm_uframes_t offset,
                                          snd_pcm_uframes_t size) {
    carrier *k = io->private_data;
    if (!k->shared || size > k->buffer_frames) return -EBADFD;
    // Interleaved (the only access granted): the frames lie one after the other from the first
    // channel's first sample.
    const unsigned char *from = (const unsigned char *)areas[0].addr + areas[0].first / 8 + offset * k->frame_bytes;
    uint64_t at = k->written % k->buffer_frames;
    snd_pcm_uframes_t first = size < k->buffer_frames - at ? size : (snd_pcm_uframes_t)(k->buffer_frames - at);
    memcpy(k->data + at * k->frame_bytes, from, first * k->frame_bytes);
    memcpy(k->data, from + first * k->frame_bytes, (size - first) * k->frame_bytes);
    k->written += size;
    publish(k);
    // Less room now: the descriptor stops being readable once less than avail_min is free.
    carrier_watch(k, io->state, carrier_played(k));
    return (snd_pcm_sframes_t)size;
}

static int carrier_sw_params(snd_pcm_ioplug_t *io, snd_pcm_sw_params_t *params) {
    carrier *k = io->private_data;
    snd_pcm_uframes_t avail_min;
    if (snd_pcm_sw_params_get_avail_min(params, &avail_min) == 0 && avail_min > 0) k->avail_min = avail_min;
    snd_pcm_uframes_t stop_threshold, boundary;
    if (snd_pcm_sw_params_get_stop_threshold(params, &stop_threshold) == 0 && snd_pcm_sw_params_get_boundary(params, &boundary) == 0) {
        k->stop_threshold = stop_threshold;
        k->boundary = boundary;
    }
    if (k->shared) carrier_watch(k, io->state, carrier_played(k));
    return 0;
}

/// Checks the memory keepalived handed over for the format asked and maps it; `memory` is
/// closed either way (the mapping keeps it). 0, or -EIO (reported).
static int carrier_map(carrier *k, int memory, uint32_t buffer_frames, uint32_t frame_bytes, uint32_t rate) {
    struct stat status;
    int err = -EIO;
    uint64_t data_bytes = (uint64_t)buffer_frames * frame_bytes;
    if (fstat(memory, &status) != 0 || !S_ISREG(status.st_mode) || status.st_size < (off_t)sizeof(ckeepalived_carry_shared) ||
        (uint64_t)status.st_size > data_bytes + (1u << 20) + CKEEPALIVED_CARRY_DATA_OFFSET) {
        SNDERR("keepalived at %s handed over memory that is not the player's buffer", k->path);
        goto done;
    }
    size_t size = (size_t)status.st_size;
    void *mapped = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memory, 0);
    if (mapped == MAP_FAILED) {
        SNDERR("keepalived: cannot map the player's buffer: %s", strerror(errno));
        goto done;
    }
    ckeepalived_carry_shared *shared = mapped;
    // Each field read once: what is checked is what is used.
    uint64_t magic = shared->magic;
    uint32_t version = shared->version, offset = shared->data_offset, frames = shared->buffer_frames,
             bytes = shared->frame_bytes, shared_rate = shared->rate;
    if (magic != CKEEPALIVED_CARRY_MAGIC || version != CKEEPALIVED_CARRY_VERSION || offset < sizeof(ckeepalived_carry_shared) ||
        offset % 64 != 0 || frames != buffer_frames || bytes != frame_bytes || shared_rate != rate ||
        (uint64_t)offset + data_bytes > size) {
        SNDERR("keepalived at %s handed over a buffer for another format (%u frames of %u bytes at %u Hz, asked %u of %u at %u)", k->path,
               frames, bytes, shared_rate, buffer_frames, frame_bytes, rate);
        munmap(mapped, size);
        goto done;
    }
    k->shared = shared;
    k->mapped = size;
    k->data = (unsigned char *)mapped + offset;
    k->buffer_frames = buffer_frames;
    k->frame_bytes = frame_bytes;
    k->rate = rate;
    err = 0;
done:
    close(memory);
    return err;
}

static int carrier_hw_params(snd_pcm_ioplug_t *io, snd_pcm_hw_params_t *params) {
    (void)params;
    carrier *k = io->private_data;
    carrier_release_memory(k);
    if (carrier_gone(k)) return -ENODEV;
    int width = snd_pcm_format_physical_width(io->format);
    if (width <= 0 || width % 8 != 0 || io->buffer_size > UINT32_MAX) return -EINVAL;
    uint32_t frame_bytes = (uint32_t)(width / 8) * io->channels;

    char line[CKEEPALIVED_PCM_FORMAT_LINE_MAX];
    int length = ckeepalived_pcm_format_line(line, sizeof line, io->format, io->rate, io->channels, io->buffer_size, io->period_size);
    if (length < 0) return -EINVAL;
    int64_t deadline = monotonic_ns() + (int64_t)FORMAT_TIMEOUT_MS * 1000000;
    int err = send_all(k->socket, line, (size_t)length, deadline);
    if (err < 0) {
        SNDERR("cannot send the format to keepalived at %s: %s", k->path, strerror(-err));
        return -EIO;
    }
    char reply[REPLY_MAX];
    int fds[REPLY_FDS_MAX];
    size_t count = 0;
    ssize_t received = receive_line(k->socket, reply, sizeof reply, deadline, fds, REPLY_FDS_MAX, &count);
    if (received < 0) {
        close_all(fds, count);
        if (received == -ETIMEDOUT) SNDERR("keepalived at %s did not take the format within %d ms", k->path, FORMAT_TIMEOUT_MS);
        else SNDERR("keepalived at %s did not answer the format: %s", k->path, strerror((int)-received));
        return -EIO;
    }
    char error[256];
    int answer = ckeepalived_pcm_parse_reply(reply, (size_t)received, error, sizeof error, NULL);
    if (answer != 1) {
        close_all(fds, count);
        if (answer == 0) {
            SNDERR("keepalived cannot carry %s, %u Hz, %u channels: %s", snd_pcm_format_name(io->format), io->rate, io->channels,
                   error[0] ? error : "no reason given");
            return -EINVAL;
        }
        SNDERR("keepalived at %s sent a format answer that is not one", k->path);
        return -EIO;
    }
    if (count != 2) {
        close_all(fds, count);
        SNDERR("keepalived at %s took the format but handed over %zu descriptors, not 2", k->path, count);
        return -EIO;
    }
    err = carrier_map(k, fds[0], (uint32_t)io->buffer_size, frame_bytes, io->rate);
    if (err < 0) {
        close(fds[1]);
        return err;
    }
    // Non-blocking for publish's write (the open file is keepalived's too; it polls it anyway).
    int flags = fcntl(fds[1], F_GETFL);
    if (flags < 0 || fcntl(fds[1], F_SETFL, flags | O_NONBLOCK) < 0) {
        SNDERR("keepalived at %s handed over an eventfd that is not one", k->path);
        close(fds[1]);
        carrier_release_memory(k);
        return -EIO;
    }
    k->event = fds[1];
    // Fresh memory: the player's counters as they are, and no position of keepalived's yet.
    memset(&k->position, 0, sizeof k->position);
    k->avail_min = io->period_size;
    // alsa-lib's defaults until the player's sw_params: stop at an underrun.
    k->stop_threshold = io->buffer_size;
    k->boundary = io->buffer_size * 2;
    k->written = 0;
    k->played = 0;
    k->played_ns = 0;
    k->state = CKEEPALIVED_CARRY_IDLE;
    publish(k);
    carrier_set_ready(k);
    return 0;
}

static int carrier_hw_free(snd_pcm_ioplug_t *io) {
    // A second hw_params frees the first one's setup before it asks for the new format: the
    // connection stays, so that the carrying goes on in the new format.
    carrier_release_memory(io->private_data);
    return 0;
}

static int carrier_close(snd_pcm_ioplug_t *io) {
    carrier *k = io->private_data;
    carrier_release_memory(k);
    // The connection's end ends the carrying at keepalived.
    close(k->socket);
    close(k->timer);
    free(k);
    return 0;
}

static int carrier_poll_descriptors_count(snd_pcm_ioplug_t *io) {
    (void)io;
    return 2;
}

static int carrier_poll_descriptors(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int space) {
    carrier *k = io->private_data;
    if (space < 2) return -EINVAL;
    // The timer as things are now: a player asks for the descriptors before each wait (MPD, and
    // alsa-lib's own snd_pcm_wait).
    if (k->shared && !k->gone) carrier_watch(k, io->state, carrier_played(k));
    pfd[0] = (struct pollfd){.fd = k->timer, .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = k->socket, .events = POLLIN};
    return 2;
}

static int carrier_poll_revents(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int nfds, unsigned short *revents) {
    (void)pfd;
    (void)nfds;
    carrier *k = io->private_data;
    *revents = 0;
    // The connection readable or hung up: carrier_gone sees it too, and says why. Disconnected,
    // so that the wait that polled fails with -ENODEV (as for a card unplugged), not -EIO.
    if (!k->shared || carrier_gone(k)) {
        if (k->gone) snd_pcm_ioplug_set_state(io, SND_PCM_STATE_DISCONNECTED);
        *revents = POLLERR;
        return 0;
    }
    // The kernel moves a hardware stream's state as the card plays; ioplug moves its own (an
    // underrun, the end of a drain: ioplug drops the stream once everything has played) only
    // when its pointer is asked. A player that reads the state after its poll wakes (MPD waits
    // for its non-blocking drain to end so, calling snd_pcm_drain once) must see it move:
    // ioplug's pointer update, here, where ioplug has the PCM unlocked. Its result is the state.
    snd_pcm_avail_update(io->pcm);
    if (k->gone) {
        snd_pcm_ioplug_set_state(io, SND_PCM_STATE_DISCONNECTED);
        *revents = POLLERR;
        return 0;
    }
    uint64_t played = carrier_played(k);
    uint64_t queued = k->written - played;
    uint64_t avail = queued < k->buffer_frames ? k->buffer_frames - queued : 0;
    carrier_watch(k, io->state, played);
    switch (io->state) {
    case SND_PCM_STATE_DRAINING:
        // ioplug's drain waits here until everything has played: room for avail_min is no
        // reason to wake it (it would spin), the last frame played is.
        if (queued == 0) *revents = POLLOUT;
        break;
    case SND_PCM_STATE_PREPARED:
    case SND_PCM_STATE_RUNNING:
    case SND_PCM_STATE_PAUSED:
        if (avail >= k->avail_min) *revents = POLLOUT;
        break;
    default:
        // Set up (a drain ended), an underrun: as the kernel's poll says for a hardware stream.
        *revents = POLLOUT | POLLERR;
        break;
    }
    return 0;
}

static const snd_pcm_ioplug_callback_t carrier_callbacks = {
    .start = carrier_start,
    .stop = carrier_stop,
    .pointer = carrier_pointer,
    .transfer = carrier_transfer,
    .close = carrier_close,
    .hw_params = carrier_hw_params,
    .hw_free = carrier_hw_free,
    .sw_params = carrier_sw_params,
    .prepare = carrier_prepare,
    .pause = carrier_pause,
    .poll_descriptors_count = carrier_poll_descriptors_count,
    .poll_descriptors = carrier_poll_descriptors,
    .poll_revents = carrier_poll_revents,
    .delay = carrier_delay,
};

/// The player's PCM on keepalived's grant (`socket`, taken over: closed on failure too), named
/// `name` as the player gave it. 0, or a negative error code.
static int carrier_open(snd_pcm_t **pcmp, const char *name, snd_pcm_stream_t stream, int mode, int socket,
                        const struct ckeepalived_pcm_grant *grant, const char path[SOCKET_PATH_MAX], int card, int device,
                        bool framed) {
    // Only the formats this alsa-lib knows, in whole bytes per sample: the copy is by bytes.
    unsigned int formats[64], format_count = 0;
    for (int format = 0; format <= SND_PCM_FORMAT_LAST && format < 64; format++) {
        int width = snd_pcm_format_physical_width((snd_pcm_format_t)format);
        if ((grant->formats >> format & 1) && width > 0 && width % 8 == 0) formats[format_count++] = (unsigned int)format;
    }
    if (format_count == 0) {
        SNDERR("keepalived at %s granted no format this alsa-lib knows", path);
        close(socket);
        return -EINVAL;
    }
    carrier *k = calloc(1, sizeof *k);
    if (!k) {
        close(socket);
        return -ENOMEM;
    }
    k->socket = socket;
    k->event = -1;
    k->card = card;
    k->device = device;
    k->grant = *grant;
    memcpy(k->path, path, sizeof k->path);
    k->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (k->timer < 0) {
        int err = -errno;
        SNDERR("keepalived: cannot create a timer: %s", strerror(errno));
        close(socket);
        free(k);
        return err;
    }
    k->io.version = SND_PCM_IOPLUG_VERSION;
    k->io.name = "keepalived (carried on keepalived's stream)";
    k->io.flags = SND_PCM_IOPLUG_FLAG_MONOTONIC;
    k->io.poll_fd = k->timer;
    k->io.poll_events = POLLIN;
    // ioplug's own buffer for mmap access, handed to transfer at each commit.
    k->io.mmap_rw = 0;
    k->io.callback = &carrier_callbacks;
    k->io.private_data = k;
    int err = snd_pcm_ioplug_create(&k->io, name ? name : "keepalived", stream, mode);
    if (err < 0) {
        close(socket);
        close(k->timer);
        free(k);
        return err;
    }
    static const unsigned int accesses[] = {SND_PCM_ACCESS_RW_INTERLEAVED, SND_PCM_ACCESS_MMAP_INTERLEAVED};
    unsigned int max = grant->max_buffer_bytes;
    if ((err = snd_pcm_ioplug_set_param_list(&k->io, SND_PCM_IOPLUG_HW_ACCESS, 2, accesses)) < 0 ||
        (err = snd_pcm_ioplug_set_param_list(&k->io, SND_PCM_IOPLUG_HW_FORMAT, format_count, formats)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(&k->io, SND_PCM_IOPLUG_HW_CHANNELS, grant->channels_min, grant->channels_max)) < 0 ||
        (err = snd_pcm_ioplug_set_param_list(&k->io, SND_PCM_IOPLUG_HW_RATE, grant->rate_count, grant->rates)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(&k->io, SND_PCM_IOPLUG_HW_BUFFER_BYTES, CKEEPALIVED_PCM_GRANT_BUFFER_MIN, max)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(&k->io, SND_PCM_IOPLUG_HW_PERIOD_BYTES, 64, max / 2)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(&k->io, SND_PCM_IOPLUG_HW_PERIODS, 2, 1024)) < 0) {
        // Deleting the PCM closes it: carrier_close frees the rest.
        snd_pcm_ioplug_delete(&k->io);
        return err;
    }
    // On a card that takes IEC958 subframes only, the player's samples are framed as its own
    // open of the hardware frames them (hand_over), from the block's first frame at each
    // prepare; keepalived places them in its stream where its blocks agree. Under a slave's
    // chain (carried_below) the chain frames them itself, as it does over the hardware.
    if (!framed) {
        *pcmp = k->io.pcm;
        return 0;
    }
    return frame_for_player(pcmp, name, k->io.pcm, grant->formats, true);
}

// MARK: - A slave's chain, carried

/// The layers a player's frames may pass on their way to the card when its `slave` is carried:
/// each hands every frame to one slave in its own process, so that the chain runs in the
/// player exactly as it would over the hardware, and only its last step, the hw PCM, becomes
/// keepalived's stream. dmix, dshare and share need the hw PCM itself (their ring is the
/// card's); multi, file and external plug-ins are not known to pass their frames through one
/// slave: such a chain is handed the card, as before carrying.
static bool passes_to_one_slave(const char *type) {
    static const char *const types[] = {"plug", "softvol", "iec958", "hooks", "route", "linear", "lfloat", "rate", "copy", "empty", "mmap_emul"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(type, types[i]) == 0) return true;
    return false;
}

/// How deep a chain's definitions may refer to one another before it is taken for a loop.
#define CHAIN_DEPTH_MAX 16

/// The definition `name` stands for (alsa-lib's own lookup, its arguments and functions
/// evaluated), in `*expanded`, to be deleted by the caller; an alias (a definition that is a
/// name) followed as snd_pcm_open follows it.
static int expand_definition(snd_config_t *root, const char *base, const char *name, snd_config_t **expanded, int depth) {
    if (depth > CHAIN_DEPTH_MAX) return 0;
    snd_config_t *found;
    int err = snd_config_search_definition(root, base, name, &found);
    if (err < 0) return err;
    const char *alias;
    if (snd_config_get_type(found) == SND_CONFIG_TYPE_STRING && snd_config_get_string(found, &alias) == 0) {
        char copy[256];
        snprintf(copy, sizeof copy, "%s", alias);
        snd_config_delete(found);
        return expand_definition(root, base, copy, expanded, depth + 1);
    }
    if (snd_config_get_type(found) != SND_CONFIG_TYPE_COMPOUND) {
        snd_config_delete(found);
        return 0;
    }
    *expanded = found;
    return 1;
}

static int rewrite_pcm(snd_config_t *root, snd_config_t *pcm, long card, long device, int depth);
static int card_index(const char *text);

/// Rewrites the PCM that `parent`'s member `id` names or defines (rewrite_pcm), replacing a name
/// by its rewritten definition.
static int rewrite_member(snd_config_t *root, snd_config_t *parent, const char *id, const char *base, long card, long device, int depth) {
    snd_config_t *member;
    if (snd_config_search(parent, id, &member) < 0) return 0;
    if (snd_config_get_type(member) == SND_CONFIG_TYPE_COMPOUND) return rewrite_pcm(root, member, card, device, depth + 1);
    const char *name;
    if (snd_config_get_string(member, &name) < 0) return 0;
    snd_config_t *expanded = NULL;
    int found = expand_definition(root, base, name, &expanded, depth + 1);
    if (found <= 0) return found;
    int rewritten = rewrite_pcm(root, expanded, card, device, depth + 1);
    if (rewritten <= 0 || snd_config_delete(member) < 0 || snd_config_set_id(expanded, id) < 0 || snd_config_add(parent, expanded) < 0) {
        snd_config_delete(expanded);
        return rewritten <= 0 ? rewritten : -ENOMEM;
    }
    return 1;
}

/// Whether the hw definition `pcm` opens `card`'s `device` and asks nothing of it but that (a hw
/// PCM that fixes a format, a rate or channels would lose it on keepalived's stream).
static bool opens_device(snd_config_t *pcm, long card, long device) {
    long its_card = -1, its_device = 0;
    snd_config_iterator_t i, next;
    snd_config_for_each(i, next, pcm) {
        snd_config_t *n = snd_config_iterator_entry(i);
        const char *id;
        if (snd_config_get_id(n, &id) < 0) return false;
        if (strcmp(id, "type") == 0 || strcmp(id, "comment") == 0 || strcmp(id, "hint") == 0 || strcmp(id, "subdevice") == 0) continue;
        if (strcmp(id, "card") == 0) {
            // An index written as a string is the index, as for keepalived:CARD=0; an id is looked up.
            const char *digits;
            int index = snd_config_get_string(n, &digits) == 0 ? card_index(digits) : -1;
            its_card = index >= 0 ? index : snd_config_get_card(n);
            if (its_card < 0) return false;
        } else if (strcmp(id, "device") == 0) {
            if (snd_config_get_integer(n, &its_device) < 0) return false;
        } else {
            return false;
        }
    }
    return its_card == card && its_device == device;
}

/// Turns the definition `pcm` (a compound) into one whose frames end on keepalived's stream: its
/// hw PCM of `card`'s `device`, reached through layers that pass_to_one_slave, becomes
/// `{ type keepalived card "N" device D carried_below true }`. 1 when it did, 0 when the chain
/// cannot be carried (left in part rewritten: the caller deletes it), negative on an error.
static int rewrite_pcm(snd_config_t *root, snd_config_t *pcm, long card, long device, int depth) {
    if (depth > CHAIN_DEPTH_MAX) return 0;
    snd_config_t *node;
    const char *type;
    if (snd_config_search(pcm, "type", &node) < 0 || snd_config_get_string(node, &type) < 0) return 0;
    if (strcmp(type, "hw") == 0) {
        if (!opens_device(pcm, card, device)) return 0;
        snd_config_iterator_t i, next;
        snd_config_for_each(i, next, pcm) snd_config_delete(snd_config_iterator_entry(i));
        char index[16];
        snprintf(index, sizeof index, "%ld", card);
        snd_config_t *members[4] = {NULL};
        if (snd_config_imake_string(&members[0], "type", "keepalived") < 0 || snd_config_imake_string(&members[1], "card", index) < 0 ||
            snd_config_imake_integer(&members[2], "device", device) < 0 || snd_config_imake_integer(&members[3], "carried_below", 1) < 0) {
            for (int m = 0; m < 4; m++)
                if (members[m]) snd_config_delete(members[m]);
            return -ENOMEM;
        }
        for (int m = 0; m < 4; m++) snd_config_add(pcm, members[m]);
        return 1;
    }
    if (strcmp(type, "asym") == 0) {
        snd_config_t *playback;
        if (snd_config_search(pcm, "playback", &playback) < 0 || snd_config_get_type(playback) != SND_CONFIG_TYPE_COMPOUND) return 0;
        return rewrite_member(root, playback, "pcm", "pcm", card, device, depth);
    }
    if (!passes_to_one_slave(type)) return 0;
    snd_config_t *slave;
    if (snd_config_search(pcm, "slave", &slave) < 0) return 0;
    if (snd_config_get_type(slave) != SND_CONFIG_TYPE_COMPOUND) {
        // `slave NAME` names a pcm_slave definition, whose `pcm` is the PCM.
        const char *name;
        snd_config_t *expanded = NULL;
        if (snd_config_get_string(slave, &name) < 0) return 0;
        int found = expand_definition(root, "pcm_slave", name, &expanded, depth + 1);
        if (found <= 0) return found;
        if (snd_config_delete(slave) < 0 || snd_config_set_id(expanded, "slave") < 0 || snd_config_add(pcm, expanded) < 0) {
            snd_config_delete(expanded);
            return -ENOMEM;
        }
        slave = expanded;
    }
    int rewritten = rewrite_member(root, slave, "pcm", "pcm", card, device, depth);
    // A hooks layer's hooks act on the card at the player's hw_params, hw_free and close (the
    // ctl_elems hook of vc4-hdmi.conf's hdmi: sets and locks the IEC958 Playback Default
    // control). Carried, the card's stream is keepalived's, which the player's hw_params never
    // reaches, and the hooks find no card to act on (the carried PCM has none): they go.
    snd_config_t *hooks;
    if (rewritten == 1 && strcmp(type, "hooks") == 0 && snd_config_search(pcm, "hooks", &hooks) == 0) snd_config_delete(hooks);
    return rewritten;
}

/// The PCM `slave` names, as a definition whose frames end on keepalived's stream on `card`'s
/// `device` (rewrite_pcm), in `*chain` (to be deleted by the caller): 1; 0 when that chain
/// cannot be carried; negative on an error.
static int carried_chain(snd_config_t *root, const char *slave, long card, long device, snd_config_t **chain) {
    snd_config_t *expanded = NULL;
    int found = expand_definition(root, "pcm", slave, &expanded, 0);
    if (found <= 0) return found;
    int rewritten = rewrite_pcm(root, expanded, card, device, 0);
    if (rewritten <= 0) {
        snd_config_delete(expanded);
        return rewritten;
    }
    *chain = expanded;
    return 1;
}

int ckeepalived_pcm_carried_chain_text(const char *config, const char *slave, int card, int device, char *out, size_t out_size) {
    snd_config_t *root = NULL, *chain = NULL;
    snd_input_t *input = NULL;
    snd_output_t *output = NULL;
    int err = snd_config_top(&root);
    if (err < 0) return err;
    if ((err = snd_input_buffer_open(&input, config, (ssize_t)strlen(config))) < 0) goto done;
    if ((err = snd_config_load(root, input)) < 0) goto done;
    if ((err = carried_chain(root, slave, card, device, &chain)) <= 0) goto done;
    if ((err = snd_output_buffer_open(&output)) < 0) goto done;
    if ((err = snd_config_save(chain, output)) < 0) goto done;
    char *text;
    size_t length = snd_output_buffer_string(output, &text);
    if (length + 1 > out_size) {
        err = -ENOSPC;
        goto done;
    }
    memcpy(out, text, length);
    out[length] = '\0';
    err = 1;
done:
    if (output) snd_output_close(output);
    if (input) snd_input_close(input);
    if (chain) snd_config_delete(chain);
    snd_config_delete(root);
    return err;
}

// MARK: - The plug-in

/// The keepalived PCMs this thread is opening, outermost first. alsa-lib counts the hops of one
/// open's slaves and stops a loop there, but the open of a `slave` by name (snd_pcm_open_lconf)
/// starts a count of its own: a slave that leads back to a keepalived PCM being opened (a
/// `default` whose slave is `default`) would ask keepalived for a release at every level until
/// the stack ran out. Only this thread's: another thread's open is another player's.
#define NESTING_MAX 8
typedef struct opening_level {
    const char *name;
    const char *slave;
    int card, device;
} opening_level;
static __thread opening_level opening[NESTING_MAX];
static __thread int opening_depth;

/// Whether a keepalived PCM this thread is opening already asked for `card`'s `device`.
static bool asked_above(long card, long device) {
    for (int level = 0; level < opening_depth; level++)
        if (opening[level].card == card && opening[level].device == device) return true;
    return false;
}

/// -ELOOP (said with the loop's names) when opening `slave` for the PCM `name` leads back to a
/// keepalived PCM this thread is opening, or nests deeper than any sane configuration; else 0.
static int refuse_loop(const char *name, const char *slave) {
    const char *shown = name ? name : "keepalived";
    if (name && strcmp(name, slave) == 0) {
        SNDERR("keepalived: the slave leads back to a keepalived PCM being opened: %s -> %s", shown, slave);
        return -ELOOP;
    }
    for (int level = 0; level < opening_depth; level++) {
        if (strcmp(opening[level].slave, slave) != 0) continue;
        const char *first = opening[level].name ? opening[level].name : "keepalived";
        if (strcmp(opening[level].slave, shown) == 0)
            SNDERR("keepalived: the slave leads back to a keepalived PCM being opened: %s -> %s", first, slave);
        else
            SNDERR("keepalived: the slave leads back to a keepalived PCM being opened: %s -> %s -> %s", first, opening[level].slave, shown);
        return -ELOOP;
    }
    if (opening_depth == NESTING_MAX) {
        SNDERR("keepalived: %s: more than %d keepalived PCMs inside each other (a loop through slaves?)", shown, NESTING_MAX);
        return -ELOOP;
    }
    return 0;
}

/// The card index `text` writes as hw's lookup reads one (one digit, or two without a leading
/// zero, below alsa-lib's 32 cards); -1 for anything else, a card's id included.
static int card_index(const char *text) {
    size_t length = strlen(text);
    if (length == 0 || length > 2 || (length == 2 && text[0] == '0')) return -1;
    int value = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9') return -1;
        value = value * 10 + (text[i] - '0');
    }
    return value < 32 ? value : -1;
}

// alsa-lib's `empty` PCM opens the slave definition it is given and returns it: the one way to
// open a definition that is not in the configuration under a name. Exported (ALSA_0.9) as every
// built-in type's entry is, for alsa-lib's own lookup of types by name; not declared in its headers.
int _snd_pcm_empty_open(snd_pcm_t **pcmp, const char *name, snd_config_t *root, snd_config_t *conf, snd_pcm_stream_t stream, int mode);

/// The carrying of a slave's chain on this thread: armed by carry_slave for its chain's last
/// step (`{ type keepalived … carried_below true }`), which asks keepalived, opens first (alsa-lib
/// opens a chain from its end up) and says here how its ask went.
enum below_outcome { BELOW_NOT_REACHED, BELOW_CARRIED, BELOW_REFUSED, BELOW_BUSY };
typedef struct carrying_below {
    bool armed;
    int card, device;
    int64_t deadline;
    enum below_outcome outcome;
} carrying_below;
static __thread carrying_below below;

/// Opens `chain` (carried_chain's, left to the caller) in the caller's stream and mode, as `name`.
static int open_chain(snd_pcm_t **pcmp, const char *name, snd_config_t *root, snd_config_t *chain, snd_pcm_stream_t stream, int mode) {
    snd_config_t *wrapper = NULL, *slave = NULL, *type = NULL;
    int err = snd_config_make_compound(&wrapper, NULL, 0);
    if (err < 0) return err;
    if ((err = snd_config_imake_string(&type, "type", "empty")) < 0 || (err = snd_config_add(wrapper, type)) < 0) {
        if (type) snd_config_delete(type);
        snd_config_delete(wrapper);
        return err;
    }
    if ((err = snd_config_make_compound(&slave, "slave", 0)) < 0 || (err = snd_config_add(wrapper, slave)) < 0) {
        if (slave) snd_config_delete(slave);
        snd_config_delete(wrapper);
        return err;
    }
    if ((err = snd_config_set_id(chain, "pcm")) < 0 || (err = snd_config_add(slave, chain)) < 0) {
        snd_config_delete(wrapper);
        return err;
    }
    err = _snd_pcm_empty_open(pcmp, name, root, wrapper, stream, mode);
    snd_config_remove(chain);
    snd_config_delete(wrapper);
    return err;
}

/// A player's playback open of a keepalived PCM with a `slave`, carried on keepalived's running
/// stream where it can be: the slave's own chain (a box's `default`: the card's plug, softvol and
/// IEC958 framing) opened in the player as it would be, over keepalived's stream instead of the
/// card's hw PCM (carried_chain), so that its audio is what it would be without keepalived and a
/// program that only probes the PCM takes nothing from keepalived (issue 58). 1 opened, in
/// *pcmp; 0 when the player is not carried (the release follows); negative: the open fails
/// (-EBUSY: keepalived carries another).
static int carry_slave(snd_pcm_t **pcmp, const char *name, snd_config_t *root, const char *slave, int card, int device,
                       snd_pcm_stream_t stream, int mode, int64_t deadline) {
    snd_config_t *chain = NULL;
    if (carried_chain(root, slave, card, device, &chain) <= 0) return 0;
    below = (carrying_below){.armed = true, .card = card, .device = device, .deadline = deadline, .outcome = BELOW_NOT_REACHED};
    opening[opening_depth++] = (opening_level){name, slave, card, device};
    snd_pcm_t *opened = NULL;
    int err = open_chain(&opened, name, root, chain, stream, mode);
    opening_depth--;
    snd_config_delete(chain);
    enum below_outcome outcome = below.outcome;
    below.armed = false;
    if (err >= 0) {
        *pcmp = opened;
        return 1;
    }
    switch (outcome) {
    case BELOW_BUSY: return -EBUSY;
    // Carried, and a layer above failed: the release would open the same layer over the card.
    case BELOW_CARRIED: return err;
    case BELOW_REFUSED: return 0;
    case BELOW_NOT_REACHED: break;
    }
    SNDERR("keepalived: %s did not open down to its card (%s): the card is released for it instead", slave, snd_strerror(err));
    return 0;
}

/// `card` (an index or a card's id), `device` (0) and `subdevice` (-1), read as the hw PCM reads
/// them; for a playback stream, keepalived is asked to release the device; then the device's hw
/// PCM is opened with the caller's stream and mode and returned as it is.
SND_PCM_PLUGIN_DEFINE_FUNC(keepalived) {
    int64_t started = monotonic_ns();
    const char *timeout_text = secure_getenv("KEEPALIVED_RELEASE_TIMEOUT");
    int timeout_ms = ckeepalived_pcm_release_timeout_ms(timeout_text);
    if (timeout_ms < 0) {
        SNDERR("KEEPALIVED_RELEASE_TIMEOUT=%s is not a whole number of milliseconds from 0 to %d; waiting %d ms", timeout_text,
               CKEEPALIVED_PCM_RELEASE_TIMEOUT_MAX_MS, CKEEPALIVED_PCM_RELEASE_TIMEOUT_DEFAULT_MS);
        timeout_ms = CKEEPALIVED_PCM_RELEASE_TIMEOUT_DEFAULT_MS;
    }
    int64_t deadline = started + (int64_t)timeout_ms * 1000000;
    long card = -1, device = 0, subdevice = -1;
    // A card the player named (CARD=, or ALSA_CARD in its environment); the bare `keepalived`
    // opens the configuration's default card and asks for no release: a program that probes
    // every PCM it finds (PortAudio does) must not take the card from keepalived.
    bool named = true;
    // `slave`: the PCM the player gets after the release, instead of the device's hw. A box's
    // `default` redirected through keepalived (pcm.keepalived-default) names the card's own
    // default chain (sysdefault), so the player's audio goes exactly the way it went before:
    // its rate, its format, its softvol, the card's IEC958 framing.
    const char *slave = NULL;
    // The last step of a slave's chain that carry_slave opens over keepalived's stream: it asks
    // keepalived to carry the player (carry_slave armed it and reads how that went), and frames
    // nothing (the chain above it does).
    bool carried_below = false;
    // A card index given as a string, still to be looked up as hw does.
    snd_config_t *lookup = NULL;
    snd_config_iterator_t i, next;
    snd_config_for_each(i, next, conf) {
        snd_config_t *n = snd_config_iterator_entry(i);
        const char *id;
        if (snd_config_get_id(n, &id) < 0) continue;
        if (strcmp(id, "comment") == 0 || strcmp(id, "type") == 0 || strcmp(id, "hint") == 0) continue;
        if (strcmp(id, "card") == 0) {
            const char *text;
            if (snd_config_get_string(n, &text) == 0 && *text == '\0') {
                named = false;
                snd_config_t *fallback;
                if (snd_config_search(root, "defaults.pcm.card", &fallback) < 0) {
                    card = 0;
                    continue;
                }
                n = fallback;
            }
            // An index written as a string (keepalived:CARD=0) is taken as the index: a carried
            // player needs no card of its own. hw's lookup of it (which fails where the card is
            // not) comes before anything else when there is no carrying to ask for, and after
            // the carry request when there is.
            const char *digits;
            int index = snd_config_get_string(n, &digits) == 0 ? card_index(digits) : -1;
            if (index >= 0) {
                card = index;
                lookup = n;
                continue;
            }
            // As hw does: an index, or a card's id through snd_card_get_index, with its error.
            int err = snd_config_get_card(n);
            if (err < 0) return err;
            card = err;
            continue;
        }
        if (strcmp(id, "carried_below") == 0) {
            int value = snd_config_get_bool(n);
            if (value < 0) {
                SNDERR("carried_below must be a boolean");
                return -EINVAL;
            }
            carried_below = value == 1;
            continue;
        }
        if (strcmp(id, "slave") == 0) {
            if (snd_config_get_string(n, &slave) < 0 || *slave == '\0') {
                SNDERR("slave must be a PCM's name");
                return -EINVAL;
            }
            continue;
        }
        if (strcmp(id, "device") == 0 || strcmp(id, "subdevice") == 0) {
            long value;
            if (snd_config_get_integer(n, &value) < 0 || value < INT_MIN || value > INT_MAX) {
                SNDERR("Invalid type for %s", id);
                return -EINVAL;
            }
            *(strcmp(id, "device") == 0 ? &device : &subdevice) = value;
            continue;
        }
        SNDERR("Unknown field %s", id);
        return -EINVAL;
    }
    if (card < 0) {
        SNDERR("card is not defined");
        return -EINVAL;
    }
    if (carried_below) {
        if (!below.armed || below.card != card || below.device != device || stream != SND_PCM_STREAM_PLAYBACK || slave) {
            SNDERR("carried_below is keepalived's own, for the last step of a slave's chain it carries");
            return -EINVAL;
        }
        below.armed = false;
        int socket = -1;
        struct ckeepalived_pcm_grant grant;
        char path[SOCKET_PATH_MAX] = "";
        int granted = ask_carry((int)card, (int)device, below.deadline, &socket, &grant, path);
        below.outcome = granted == 1 ? BELOW_CARRIED : granted == 2 ? BELOW_BUSY : BELOW_REFUSED;
        if (granted != 1) return granted == 2 ? -EBUSY : -ENODEV;
        return carrier_open(pcmp, name, stream, mode, socket, &grant, path, (int)card, (int)device, false);
    }
    // keepalived's own open (its output on this PCM, a box's `default` through the front door)
    // asks nothing of itself: a round trip to its own socket, bounded as a player's, came back
    // late on a loaded machine (or found no socket yet at the daemon's first open), and its
    // output then fell back to the slave's chain, where no player can be carried.
    bool daemon = stream == SND_PCM_STREAM_PLAYBACK && ckeepalived_pcm_is_daemon(secure_getenv("KEEPALIVED_DAEMON_PID"), (long)getpid());
    bool carry = stream == SND_PCM_STREAM_PLAYBACK && named && !slave && !daemon && !asked_above(card, device);
    if (lookup && !carry) {
        int err = snd_config_get_card(lookup);
        if (err < 0) return err;
    }

    // Before anything is asked: a loop would take the card for an open that cannot succeed.
    if (slave) {
        int err = refuse_loop(name, slave);
        if (err < 0) return err;
    }

    // Carried on keepalived's running stream if it can (issue 60): a playback stream of a card
    // the player named, no slave (whose chain decides its own formats), not inside another
    // keepalived PCM that asked for the device. Without a grant, on to the release below.
    if (carry) {
        int socket = -1;
        struct ckeepalived_pcm_grant grant;
        char path[SOCKET_PATH_MAX] = "";
        int granted = ask_carry((int)card, (int)device, deadline, &socket, &grant, path);
        // keepalived carries another player there: as a second open of the busy hw device.
        if (granted == 2) return -EBUSY;
        if (granted == 1) return carrier_open(pcmp, name, stream, mode, socket, &grant, path, (int)card, (int)device, true);
        // Not carried: hw's way from here on, its lookup of the card first, as without keepalived.
        if (lookup) {
            int err = snd_config_get_card(lookup);
            if (err < 0) return err;
        }
        // The release gets its own wait, as without keepalived's carrying: an old keepalived
        // answered "unknown request" at once, a silent one had the carry request's.
        started = monotonic_ns();
        deadline = started + (int64_t)timeout_ms * 1000000;
    }

    // keepalived's own output on a slave whose chain a player would be carried through plays on
    // the card's hw PCM under it, where players can be carried (it frames its signal itself on
    // an IEC958-only card); on any other slave (dmix, a sound server) it plays as a player would.
    if (slave && daemon && !asked_above(card, device)) {
        snd_config_t *chain = NULL;
        int carriable = carried_chain(root, slave, card, device, &chain);
        if (chain) snd_config_delete(chain);
        if (carriable > 0) {
            char hw[CKEEPALIVED_PCM_HW_NAME_MAX];
            if (ckeepalived_pcm_hw_name(hw, sizeof hw, (int)card, (int)device, (int)subdevice) < 0) return -EINVAL;
            return snd_pcm_open_lconf(pcmp, hw, stream, mode, root);
        }
    }

    // A player's open of a slave's chain carried on keepalived's stream if it can.
    if (slave && stream == SND_PCM_STREAM_PLAYBACK && !daemon && !asked_above(card, device)) {
        int carried = carry_slave(pcmp, name, root, slave, (int)card, (int)device, stream, mode, deadline);
        if (carried == 1) return 0;
        if (carried < 0) return carried;
        started = monotonic_ns();
        deadline = started + (int64_t)timeout_ms * 1000000;
    }

    // A slave is asked for by whoever configured it (the box's `default`), so its card is
    // asked for even when it came from defaults.pcm.card. Once per open: a keepalived PCM
    // inside another that asked for the same device asks nothing more.
    if (stream == SND_PCM_STREAM_PLAYBACK && (named || slave) && !daemon && !asked_above(card, device))
        ask_release((int)card, (int)device, started, deadline);

    if (slave) {
        // Opened as the caller would open it by name, in the caller's mode; returned as it is:
        // the chain under it decides its formats and framing itself.
        snd_pcm_t *opened;
        opening[opening_depth++] = (opening_level){name, slave, (int)card, (int)device};
        int err = snd_pcm_open_lconf(&opened, slave, stream, mode, root);
        opening_depth--;
        if (err < 0) return err;
        *pcmp = opened;
        return 0;
    }

    char hw[CKEEPALIVED_PCM_HW_NAME_MAX];
    if (ckeepalived_pcm_hw_name(hw, sizeof hw, (int)card, (int)device, (int)subdevice) < 0) return -EINVAL;
    // Through the configuration's pcm.hw, as `hw:…` itself: its defaults (the open does not
    // wait for a busy device, defaults.pcm.nonblock) and the caller's mode.
    snd_pcm_t *opened;
    int err = snd_pcm_open_lconf(&opened, hw, stream, mode, root);
    if (err < 0) return err;
    // Decided from what this device's hardware takes, not from its card's name: the same check
    // serves a Pi's vc4-hdmi, any other IEC958-only card, and the test's stand-in for one.
    return hand_over(pcmp, name, opened);
}
SND_PCM_PLUGIN_SYMBOL(keepalived)
