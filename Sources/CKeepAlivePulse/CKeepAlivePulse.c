// See CKeepAlivePulse.h. The pulse headers give the types and signatures; no pa_* symbol is linked: each
// call goes through the table dlsym fills, so the binary's dependencies stay libasound and glibc.
#include "CKeepAlivePulse.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <pulse/pulseaudio.h>

// The functions keepalived uses: (return type, name, parameters).
#define CPULSE_FUNCTIONS(X)                                                                              \
    X(pa_threaded_mainloop *, pa_threaded_mainloop_new, (void))                                          \
    X(void, pa_threaded_mainloop_free, (pa_threaded_mainloop *))                                         \
    X(int, pa_threaded_mainloop_start, (pa_threaded_mainloop *))                                         \
    X(void, pa_threaded_mainloop_stop, (pa_threaded_mainloop *))                                         \
    X(void, pa_threaded_mainloop_lock, (pa_threaded_mainloop *))                                         \
    X(void, pa_threaded_mainloop_unlock, (pa_threaded_mainloop *))                                       \
    X(pa_mainloop_api *, pa_threaded_mainloop_get_api, (pa_threaded_mainloop *))                         \
    X(pa_usec_t, pa_rtclock_now, (void))                                                                 \
    X(struct timeval *, pa_timeval_rtstore, (struct timeval *, pa_usec_t, int))                          \
    X(pa_context *, pa_context_new, (pa_mainloop_api *, const char *))                                   \
    X(void, pa_context_unref, (pa_context *))                                                            \
    X(int, pa_context_connect, (pa_context *, const char *, pa_context_flags_t, const pa_spawn_api *))  \
    X(void, pa_context_disconnect, (pa_context *))                                                       \
    X(void, pa_context_set_state_callback, (pa_context *, pa_context_notify_cb_t, void *))               \
    X(pa_context_state_t, pa_context_get_state, (const pa_context *))                                   \
    X(int, pa_context_errno, (const pa_context *))                                                       \
    X(const char *, pa_strerror, (int))                                                                  \
    X(void, pa_context_set_subscribe_callback, (pa_context *, pa_context_subscribe_cb_t, void *))        \
    X(pa_operation *, pa_context_subscribe, (pa_context *, pa_subscription_mask_t, pa_context_success_cb_t, void *)) \
    X(pa_operation *, pa_context_get_sink_input_info_list, (pa_context *, pa_sink_input_info_cb_t, void *)) \
    X(pa_operation *, pa_context_get_client_info_list, (pa_context *, pa_client_info_cb_t, void *))     \
    X(pa_operation *, pa_context_get_sink_info_list, (pa_context *, pa_sink_info_cb_t, void *))         \
    X(pa_operation *, pa_context_get_server_info, (pa_context *, pa_server_info_cb_t, void *))          \
    X(pa_operation *, pa_context_get_card_info_list, (pa_context *, pa_card_info_cb_t, void *))         \
    X(pa_operation *, pa_context_move_sink_input_by_name, (pa_context *, uint32_t, const char *, pa_context_success_cb_t, void *)) \
    X(void, pa_operation_unref, (pa_operation *))                                                        \
    X(const char *, pa_proplist_gets, (const pa_proplist *, const char *))                               \
    X(void, pa_threaded_mainloop_signal, (pa_threaded_mainloop *, int))                                  \
    X(void, pa_threaded_mainloop_wait, (pa_threaded_mainloop *))                                         \
    X(int, pa_threaded_mainloop_in_thread, (pa_threaded_mainloop *))                                    \
    X(pa_channel_map *, pa_channel_map_init_auto, (pa_channel_map *, unsigned, pa_channel_map_def_t))    \
    X(pa_stream *, pa_stream_new_with_proplist, (pa_context *, const char *, const pa_sample_spec *, const pa_channel_map *, pa_proplist *)) \
    X(void, pa_stream_unref, (pa_stream *))                                                              \
    X(void, pa_stream_set_state_callback, (pa_stream *, pa_stream_notify_cb_t, void *))                  \
    X(void, pa_stream_set_write_callback, (pa_stream *, pa_stream_request_cb_t, void *))                 \
    X(void, pa_stream_set_underflow_callback, (pa_stream *, pa_stream_notify_cb_t, void *))              \
    X(int, pa_stream_connect_playback, (pa_stream *, const char *, const pa_buffer_attr *, pa_stream_flags_t, const pa_cvolume *, pa_stream *)) \
    X(int, pa_stream_disconnect, (pa_stream *))                                                          \
    X(pa_stream_state_t, pa_stream_get_state, (const pa_stream *))                                       \
    X(size_t, pa_stream_writable_size, (const pa_stream *))                                              \
    X(int, pa_stream_write, (pa_stream *, const void *, size_t, pa_free_cb_t, int64_t, pa_seek_mode_t))   \
    X(pa_operation *, pa_stream_cork, (pa_stream *, int, pa_stream_success_cb_t, void *))                \
    X(pa_operation *, pa_stream_trigger, (pa_stream *, pa_stream_success_cb_t, void *))                  \
    X(pa_operation *, pa_stream_flush, (pa_stream *, pa_stream_success_cb_t, void *))                    \
    X(int64_t, pa_stream_get_underflow_index, (const pa_stream *))                                      \
    X(uint32_t, pa_stream_get_index, (const pa_stream *))                                                \
    X(uint32_t, pa_stream_get_device_index, (const pa_stream *))                                         \
    X(pa_operation *, pa_stream_proplist_update, (pa_stream *, pa_update_mode_t, pa_proplist *, pa_stream_success_cb_t, void *)) \
    X(pa_proplist *, pa_proplist_from_string, (const char *))                                            \
    X(pa_proplist *, pa_proplist_new, (void))                                                            \
    X(int, pa_proplist_sets, (pa_proplist *, const char *, const char *))                                \
    X(void, pa_proplist_free, (pa_proplist *))                                                           \
    X(void, pa_operation_cancel, (pa_operation *))

// The sink a stream of keepalived's is for, on the stream itself (see cpulse_stream_new).
#define CPULSE_PROP_HOME "keepalived.sink"

static struct {
#define CPULSE_FIELD(type, name, parameters) type(*name) parameters;
    CPULSE_FUNCTIONS(CPULSE_FIELD)
#undef CPULSE_FIELD
} fn;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
/// libpulse 5.0 and later; optional: without it the loop's thread keeps libpulse's name.
static void (*set_mainloop_name)(pa_threaded_mainloop *, const char *);

const char *cpulse_load(void) {
    const char *failure = NULL;
    pthread_mutex_lock(&load_lock);
    if (!loaded) {
        // Never closed: libpulse registers atexit handlers and thread-local state.
        void *library = dlopen("libpulse.so.0", RTLD_NOW | RTLD_LOCAL);
        if (!library) {
            failure = dlerror();
        } else {
#define CPULSE_RESOLVE(type, name, parameters)                       \
    if (!failure && !(fn.name = (type(*) parameters)dlsym(library, #name))) failure = dlerror();
            CPULSE_FUNCTIONS(CPULSE_RESOLVE)
#undef CPULSE_RESOLVE
            loaded = failure == NULL;
            if (loaded) set_mainloop_name = (void (*)(pa_threaded_mainloop *, const char *))dlsym(library, "pa_threaded_mainloop_set_name");
        }
    }
    pthread_mutex_unlock(&load_lock);
    return failure;
}

struct cpulse_mainloop {
    pa_threaded_mainloop *loop;
    pa_mainloop_api *api;
};

cpulse_mainloop *cpulse_mainloop_new(void) {
    cpulse_mainloop *result = calloc(1, sizeof *result);
    if (!result) return NULL;
    result->loop = fn.pa_threaded_mainloop_new();
    if (!result->loop) {
        free(result);
        return NULL;
    }
    result->api = fn.pa_threaded_mainloop_get_api(result->loop);
    return result;
}

void cpulse_mainloop_set_name(cpulse_mainloop *loop, const char *name) {
    if (set_mainloop_name) set_mainloop_name(loop->loop, name);
}

int cpulse_mainloop_start(cpulse_mainloop *loop) { return fn.pa_threaded_mainloop_start(loop->loop); }
void cpulse_mainloop_stop(cpulse_mainloop *loop) { fn.pa_threaded_mainloop_stop(loop->loop); }
void cpulse_mainloop_lock(cpulse_mainloop *loop) { fn.pa_threaded_mainloop_lock(loop->loop); }
void cpulse_mainloop_unlock(cpulse_mainloop *loop) { fn.pa_threaded_mainloop_unlock(loop->loop); }

void cpulse_mainloop_free(cpulse_mainloop *loop) {
    fn.pa_threaded_mainloop_free(loop->loop);
    free(loop);
}

struct cpulse_timer {
    pa_time_event *event;
    void (*callback)(void *);
    void *userdata;
};

static void timer_fired(pa_mainloop_api *api, pa_time_event *event, const struct timeval *tv, void *userdata) {
    (void)tv;
    cpulse_timer *timer = userdata;
    // One-shot: disarmed before the callback, which may arm it again.
    api->time_restart(event, NULL);
    timer->callback(timer->userdata);
}

cpulse_timer *cpulse_timer_new(cpulse_mainloop *loop, void (*callback)(void *), void *userdata) {
    cpulse_timer *timer = calloc(1, sizeof *timer);
    if (!timer) return NULL;
    timer->callback = callback;
    timer->userdata = userdata;
    struct timeval tv;
    fn.pa_timeval_rtstore(&tv, fn.pa_rtclock_now() + 3600ULL * 1000000ULL, 1);
    timer->event = loop->api->time_new(loop->api, &tv, timer_fired, timer);
    if (!timer->event) {
        free(timer);
        return NULL;
    }
    loop->api->time_restart(timer->event, NULL);
    return timer;
}

void cpulse_timer_arm(cpulse_mainloop *loop, cpulse_timer *timer, uint64_t microseconds) {
    struct timeval tv;
    // The monotonic clock: a wall-clock step never moves a deadline.
    fn.pa_timeval_rtstore(&tv, fn.pa_rtclock_now() + microseconds, 1);
    loop->api->time_restart(timer->event, &tv);
}

void cpulse_timer_disarm(cpulse_mainloop *loop, cpulse_timer *timer) { loop->api->time_restart(timer->event, NULL); }

void cpulse_timer_free(cpulse_mainloop *loop, cpulse_timer *timer) {
    loop->api->time_free(timer->event);
    free(timer);
}

typedef struct query query;

struct cpulse_context {
    pa_context *context;
    void (*state)(void *);
    void (*changed)(void *, unsigned);
    void *userdata;
    /// Queries not answered yet: a connection that fails cancels them without a callback, so
    /// they are freed with the context.
    query *pending;
};

static void context_state(pa_context *context, void *userdata) {
    (void)context;
    cpulse_context *wrapper = userdata;
    wrapper->state(wrapper->userdata);
}

static void context_event(pa_context *context, pa_subscription_event_type_t type, uint32_t index, void *userdata) {
    (void)context, (void)index;
    cpulse_context *wrapper = userdata;
    unsigned facility = 0;
    switch (type & PA_SUBSCRIPTION_EVENT_FACILITY_MASK) {
    case PA_SUBSCRIPTION_EVENT_SINK: facility = CPULSE_WATCH_SINKS; break;
    case PA_SUBSCRIPTION_EVENT_SINK_INPUT: facility = CPULSE_WATCH_SINK_INPUTS; break;
    case PA_SUBSCRIPTION_EVENT_SERVER: facility = CPULSE_WATCH_SERVER; break;
    case PA_SUBSCRIPTION_EVENT_CARD: facility = CPULSE_WATCH_CARDS; break;
    default: break;
    }
    wrapper->changed(wrapper->userdata, facility);
}

cpulse_context *cpulse_context_new(cpulse_mainloop *loop, const char *name, void (*state)(void *),
                                   void (*changed)(void *, unsigned), void *userdata) {
    cpulse_context *wrapper = calloc(1, sizeof *wrapper);
    if (!wrapper) return NULL;
    wrapper->context = fn.pa_context_new(loop->api, name);
    if (!wrapper->context) {
        free(wrapper);
        return NULL;
    }
    wrapper->state = state;
    wrapper->changed = changed;
    wrapper->userdata = userdata;
    fn.pa_context_set_state_callback(wrapper->context, context_state, wrapper);
    fn.pa_context_set_subscribe_callback(wrapper->context, context_event, wrapper);
    return wrapper;
}

int cpulse_context_connect(cpulse_context *context) {
    return fn.pa_context_connect(context->context, NULL, PA_CONTEXT_NOAUTOSPAWN, NULL);
}

int cpulse_context_state(cpulse_context *context) {
    switch (fn.pa_context_get_state(context->context)) {
    case PA_CONTEXT_READY: return CPULSE_READY;
    case PA_CONTEXT_FAILED: return CPULSE_FAILED;
    case PA_CONTEXT_TERMINATED: return CPULSE_TERMINATED;
    default: return CPULSE_CONNECTING;
    }
}

const char *cpulse_context_error(cpulse_context *context) { return fn.pa_strerror(fn.pa_context_errno(context->context)); }

static void release_operation(pa_operation *operation) {
    if (operation) fn.pa_operation_unref(operation);
}

void cpulse_context_subscribe(cpulse_context *context, unsigned facilities) {
    pa_subscription_mask_t mask = PA_SUBSCRIPTION_MASK_NULL;
    if (facilities & CPULSE_WATCH_SINKS) mask |= PA_SUBSCRIPTION_MASK_SINK;
    if (facilities & CPULSE_WATCH_SINK_INPUTS) mask |= PA_SUBSCRIPTION_MASK_SINK_INPUT;
    if (facilities & CPULSE_WATCH_SERVER) mask |= PA_SUBSCRIPTION_MASK_SERVER;
    if (facilities & CPULSE_WATCH_CARDS) mask |= PA_SUBSCRIPTION_MASK_CARD;
    release_operation(fn.pa_context_subscribe(context->context, mask, NULL, NULL));
}

// Queries: the caller's callback and its data travel in one small allocation per query.
struct query {
    void (*each)(void *, const void *);
    void *userdata;
    cpulse_context *owner;
    query *next;
};

void cpulse_context_release(cpulse_context *context) {
    fn.pa_context_set_state_callback(context->context, NULL, NULL);
    fn.pa_context_set_subscribe_callback(context->context, NULL, NULL);
    fn.pa_context_disconnect(context->context);
    fn.pa_context_unref(context->context);
    while (context->pending) {
        query *next = context->pending->next;
        free(context->pending);
        context->pending = next;
    }
    free(context);
}

static query *query_new(cpulse_context *owner, void (*each)(void *, const void *), void *userdata) {
    query *result = malloc(sizeof *result);
    if (result) {
        result->each = each;
        result->userdata = userdata;
        result->owner = owner;
        result->next = owner->pending;
        owner->pending = result;
    }
    return result;
}

/// Unlinks and frees a query that was answered (or never sent).
static void query_free(query *q) {
    if (!q) return;
    for (query **link = &q->owner->pending; *link; link = &(*link)->next) {
        if (*link == q) {
            *link = q->next;
            break;
        }
    }
    free(q);
}

/// Ends a query: frees it, then tells the caller (with NULL), who may send its next query from
/// there; a forgotten query's caller hears nothing.
static void query_end(query *q) {
    void (*each)(void *, const void *) = q->each;
    void *data = q->userdata;
    query_free(q);
    if (each) each(data, NULL);
}

void cpulse_context_forget(cpulse_context *context, void *userdata) {
    for (query *q = context->pending; q; q = q->next) {
        if (q->userdata == userdata) q->each = NULL;
    }
}

static cpulse_sink_input sink_input_entry(const pa_sink_input_info *info) {
    return (cpulse_sink_input){
        .index = info->index,
        .sink = info->sink,
        .client = info->client,
        .corked = info->corked,
        .rate = info->sample_spec.rate,
        .process_id = fn.pa_proplist_gets(info->proplist, PA_PROP_APPLICATION_PROCESS_ID),
        .application = fn.pa_proplist_gets(info->proplist, PA_PROP_APPLICATION_NAME),
        .home = fn.pa_proplist_gets(info->proplist, CPULSE_PROP_HOME),
    };
}

static cpulse_client client_entry(const pa_client_info *info) {
    return (cpulse_client){.index = info->index, .process_id = fn.pa_proplist_gets(info->proplist, PA_PROP_APPLICATION_PROCESS_ID)};
}

static cpulse_sink sink_entry(const pa_sink_info *info) {
    int state = CPULSE_SINK_OTHER;
    switch (info->state) {
    case PA_SINK_RUNNING: state = CPULSE_SINK_RUNNING; break;
    case PA_SINK_IDLE: state = CPULSE_SINK_IDLE; break;
    case PA_SINK_SUSPENDED: state = CPULSE_SINK_SUSPENDED; break;
    default: break;
    }
    return (cpulse_sink){
        .index = info->index,
        .name = info->name,
        .description = info->description,
        .driver = info->driver,
        .state = state,
        .hardware = (info->flags & PA_SINK_HARDWARE) != 0,
        .active_port = info->active_port ? info->active_port->name : NULL,
        .active_port_type = info->active_port ? (int)info->active_port->type : CPULSE_PORT_UNKNOWN,
        .rate = info->sample_spec.rate,
        .properties = info->proplist,
    };
}

static cpulse_card card_entry(const pa_card_info *info) {
    return (cpulse_card){
        .index = info->index,
        .name = info->name,
        .active_profile = info->active_profile ? info->active_profile->name : NULL,
        .properties = info->proplist,
    };
}

// libpulse has one list callback type per info type: each of these hands one entry over, and
// ends the query at the end of the list (eol > 0) or when it failed (eol < 0, no info).
#define CPULSE_LIST_CALLBACK(name, info_type, entry_type, convert)                               \
    static void name(pa_context *context, const info_type *info, int eol, void *userdata) {      \
        (void)context;                                                                          \
        query *q = userdata;                                                                    \
        if (eol || !info) {                                                                     \
            query_end(q);                                                                       \
            return;                                                                             \
        }                                                                                       \
        if (!q->each) return;                                                                   \
        entry_type entry = convert(info);                                                       \
        q->each(q->userdata, &entry);                                                           \
    }

CPULSE_LIST_CALLBACK(sink_input_listed, pa_sink_input_info, cpulse_sink_input, sink_input_entry)
CPULSE_LIST_CALLBACK(client_listed, pa_client_info, cpulse_client, client_entry)
CPULSE_LIST_CALLBACK(sink_listed, pa_sink_info, cpulse_sink, sink_entry)
CPULSE_LIST_CALLBACK(card_listed, pa_card_info, cpulse_card, card_entry)
#undef CPULSE_LIST_CALLBACK

static void server_listed(pa_context *context, const pa_server_info *info, void *userdata) {
    (void)context;
    query *q = userdata;
    // One entry, also when the server did not answer: the caller starts its listing afresh there.
    cpulse_server server = {0};
    if (info) server = (cpulse_server){.name = info->server_name, .version = info->server_version, .default_sink = info->default_sink_name};
    if (q->each) q->each(q->userdata, &server);
    query_end(q);
}

const char *cpulse_property(const void *properties, const char *key) {
    return properties ? fn.pa_proplist_gets(properties, key) : NULL;
}

int cpulse_list(cpulse_context *context, int what, void (*each)(void *, const void *), void *userdata) {
    query *q = query_new(context, each, userdata);
    if (!q) return -1;
    pa_context *c = context->context;
    pa_operation *operation = NULL;
    switch (what) {
    case CPULSE_LIST_SERVER: operation = fn.pa_context_get_server_info(c, server_listed, q); break;
    case CPULSE_LIST_SINKS: operation = fn.pa_context_get_sink_info_list(c, sink_listed, q); break;
    case CPULSE_LIST_CARDS: operation = fn.pa_context_get_card_info_list(c, card_listed, q); break;
    case CPULSE_LIST_CLIENTS: operation = fn.pa_context_get_client_info_list(c, client_listed, q); break;
    case CPULSE_LIST_SINK_INPUTS: operation = fn.pa_context_get_sink_input_info_list(c, sink_input_listed, q); break;
    default: break;
    }
    if (!operation) {
        query_free(q);
        return -1;
    }
    fn.pa_operation_unref(operation);
    return 0;
}

int cpulse_move_sink_input(cpulse_context *context, uint32_t index, const char *sink) {
    pa_operation *operation = fn.pa_context_move_sink_input_by_name(context->context, index, sink, NULL, NULL);
    if (!operation) return -1;
    fn.pa_operation_unref(operation);
    return 0;
}

void cpulse_mainloop_signal(cpulse_mainloop *loop) { fn.pa_threaded_mainloop_signal(loop->loop, 0); }
void cpulse_mainloop_wait(cpulse_mainloop *loop) { fn.pa_threaded_mainloop_wait(loop->loop); }
int cpulse_mainloop_in_thread(cpulse_mainloop *loop) { return fn.pa_threaded_mainloop_in_thread(loop->loop); }

_Static_assert(CPULSE_FORMAT_U8 == PA_SAMPLE_U8 && CPULSE_FORMAT_S16LE == PA_SAMPLE_S16LE &&
                   CPULSE_FORMAT_S16BE == PA_SAMPLE_S16BE && CPULSE_FORMAT_FLOAT32LE == PA_SAMPLE_FLOAT32LE &&
                   CPULSE_FORMAT_FLOAT32BE == PA_SAMPLE_FLOAT32BE && CPULSE_FORMAT_S32LE == PA_SAMPLE_S32LE &&
                   CPULSE_FORMAT_S32BE == PA_SAMPLE_S32BE && CPULSE_FORMAT_S24LE == PA_SAMPLE_S24LE &&
                   CPULSE_FORMAT_S24BE == PA_SAMPLE_S24BE && CPULSE_FORMAT_S24_32LE == PA_SAMPLE_S24_32LE &&
                   CPULSE_FORMAT_S24_32BE == PA_SAMPLE_S24_32BE,
               "CPULSE_FORMAT_* are pa_sample_format_t's values");

struct cpulse_stream {
    pa_stream *stream;
    void (*state)(void *);
    void (*request)(void *);
    void (*underflow)(void *);
    void *userdata;
    /// The property update not answered yet, cancelled by the release.
    pa_operation *update;
    void (*updated)(void *, int);
    void *update_userdata;
};

static void stream_state(pa_stream *stream, void *userdata) {
    (void)stream;
    cpulse_stream *wrapper = userdata;
    wrapper->state(wrapper->userdata);
}

static void stream_request(pa_stream *stream, size_t bytes, void *userdata) {
    (void)stream, (void)bytes;
    cpulse_stream *wrapper = userdata;
    wrapper->request(wrapper->userdata);
}

static void stream_underflow(pa_stream *stream, void *userdata) {
    (void)stream;
    cpulse_stream *wrapper = userdata;
    wrapper->underflow(wrapper->userdata);
}

cpulse_stream *cpulse_stream_new(cpulse_context *context, const char *name, const char *home, int format, uint32_t rate, uint8_t channels,
                                 void (*state)(void *), void (*request)(void *), void (*underflow)(void *), void *userdata) {
    pa_sample_spec spec = {.format = (pa_sample_format_t)format, .rate = rate, .channels = channels};
    // ALSA's order for the channels it names, auxiliary channels for the rest (as the plug-in).
    pa_channel_map map;
    unsigned named = channels;
    while (named > 0 && !fn.pa_channel_map_init_auto(&map, named, PA_CHANNEL_MAP_ALSA)) named--;
    for (unsigned channel = named; channel < channels; channel++) map.map[channel] = PA_CHANNEL_POSITION_AUX0 + (channel - named);
    map.channels = channels;
    cpulse_stream *wrapper = calloc(1, sizeof *wrapper);
    if (!wrapper) return NULL;
    pa_proplist *properties = fn.pa_proplist_new();
    if (!properties) {
        free(wrapper);
        return NULL;
    }
    if (home) fn.pa_proplist_sets(properties, CPULSE_PROP_HOME, home);
    wrapper->stream = fn.pa_stream_new_with_proplist(context->context, name, &spec, &map, properties);
    fn.pa_proplist_free(properties);
    if (!wrapper->stream) {
        free(wrapper);
        return NULL;
    }
    wrapper->state = state;
    wrapper->request = request;
    wrapper->underflow = underflow;
    wrapper->userdata = userdata;
    fn.pa_stream_set_state_callback(wrapper->stream, stream_state, wrapper);
    fn.pa_stream_set_write_callback(wrapper->stream, stream_request, wrapper);
    fn.pa_stream_set_underflow_callback(wrapper->stream, stream_underflow, wrapper);
    return wrapper;
}

int cpulse_stream_connect(cpulse_stream *stream, const char *sink, uint32_t target, uint32_t prebuffer, uint32_t request) {
    pa_buffer_attr attributes = {
        .maxlength = (uint32_t)-1, .tlength = target, .prebuf = prebuffer, .minreq = request, .fragsize = (uint32_t)-1};
    return fn.pa_stream_connect_playback(stream->stream, sink, &attributes, PA_STREAM_NOFLAGS, NULL, NULL);
}

int cpulse_stream_state(cpulse_stream *stream) {
    switch (fn.pa_stream_get_state(stream->stream)) {
    case PA_STREAM_READY: return CPULSE_READY;
    case PA_STREAM_FAILED: return CPULSE_FAILED;
    case PA_STREAM_TERMINATED: return CPULSE_TERMINATED;
    default: return CPULSE_CONNECTING;
    }
}

int64_t cpulse_stream_writable(cpulse_stream *stream) {
    size_t bytes = fn.pa_stream_writable_size(stream->stream);
    return bytes == (size_t)-1 ? -1 : (int64_t)bytes;
}

int cpulse_stream_write(cpulse_stream *stream, const void *data, size_t bytes) {
    return fn.pa_stream_write(stream->stream, data, bytes, NULL, 0, PA_SEEK_RELATIVE) < 0 ? -1 : 0;
}

int cpulse_stream_start(cpulse_stream *stream) {
    pa_operation *uncork = fn.pa_stream_cork(stream->stream, 0, NULL, NULL);
    if (!uncork) return -1;
    release_operation(uncork);
    release_operation(fn.pa_stream_trigger(stream->stream, NULL, NULL));
    return 0;
}

int cpulse_stream_stop(cpulse_stream *stream) {
    pa_operation *cork = fn.pa_stream_cork(stream->stream, 1, NULL, NULL);
    if (!cork) return -1;
    release_operation(cork);
    release_operation(fn.pa_stream_flush(stream->stream, NULL, NULL));
    return 0;
}

int64_t cpulse_stream_underflow_index(cpulse_stream *stream) { return fn.pa_stream_get_underflow_index(stream->stream); }

uint32_t cpulse_stream_index(cpulse_stream *stream) { return fn.pa_stream_get_index(stream->stream); }
uint32_t cpulse_stream_sink(cpulse_stream *stream) { return fn.pa_stream_get_device_index(stream->stream); }

static void stream_updated(pa_stream *s, int success, void *userdata) {
    (void)s;
    cpulse_stream *wrapper = userdata;
    fn.pa_operation_unref(wrapper->update);
    wrapper->update = NULL;
    wrapper->updated(wrapper->update_userdata, success);
}

int cpulse_stream_update_properties(cpulse_stream *stream, const char *properties, void (*done)(void *, int), void *userdata) {
    if (stream->update) return -1;
    pa_proplist *list = fn.pa_proplist_from_string(properties);
    if (!list) return -1;
    stream->updated = done;
    stream->update_userdata = userdata;
    stream->update = fn.pa_stream_proplist_update(stream->stream, PA_UPDATE_REPLACE, list, stream_updated, stream);
    fn.pa_proplist_free(list);
    return stream->update ? 0 : -1;
}

void cpulse_stream_release(cpulse_stream *stream) {
    if (stream->update) {
        fn.pa_operation_cancel(stream->update);
        fn.pa_operation_unref(stream->update);
    }
    fn.pa_stream_set_state_callback(stream->stream, NULL, NULL);
    fn.pa_stream_set_write_callback(stream->stream, NULL, NULL);
    fn.pa_stream_set_underflow_callback(stream->stream, NULL, NULL);
    if (fn.pa_stream_get_state(stream->stream) == PA_STREAM_READY || fn.pa_stream_get_state(stream->stream) == PA_STREAM_CREATING)
        fn.pa_stream_disconnect(stream->stream);
    fn.pa_stream_unref(stream->stream);
    free(stream);
}
