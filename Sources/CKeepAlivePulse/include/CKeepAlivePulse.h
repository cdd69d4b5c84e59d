// CKeepAlivePulse: libpulse, loaded with dlopen only when keepalived talks to a sound server: `--linger`,
// a selection's sink watcher (and `keepalived devices`), or a stream into a sink (the KeepAlive
// library's ServerSinkPCM, for an output with a serverSink). keepalived is never linked against
// libpulse: a headless box needs no libpulse0 (the package's dependencies come from what the
// binary links), and a daemon that talks to no sound server does not map it (its private memory
// is a measured feature). The .c file holds the dlsym table and thin wrappers with plain types;
// every decision is made in Swift (SoundServerConnection, ServerSinkPCM, ServerListing,
// SinkWatcher, LingerWatcher). A process makes one main loop and one context at a time
// (SoundServerConnection), shared by every sink's stream and every watcher.
//
// Every function but cpulse_load and cpulse_mainloop_new/set_name/start/stop/free/lock/unlock
// must run with the main loop locked, or on its own thread (inside a callback).
#ifndef CKEEPALIVE_PULSE_H
#define CKEEPALIVE_PULSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Loads libpulse.so.0 and resolves the functions used. Returns NULL on success (also when it
/// was loaded before), or dlerror's text, valid until the next call.
const char *cpulse_load(void);

typedef struct cpulse_mainloop cpulse_mainloop;
typedef struct cpulse_context cpulse_context;
typedef struct cpulse_timer cpulse_timer;

/// A pa_threaded_mainloop: one thread, blocked in poll while nothing happens.
cpulse_mainloop *cpulse_mainloop_new(void);
/// Names its thread (15 bytes kept); call before cpulse_mainloop_start. A libpulse older than 5.0
/// keeps its own name, "threaded-ml".
void cpulse_mainloop_set_name(cpulse_mainloop *loop, const char *name);
/// Starts its thread. Returns 0, or a negative value.
int cpulse_mainloop_start(cpulse_mainloop *loop);
/// Stops and joins its thread; call unlocked, never from the thread itself.
void cpulse_mainloop_stop(cpulse_mainloop *loop);
void cpulse_mainloop_free(cpulse_mainloop *loop);
void cpulse_mainloop_lock(cpulse_mainloop *loop);
void cpulse_mainloop_unlock(cpulse_mainloop *loop);

/// A one-shot timer on the main loop's monotonic clock, created disarmed; `callback` runs on the
/// loop's thread.
cpulse_timer *cpulse_timer_new(cpulse_mainloop *loop, void (*callback)(void *userdata), void *userdata);
/// Fires once, `microseconds` from now (rearming replaces the previous deadline).
void cpulse_timer_arm(cpulse_mainloop *loop, cpulse_timer *timer, uint64_t microseconds);
void cpulse_timer_disarm(cpulse_mainloop *loop, cpulse_timer *timer);
void cpulse_timer_free(cpulse_mainloop *loop, cpulse_timer *timer);

/// The context's state, reduced to what keepalived acts on.
enum {
    CPULSE_CONNECTING = 0,
    CPULSE_READY = 1,
    CPULSE_FAILED = 2,
    CPULSE_TERMINATED = 3,
};

/// A client connection, with its callbacks set: `state` on every state change, `changed` on every
/// subscribed event, with the facility it is about (one CPULSE_WATCH_* bit, 0 for another
/// facility). NULL if libpulse refuses.
cpulse_context *cpulse_context_new(cpulse_mainloop *loop, const char *name, void (*state)(void *userdata),
                                   void (*changed)(void *userdata, unsigned facility), void *userdata);
/// Connects to the default server (PULSE_SERVER, the user's runtime directory), never spawning
/// one. Returns 0, or a negative value (then cpulse_context_error tells why).
int cpulse_context_connect(cpulse_context *context);
int cpulse_context_state(cpulse_context *context);
/// The last error's text.
const char *cpulse_context_error(cpulse_context *context);
/// What a context watches: `changed` runs for each event of these facilities.
enum {
    CPULSE_WATCH_SINKS = 1,
    CPULSE_WATCH_SINK_INPUTS = 2,
    CPULSE_WATCH_SERVER = 4,
    CPULSE_WATCH_CARDS = 8,
};

/// Subscribes to the events of `facilities` (CPULSE_WATCH_* or'ed), delivered through `changed`;
/// replaces the previous subscription.
void cpulse_context_subscribe(cpulse_context *context, unsigned facilities);
/// The queries sent with `userdata` (cpulse_list) that are not answered yet end without calling
/// back: for a user of a shared context that goes away while the context stays.
void cpulse_context_forget(cpulse_context *context, void *userdata);
/// Disconnects and frees; no callback runs afterwards.
void cpulse_context_release(cpulse_context *context);

/// One sink input (a playing stream) as a query reports it.
typedef struct cpulse_sink_input {
    uint32_t index;
    uint32_t sink;
    /// The client that owns it (PA_INVALID_INDEX if none).
    uint32_t client;
    int corked;
    /// The stream's sample rate.
    uint32_t rate;
    /// application.process.id, or NULL.
    const char *process_id;
    /// application.name, or NULL.
    const char *application;
    /// keepalived.sink: the sink a stream of keepalived's asked for (cpulse_stream_new's
    /// `home`), or NULL.
    const char *home;
} cpulse_sink_input;

/// One client (a connection to the server) as a query reports it.
typedef struct cpulse_client {
    uint32_t index;
    /// application.process.id, or NULL. PipeWire puts it on a native client (its ALSA plug-in's),
    /// not on the stream.
    const char *process_id;
} cpulse_client;

/// A sink's state, reduced to what `devices` and `status` show.
enum {
    CPULSE_SINK_OTHER = 0,
    CPULSE_SINK_RUNNING = 1,
    CPULSE_SINK_IDLE = 2,
    CPULSE_SINK_SUSPENDED = 3,
};

/// What a port is (pa_device_port_type_t, libpulse 14 and later; 0 when the server does not say).
enum {
    CPULSE_PORT_UNKNOWN = 0,
    CPULSE_PORT_SPDIF = 9,
    CPULSE_PORT_HDMI = 10,
    CPULSE_PORT_USB = 14,
    CPULSE_PORT_BLUETOOTH = 15,
};

/// One sink as a query reports it. Strings live as long as the callback; NULL when absent.
typedef struct cpulse_sink {
    uint32_t index;
    const char *name;
    const char *description;
    /// The server module that made it (module-alsa-card.c, module-null-sink.c, PipeWire's names).
    const char *driver;
    int state;
    /// PA_SINK_HARDWARE: the sink plays to a device, not into another sink or nowhere.
    int hardware;
    const char *active_port;
    int active_port_type;
    /// The rate the sink mixes at: a stream at it is mixed without a resampler.
    uint32_t rate;
    /// The sink's property list, read with cpulse_property.
    const void *properties;
} cpulse_sink;

/// One card (a device the server has profiles for) as a query reports it.
typedef struct cpulse_card {
    uint32_t index;
    const char *name;
    const char *active_profile;
    const void *properties;
} cpulse_card;

/// The server's answer to "who are you".
typedef struct cpulse_server {
    /// "pulseaudio", or "PulseAudio (on PipeWire 0.3.65)".
    const char *name;
    const char *version;
    const char *default_sink;
} cpulse_server;

/// One property of a sink's or card's property list (`alsa.card`, `device.bus`), or NULL.
const char *cpulse_property(const void *properties, const char *key);

/// What cpulse_list lists; the entry its callback gets for each.
enum {
    /// One cpulse_server.
    CPULSE_LIST_SERVER = 0,
    /// A cpulse_sink per sink.
    CPULSE_LIST_SINKS = 1,
    /// A cpulse_card per card.
    CPULSE_LIST_CARDS = 2,
    /// A cpulse_client per client.
    CPULSE_LIST_CLIENTS = 3,
    /// A cpulse_sink_input per sink input.
    CPULSE_LIST_SINK_INPUTS = 4,
};

/// Lists `what`: `each` once per entry (of the type CPULSE_LIST_* names, living as long as the
/// call), then once with NULL at the end, also when the list failed midway. The server's one
/// entry comes also when it does not answer, its fields NULL. Returns 0, or -1 when the query
/// cannot be sent (then `each` never runs).
int cpulse_list(cpulse_context *context, int what, void (*each)(void *userdata, const void *entry), void *userdata);

/// Asks the server to move sink input `index` to the sink called `sink`, without waiting for
/// its answer (the next sink input event shows where it is). Returns 0, or -1 when the request
/// cannot be sent.
int cpulse_move_sink_input(cpulse_context *context, uint32_t index, const char *sink);

/// Wakes the thread waiting in cpulse_mainloop_wait; call on the loop's thread (in a callback).
void cpulse_mainloop_signal(cpulse_mainloop *loop);
/// Unlocks the loop until a callback calls cpulse_mainloop_signal; call with the loop locked,
/// never from its own thread.
void cpulse_mainloop_wait(cpulse_mainloop *loop);
/// Whether the calling thread is the loop's own (in a callback): for the checks of who may touch
/// what the loop owns.
int cpulse_mainloop_in_thread(cpulse_mainloop *loop);

/// A playback stream: keepalived's own, so that it asks the server for nothing it does not use
/// (ALSA's pulse plug-in asks for timing updates every 1.5 s, which no keep-alive reads).
typedef struct cpulse_stream cpulse_stream;

/// The sample formats a stream carries: pa_sample_format_t's values (CKeepAlivePulse.c checks them).
enum {
    CPULSE_FORMAT_U8 = 0,
    CPULSE_FORMAT_S16LE = 3,
    CPULSE_FORMAT_S16BE = 4,
    CPULSE_FORMAT_FLOAT32LE = 5,
    CPULSE_FORMAT_FLOAT32BE = 6,
    CPULSE_FORMAT_S32LE = 7,
    CPULSE_FORMAT_S32BE = 8,
    CPULSE_FORMAT_S24LE = 9,
    CPULSE_FORMAT_S24BE = 10,
    CPULSE_FORMAT_S24_32LE = 11,
    CPULSE_FORMAT_S24_32BE = 12,
};

/// A playback stream on a ready context, not connected yet, with ALSA's channel order. `state`
/// runs on every state change, `request` when the server asks for more, `underflow` when its
/// buffer ran dry; all on the loop's thread. NULL if libpulse refuses the format. `home`: the
/// sink it is for (its `keepalived.sink` property, which a listing reads back: a stream the
/// server moved before keepalived first saw it is still known by where it belongs), or NULL.
cpulse_stream *cpulse_stream_new(cpulse_context *context, const char *name, const char *home, int format, uint32_t rate, uint8_t channels,
                                 void (*state)(void *userdata), void (*request)(void *userdata),
                                 void (*underflow)(void *userdata), void *userdata);
/// Connects the stream to the sink called `sink` (NULL: the server's default) with these buffer
/// metrics in bytes and no flags: no timing updates, no interpolation. Returns 0, or a negative
/// value.
int cpulse_stream_connect(cpulse_stream *stream, const char *sink, uint32_t target, uint32_t prebuffer, uint32_t request);
/// The stream's state (CPULSE_CONNECTING, CPULSE_READY, CPULSE_FAILED or CPULSE_TERMINATED).
int cpulse_stream_state(cpulse_stream *stream);
/// The bytes the server takes now, or -1 when the stream is not ready.
int64_t cpulse_stream_writable(cpulse_stream *stream);
/// Queues `bytes` bytes (copied). Returns 0, or a negative value.
int cpulse_stream_write(cpulse_stream *stream, const void *data, size_t bytes);
/// Starts playing now, whatever is queued (uncork and trigger), without waiting for the server's
/// answer. Returns 0, or -1 when the requests cannot be sent.
int cpulse_stream_start(cpulse_stream *stream);
/// Stops and drops what is queued (cork and flush), without waiting. Returns 0, or -1.
int cpulse_stream_stop(cpulse_stream *stream);
/// The write index at which the server last ran dry, or -1 if it never did.
int64_t cpulse_stream_underflow_index(cpulse_stream *stream);
/// The stream's index among the server's sink inputs; valid once it is ready.
uint32_t cpulse_stream_index(cpulse_stream *stream);
/// The index of the sink it plays into; valid once it is ready.
uint32_t cpulse_stream_sink(cpulse_stream *stream);
/// Sets properties of the stream on the server, replacing those of the same key: `properties`
/// in pa_proplist_from_string's form (`node.force-rate="48000" node.rate="1/48000"`). `done` runs
/// on the loop's thread with the server's answer (1: applied), unless the stream is released
/// first. One update at a time: returns -1 while one is not answered, or when it cannot be sent.
int cpulse_stream_update_properties(cpulse_stream *stream, const char *properties, void (*done)(void *userdata, int success),
                                    void *userdata);
/// Disconnects and frees; no callback runs afterwards.
void cpulse_stream_release(cpulse_stream *stream);

#ifdef __cplusplus
}
#endif

#endif
