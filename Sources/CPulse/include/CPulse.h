// CPulse: libpulse, loaded with dlopen only when `--linger` asks for it. keepalived is never
// linked against libpulse: a headless box needs no libpulse0 (the package's dependencies come
// from what the binary links), and a daemon without --linger does not map it (its private memory
// is a measured feature). The .c file holds the dlsym table and thin wrappers with plain types;
// every decision is made in Swift (LingerWatcher, LingerStateMachine).
//
// Every function but cpulse_load and cpulse_mainloop_new/start/stop/free/lock/unlock must run
// with the main loop locked, or on its own thread (inside a callback).
#ifndef CPULSE_H
#define CPULSE_H

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
/// subscribed event (sinks, sink inputs, the server's defaults). NULL if libpulse refuses.
cpulse_context *cpulse_context_new(cpulse_mainloop *loop, const char *name,
                                   void (*state)(void *userdata), void (*changed)(void *userdata), void *userdata);
/// Connects to the default server (PULSE_SERVER, the user's runtime directory), never spawning
/// one. Returns 0, or a negative value (then cpulse_context_error tells why).
int cpulse_context_connect(cpulse_context *context);
int cpulse_context_state(cpulse_context *context);
/// The last error's text.
const char *cpulse_context_error(cpulse_context *context);
/// Subscribes to sink, sink-input and server events (delivered through `changed`).
void cpulse_context_subscribe(cpulse_context *context);
/// Disconnects and frees; no callback runs afterwards.
void cpulse_context_release(cpulse_context *context);

/// One sink input (a playing stream) as a query reports it.
typedef struct cpulse_sink_input {
    uint32_t index;
    uint32_t sink;
    /// The client that owns it (PA_INVALID_INDEX if none).
    uint32_t client;
    int corked;
    /// application.process.id, or NULL.
    const char *process_id;
    /// application.name, or NULL.
    const char *application;
} cpulse_sink_input;

/// One client (a connection to the server) as a query reports it.
typedef struct cpulse_client {
    uint32_t index;
    /// application.process.id, or NULL.
    const char *process_id;
} cpulse_client;

typedef struct cpulse_sink {
    uint32_t index;
    const char *name;
} cpulse_sink;

/// Lists the sink inputs: `each` once per input, then once with NULL at the end (also on error).
void cpulse_query_sink_inputs(cpulse_context *context, void (*each)(void *userdata, const cpulse_sink_input *input), void *userdata);
/// Lists the clients, the same way. PipeWire puts the process id on a native client (its ALSA
/// plug-in's), not on the stream.
void cpulse_query_clients(cpulse_context *context, void (*each)(void *userdata, const cpulse_client *client), void *userdata);
/// Lists the sinks, the same way.
void cpulse_query_sinks(cpulse_context *context, void (*each)(void *userdata, const cpulse_sink *sink), void *userdata);
/// The server's default sink name (NULL if none, or on error).
void cpulse_query_default_sink(cpulse_context *context, void (*done)(void *userdata, const char *name), void *userdata);

#ifdef __cplusplus
}
#endif

#endif
