// CKeepAliveMosquitto: Debian's libmosquitto (MQTT 3.1.1 and 5, TLS), loaded with dlopen only when
// keepalived is given `--mqtt`, as libpulse is (CKeepAlivePulse): keepalived is never linked
// against it, so a box without MQTT maps nothing of it and the package only suggests
// libmosquitto1. The .c file holds the dlsym table and thin wrappers with plain types; every
// decision (when to connect, back off, publish) is made in Swift (MQTTConnectionStateMachine,
// MQTTPublisher), on the one thread that owns the client: libmosquitto's own network thread
// (mosquitto_loop_start) is not used, so its socket is polled beside the publisher's doorbell
// and nothing wakes while nothing changes but the protocol's keep-alive ping.
#ifndef CKEEPALIVE_MOSQUITTO_H
#define CKEEPALIVE_MOSQUITTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Loads libmosquitto.so.1, resolves the functions used and initialises the library once.
/// Returns NULL on success (also when it was loaded before), or a text saying what failed
/// (dlerror's), valid until the next call.
const char *cmosq_load(void);
/// The loaded library's version as major * 1000000 + minor * 1000 + revision.
int cmosq_version(void);

typedef struct cmosq_client cmosq_client;

/// What the callbacks are told; every callback runs inside cmosq_loop_read/write/misc or
/// cmosq_disconnect on the caller's thread, never on a thread of libmosquitto's.
typedef struct cmosq_callbacks {
    /// The broker's CONNACK: `code` 0 accepted, else the broker's refusal (cmosq_connack_text).
    void (*connected)(void *userdata, int code);
    /// The connection ended: `code` 0 for a disconnect asked for, else why (cmosq_error_text).
    void (*disconnected)(void *userdata, int code);
    /// A message on a subscribed topic; `topic` is NUL-terminated, `payload` `length` bytes
    /// (not terminated), both valid during the call only; `retained`: the broker's stored copy;
    /// `qos` 1 when the client acknowledges it (a PUBACK written in the same call).
    void (*message)(void *userdata, const char *topic, const void *payload, size_t length, bool retained, int qos);
    /// The broker acknowledged the QoS 1 message `mid` (its PUBACK).
    void (*published)(void *userdata, int mid);
} cmosq_callbacks;

/// A client with `client_id` (MQTT 3.1.1, a clean session), its callbacks set; NULL when
/// libmosquitto refuses (no memory, an id it rejects).
cmosq_client *cmosq_client_new(const char *client_id, cmosq_callbacks callbacks, void *userdata);
void cmosq_client_free(cmosq_client *client);

/// Credentials for the next connect; `password` may be NULL. Returns 0 or a MOSQ_ERR_* code.
int cmosq_credentials(cmosq_client *client, const char *user, const char *password);
/// TLS with `ca_file` (NULL: the system's CAs, /etc/ssl/certs) and an optional client
/// certificate and key; the broker's name is verified. Returns 0 or a MOSQ_ERR_* code.
int cmosq_tls(cmosq_client *client, const char *ca_file, const char *cert_file, const char *key_file);
/// The Last Will: `payload` retained at QoS 1 on `topic` when the connection ends without a
/// DISCONNECT. Returns 0 or a MOSQ_ERR_* code.
int cmosq_will(cmosq_client *client, const char *topic, const char *payload);

/// Starts connecting without blocking on the broker (the name is resolved here, which may block
/// on DNS). Returns 0 or a MOSQ_ERR_* code; the outcome comes through `connected` or
/// `disconnected`. Again after a disconnect: the same broker and settings.
int cmosq_connect(cmosq_client *client, const char *host, int port, int keepalive_seconds);
/// Sends a DISCONNECT (no Last Will then) and closes the socket.
int cmosq_disconnect(cmosq_client *client);

/// The socket to poll (-1 while there is none), and whether it waits to be written.
int cmosq_socket(cmosq_client *client);
bool cmosq_wants_write(cmosq_client *client);
/// Reads what arrived, writes what is queued, and sends the keep-alive ping when due. Each
/// returns 0 or a MOSQ_ERR_* code (then the connection is lost: `disconnected` ran).
int cmosq_loop_read(cmosq_client *client);
int cmosq_loop_write(cmosq_client *client);
int cmosq_loop_misc(cmosq_client *client);

/// Publishes `length` bytes on `topic` at QoS 1, its message id in `*mid` (the `published`
/// callback's); refused while not connected (MOSQ_ERR_NO_CONN): the caller republishes
/// everything on its next connect.
int cmosq_publish(cmosq_client *client, const char *topic, const void *payload, size_t length, bool retain, int *mid);
int cmosq_subscribe(cmosq_client *client, const char *pattern);

/// libmosquitto's text for a MOSQ_ERR_* code, and for a CONNACK's refusal.
const char *cmosq_error_text(int code);
const char *cmosq_connack_text(int code);

#ifdef __cplusplus
}
#endif

#endif
