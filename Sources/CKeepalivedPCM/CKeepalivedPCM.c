// The `keepalived` PCM type: ask keepalived to release a card's device, then open that device's
// hw PCM for the player (framed into IEC958 subframes when that is all the hardware takes). See
// CKeepalivedPCM.h.
#define _GNU_SOURCE
// alsa-lib's headers declare a plug-in's versioned entry symbol for a shared object only when PIC
// is defined (libtool's -DPIC); without it they expect alsa-lib's static build, and the object
// would need a symbol libasound.so does not have. This file is only ever a plug-in or a test's.
#ifndef PIC
#define PIC 1
#endif
#include "CKeepalivedPCM.h"

#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
    writer w = {buffer, size, 0, false};
    char head[96];
    int length = snprintf(head, sizeof head, "{\"request\":\"release\",\"card\":%d,\"device\":%d,\"program\":\"",
                          card, device);
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

/// Hands `hw` to the player in `*pcmp`: as it is, or inside alsa-lib's iec958 PCM (which then
/// owns it) when its hardware takes IEC958 subframes only. On failure `hw` is closed.
static int hand_over(snd_pcm_t **pcmp, const char *name, snd_pcm_t *hw) {
    enum ckeepalived_pcm_framing framing = ckeepalived_pcm_framing_for(hardware_formats(hw));
    if (framing == CKEEPALIVED_PCM_FRAMING_NONE) {
        *pcmp = hw;
        return 0;
    }
    unsigned char status[CKEEPALIVED_PCM_IEC958_STATUS_BYTES], preambles[3];
    ckeepalived_pcm_iec958_status(status);
    ckeepalived_pcm_iec958_preambles(preambles);
    snd_pcm_format_t format = framing == CKEEPALIVED_PCM_FRAMING_IEC958_LE ? SND_PCM_FORMAT_IEC958_SUBFRAME_LE
                                                                           : SND_PCM_FORMAT_IEC958_SUBFRAME_BE;
    // hdmi_mode as vc4-hdmi.conf sets it: it only changes how 8-channel non-audio streams are
    // counted, which a player's PCM never is, but keeps the framing exactly `hdmi:`'s.
    int err = snd_pcm_iec958_open(pcmp, name, format, hw, 1, status, preambles, 1);
    if (err < 0) {
        SNDERR("keepalived: cannot frame %s into IEC958 subframes: %s", name ? name : "the device", snd_strerror(err));
        snd_pcm_close(hw);
    }
    return err;
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

// MARK: - Asking keepalived

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

/// The system service's socket; the user's daemon's is $XDG_RUNTIME_DIR/keepalived/control.sock.
#define SYSTEM_SOCKET "/run/keepalived-audio/control.sock"
#define REPLY_MAX 2048

/// One control socket asked to release the device.
typedef struct connection {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
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

/// Asks every keepalived listening (the one at $KEEPALIVED_SOCKET, else the system service's
/// and the user's) to release `card`'s `device`, and waits for their answers until `deadline`
/// (CLOCK_MONOTONIC ns; asked at `started`), or as long as a keepalived that switches the power
/// on first asks (`{"ok":true,"wait":N}`). Reports refusals and silence with SNDERR; fails nothing.
static void ask_release(int card, int device, int64_t started, int64_t deadline) {
    char line[CKEEPALIVED_PCM_REQUEST_MAX];
    int length = ckeepalived_pcm_request_line(line, sizeof line, card, device, program_invocation_short_name);
    if (length < 0) return;

    connection connections[2];
    size_t count = 0;
    const char *chosen = secure_getenv("KEEPALIVED_SOCKET");
    if (chosen && *chosen) {
        add_socket(connections, &count, chosen, "");
    } else {
        add_socket(connections, &count, SYSTEM_SOCKET, "");
        const char *runtime = secure_getenv("XDG_RUNTIME_DIR");
        if (runtime && *runtime) add_socket(connections, &count, runtime, "/keepalived/control.sock");
    }
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
            // As hw does: an index, or a card's id through snd_card_get_index, with its error.
            int err = snd_config_get_card(n);
            if (err < 0) return err;
            card = err;
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

    // Before anything is asked: a loop would take the card for an open that cannot succeed.
    if (slave) {
        int err = refuse_loop(name, slave);
        if (err < 0) return err;
    }

    // A slave is asked for by whoever configured it (the box's `default`), so its card is
    // asked for even when it came from defaults.pcm.card. Once per open: a keepalived PCM
    // inside another that asked for the same device asks nothing more.
    if (stream == SND_PCM_STREAM_PLAYBACK && (named || slave) && !asked_above(card, device))
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
