// See CKeepAlivePipeWire.h. PipeWire's headers give the types, and the interface calls (registry, bind,
// sync, listeners, timers) are their inline functions; the few exported functions used go
// through the table dlsym fills, so nothing of libpipewire is linked.
#include "CKeepAlivePipeWire.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pipewire/pipewire.h>
#include <pipewire/extensions/metadata.h>
#include <spa/utils/dict.h>
#include <spa/utils/string.h>

#define CPIPEWIRE_FUNCTIONS(X)                                                                   \
    X(void, pw_init, (int *, char ***))                                                          \
    X(void, pw_log_set_level, (enum spa_log_level))                                               \
    X(struct pw_main_loop *, pw_main_loop_new, (const struct spa_dict *))                         \
    X(struct pw_loop *, pw_main_loop_get_loop, (struct pw_main_loop *))                           \
    X(int, pw_main_loop_run, (struct pw_main_loop *))                                             \
    X(int, pw_main_loop_quit, (struct pw_main_loop *))                                            \
    X(void, pw_main_loop_destroy, (struct pw_main_loop *))                                        \
    X(struct pw_context *, pw_context_new, (struct pw_loop *, struct pw_properties *, size_t))    \
    X(struct pw_properties *, pw_properties_new, (const char *, ...))                             \
    X(struct pw_impl_module *, pw_context_load_module,                                           \
      (struct pw_context *, const char *, const char *, struct pw_properties *))                  \
    X(void, pw_context_destroy, (struct pw_context *))                                            \
    X(struct pw_core *, pw_context_connect, (struct pw_context *, struct pw_properties *, size_t)) \
    X(int, pw_core_disconnect, (struct pw_core *))                                                \
    X(void, pw_proxy_destroy, (struct pw_proxy *))

static struct {
#define CPIPEWIRE_FIELD(type, name, parameters) type(*name) parameters;
    CPIPEWIRE_FUNCTIONS(CPIPEWIRE_FIELD)
#undef CPIPEWIRE_FIELD
} fn;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
static _Thread_local char last_error[256];

const char *cpipewire_error(void) { return last_error; }

static void set_error(const char *text) { snprintf(last_error, sizeof last_error, "%s", text ? text : ""); }

static int load(void) {
    pthread_mutex_lock(&load_lock);
    if (!loaded) {
        // Never closed: libpipewire keeps global state (its support plug-ins, its log) once
        // initialized.
        void *library = dlopen("libpipewire-0.3.so.0", RTLD_NOW | RTLD_LOCAL);
        const char *failure = library ? NULL : dlerror();
#define CPIPEWIRE_RESOLVE(type, name, parameters)                       \
    if (!failure && !(fn.name = (type(*) parameters)dlsym(library, #name))) failure = dlerror();
        CPIPEWIRE_FUNCTIONS(CPIPEWIRE_RESOLVE)
#undef CPIPEWIRE_RESOLVE
        if (failure) {
            set_error(failure);
        } else {
            fn.pw_init(NULL, NULL);
            // libpipewire logs to stderr from warning up: a question's context has no client.conf
            // and no realtime module, which it warns about each time. Errors still show, and
            // PIPEWIRE_DEBUG still decides when the user sets it.
            if (!getenv("PIPEWIRE_DEBUG")) fn.pw_log_set_level(SPA_LOG_LEVEL_ERROR);
            loaded = 1;
        }
    }
    int result = loaded;
    pthread_mutex_unlock(&load_lock);
    return result;
}

/// One question's state, on its own loop.
struct question {
    struct pw_main_loop *loop;
    struct pw_core *core;
    struct pw_registry *registry;
    struct pw_metadata *metadata;
    struct spa_hook core_listener, registry_listener, metadata_listener;
    cpipewire_clock *clock;
    /// The sync whose answer ends the current step: the registry's first listing, then the
    /// metadata's properties.
    int pending;
    /// Whether the registry's first listing is in.
    int listed;
    int result;
};

static void copy(char *to, size_t size, const char *value) { snprintf(to, size, "%s", value ? value : ""); }

static int metadata_property(void *data, uint32_t subject, const char *key, const char *type, const char *value) {
    (void)type;
    struct question *q = data;
    if (subject != PW_ID_CORE || !key) return 0;
    if (spa_streq(key, "clock.rate")) copy(q->clock->rate, sizeof q->clock->rate, value);
    else if (spa_streq(key, "clock.allowed-rates")) copy(q->clock->allowed_rates, sizeof q->clock->allowed_rates, value);
    else if (spa_streq(key, "clock.force-rate")) copy(q->clock->force_rate, sizeof q->clock->force_rate, value);
    return 0;
}

static const struct pw_metadata_events metadata_events = {
    PW_VERSION_METADATA_EVENTS,
    .property = metadata_property,
};

static void registry_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version,
                            const struct spa_dict *props) {
    (void)permissions, (void)version;
    struct question *q = data;
    if (q->metadata || !spa_streq(type, PW_TYPE_INTERFACE_Metadata) || !props) return;
    if (!spa_streq(spa_dict_lookup(props, PW_KEY_METADATA_NAME), "settings")) return;
    q->metadata = pw_registry_bind(q->registry, id, PW_TYPE_INTERFACE_Metadata, PW_VERSION_METADATA, 0);
    if (q->metadata) pw_metadata_add_listener(q->metadata, &q->metadata_listener, &metadata_events, q);
}

static const struct pw_registry_events registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = registry_global,
};

static void core_done(void *data, uint32_t id, int seq) {
    struct question *q = data;
    if (id != PW_ID_CORE || seq != q->pending) return;
    if (!q->metadata) {
        q->result = CPIPEWIRE_NO_SETTINGS;
        fn.pw_main_loop_quit(q->loop);
    } else if (!q->listed) {
        // The registry is listed and the metadata bound: one more round trip brings its
        // properties, which the server sends as the bind's first events.
        q->listed = 1;
        q->pending = pw_core_sync(q->core, PW_ID_CORE, 0);
    } else {
        q->result = CPIPEWIRE_OK;
        fn.pw_main_loop_quit(q->loop);
    }
}

static void core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    (void)seq;
    struct question *q = data;
    if (id != PW_ID_CORE) return;
    set_error(message ? message : strerror(-res));
    q->result = CPIPEWIRE_NO_SERVER;
    fn.pw_main_loop_quit(q->loop);
}

static const struct pw_core_events core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = core_done,
    .error = core_error,
};

static void timed_out(void *data, uint64_t expirations) {
    (void)expirations;
    struct question *q = data;
    q->result = CPIPEWIRE_TIMEOUT;
    set_error("no answer in time");
    fn.pw_main_loop_quit(q->loop);
}

int cpipewire_read_clock(cpipewire_clock *clock, int timeout_ms) {
    set_error(NULL);
    memset(clock, 0, sizeof *clock);
    if (!load()) return CPIPEWIRE_NO_LIBRARY;
    struct question q = {.clock = clock, .result = CPIPEWIRE_TIMEOUT};
    q.loop = fn.pw_main_loop_new(NULL);
    if (!q.loop) {
        set_error(strerror(errno));
        return CPIPEWIRE_NO_SERVER;
    }
    struct pw_loop *loop = fn.pw_main_loop_get_loop(q.loop);
    // No configuration file (client.conf would load a client's every module and read rules) and
    // no D-Bus support library: the protocol and the metadata's marshalling are all a question
    // needs.
    struct pw_context *context =
        fn.pw_context_new(loop, fn.pw_properties_new(PW_KEY_CONFIG_NAME, "null", "support.dbus", "false", NULL), 0);
    int result = CPIPEWIRE_NO_SERVER;
    struct spa_source *timer = NULL;
    if (!context) {
        set_error(strerror(errno));
        goto done;
    }
    if (!fn.pw_context_load_module(context, "libpipewire-module-protocol-native", NULL, NULL) ||
        !fn.pw_context_load_module(context, "libpipewire-module-metadata", NULL, NULL)) {
        set_error(strerror(errno));
        goto done;
    }
    q.core = fn.pw_context_connect(context, NULL, 0);
    if (!q.core) {
        set_error(strerror(errno));
        goto done;
    }
    pw_core_add_listener(q.core, &q.core_listener, &core_events, &q);
    q.registry = pw_core_get_registry(q.core, PW_VERSION_REGISTRY, 0);
    if (!q.registry) {
        set_error(strerror(errno));
        goto done;
    }
    pw_registry_add_listener(q.registry, &q.registry_listener, &registry_events, &q);
    timer = pw_loop_add_timer(loop, timed_out, &q);
    struct timespec deadline = {.tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
    if (timer) pw_loop_update_timer(loop, timer, &deadline, NULL, false);
    q.pending = pw_core_sync(q.core, PW_ID_CORE, 0);
    fn.pw_main_loop_run(q.loop);
    result = q.result;
done:
    if (timer) pw_loop_destroy_source(loop, timer);
    if (q.metadata) fn.pw_proxy_destroy((struct pw_proxy *)q.metadata);
    if (q.registry) fn.pw_proxy_destroy((struct pw_proxy *)q.registry);
    if (q.core) fn.pw_core_disconnect(q.core);
    if (context) fn.pw_context_destroy(context);
    fn.pw_main_loop_destroy(q.loop);
    // The context parsed PipeWire's configuration and loaded its support plug-ins: hundreds of kB
    // of the heap, freed in its middle, which a daemon with one malloc arena would otherwise keep
    // resident for good.
    malloc_trim(0);
    return result;
}
