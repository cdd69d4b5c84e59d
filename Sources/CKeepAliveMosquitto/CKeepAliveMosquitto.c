// See CKeepAliveMosquitto.h. No mosquitto_* symbol is linked: each call goes through the table
// dlsym fills, so the binary's dependencies stay what they were.
#include "CKeepAliveMosquitto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

// libmosquitto.so.1's ABI, declared here rather than taken from mosquitto.h: the soname has kept
// these since 1.x (Debian 12 ships 2.0.11, Debian 13 2.0.21), and declaring them keeps
// libmosquitto-dev out of the build and the arm64 sysroot, as nothing of it is linked.
struct mosquitto;
struct mosquitto_message {
    int mid;
    char *topic;
    void *payload;
    int payloadlen;
    int qos;
    bool retain;
};
enum {
    MOSQ_ERR_SUCCESS = 0,
    MOSQ_ERR_PAYLOAD_SIZE = 9,
};

// The functions keepalived uses: (return type, name, parameters).
#define CMOSQ_FUNCTIONS(X)                                                                                  \
    X(int, mosquitto_lib_init, (void))                                                                      \
    X(int, mosquitto_lib_version, (int *, int *, int *))                                                    \
    X(struct mosquitto *, mosquitto_new, (const char *, bool, void *))                                      \
    X(void, mosquitto_destroy, (struct mosquitto *))                                                        \
    X(int, mosquitto_username_pw_set, (struct mosquitto *, const char *, const char *))                     \
    X(int, mosquitto_tls_set, (struct mosquitto *, const char *, const char *, const char *, const char *,  \
                               int (*)(char *, int, int, void *)))                                          \
    X(int, mosquitto_will_set, (struct mosquitto *, const char *, int, const void *, int, bool))            \
    X(int, mosquitto_connect_async, (struct mosquitto *, const char *, int, int))                           \
    X(int, mosquitto_reconnect_async, (struct mosquitto *))                                                 \
    X(int, mosquitto_disconnect, (struct mosquitto *))                                                      \
    X(int, mosquitto_socket, (struct mosquitto *))                                                          \
    X(bool, mosquitto_want_write, (struct mosquitto *))                                                     \
    X(int, mosquitto_loop_read, (struct mosquitto *, int))                                                  \
    X(int, mosquitto_loop_write, (struct mosquitto *, int))                                                 \
    X(int, mosquitto_loop_misc, (struct mosquitto *))                                                       \
    X(int, mosquitto_publish, (struct mosquitto *, int *, const char *, int, const void *, int, bool))      \
    X(int, mosquitto_subscribe, (struct mosquitto *, int *, const char *, int))                             \
    X(void, mosquitto_connect_callback_set, (struct mosquitto *, void (*)(struct mosquitto *, void *, int))) \
    X(void, mosquitto_disconnect_callback_set, (struct mosquitto *, void (*)(struct mosquitto *, void *, int))) \
    X(void, mosquitto_message_callback_set, (struct mosquitto *,                                            \
                                             void (*)(struct mosquitto *, void *, const struct mosquitto_message *))) \
    X(void, mosquitto_publish_callback_set, (struct mosquitto *, void (*)(struct mosquitto *, void *, int))) \
    X(const char *, mosquitto_strerror, (int))                                                              \
    X(const char *, mosquitto_connack_string, (int))

static struct {
#define CMOSQ_FIELD(type, name, parameters) type(*name) parameters;
    CMOSQ_FUNCTIONS(CMOSQ_FIELD)
#undef CMOSQ_FIELD
} fn;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;

const char *cmosq_load(void) {
    const char *failure = NULL;
    pthread_mutex_lock(&load_lock);
    if (!loaded) {
        // Never closed: the library keeps OpenSSL's state for the life of the process.
        void *library = dlopen("libmosquitto.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!library) {
            failure = dlerror();
        } else {
#define CMOSQ_RESOLVE(type, name, parameters)                                  \
            if (!failure) {                                                    \
                *(void **)(&fn.name) = dlsym(library, #name);                  \
                if (!fn.name) failure = "libmosquitto.so.1 lacks " #name;      \
            }
            CMOSQ_FUNCTIONS(CMOSQ_RESOLVE)
#undef CMOSQ_RESOLVE
            if (!failure && fn.mosquitto_lib_init() != MOSQ_ERR_SUCCESS) failure = "mosquitto_lib_init failed";
            if (!failure) loaded = 1;
        }
    }
    pthread_mutex_unlock(&load_lock);
    return failure;
}

int cmosq_version(void) {
    int major = 0, minor = 0, revision = 0;
    fn.mosquitto_lib_version(&major, &minor, &revision);
    return major * 1000000 + minor * 1000 + revision;
}

struct cmosq_client {
    struct mosquitto *mosq;
    cmosq_callbacks callbacks;
    void *userdata;
};

static void on_connect(struct mosquitto *mosq, void *object, int code) {
    (void)mosq;
    cmosq_client *client = object;
    if (client->callbacks.connected) client->callbacks.connected(client->userdata, code);
}

static void on_disconnect(struct mosquitto *mosq, void *object, int code) {
    (void)mosq;
    cmosq_client *client = object;
    if (client->callbacks.disconnected) client->callbacks.disconnected(client->userdata, code);
}

static void on_message(struct mosquitto *mosq, void *object, const struct mosquitto_message *message) {
    (void)mosq;
    cmosq_client *client = object;
    if (!client->callbacks.message || !message || !message->topic || message->payloadlen < 0) return;
    client->callbacks.message(client->userdata, message->topic, message->payload, (size_t)message->payloadlen, message->retain, message->qos);
}

static void on_publish(struct mosquitto *mosq, void *object, int mid) {
    (void)mosq;
    cmosq_client *client = object;
    if (client->callbacks.published) client->callbacks.published(client->userdata, mid);
}

cmosq_client *cmosq_client_new(const char *client_id, cmosq_callbacks callbacks, void *userdata) {
    cmosq_client *client = calloc(1, sizeof *client);
    if (!client) return NULL;
    client->callbacks = callbacks;
    client->userdata = userdata;
    client->mosq = fn.mosquitto_new(client_id, true, client);
    if (!client->mosq) {
        free(client);
        return NULL;
    }
    fn.mosquitto_connect_callback_set(client->mosq, on_connect);
    fn.mosquitto_disconnect_callback_set(client->mosq, on_disconnect);
    fn.mosquitto_message_callback_set(client->mosq, on_message);
    fn.mosquitto_publish_callback_set(client->mosq, on_publish);
    return client;
}

void cmosq_client_free(cmosq_client *client) {
    if (!client) return;
    fn.mosquitto_destroy(client->mosq);
    free(client);
}

int cmosq_credentials(cmosq_client *client, const char *user, const char *password) {
    return fn.mosquitto_username_pw_set(client->mosq, user, password);
}

int cmosq_tls(cmosq_client *client, const char *ca_file, const char *cert_file, const char *key_file) {
    // Without a CA file, the system's CAs (Debian's ca-certificates) by their directory.
    return fn.mosquitto_tls_set(client->mosq, ca_file, ca_file ? NULL : "/etc/ssl/certs", cert_file, key_file, NULL);
}

int cmosq_will(cmosq_client *client, const char *topic, const char *payload) {
    size_t length = 0;
    while (payload[length]) length++;
    return fn.mosquitto_will_set(client->mosq, topic, (int)length, payload, 1, true);
}

int cmosq_connect(cmosq_client *client, const char *host, int port, int keepalive_seconds) {
    return fn.mosquitto_connect_async(client->mosq, host, port, keepalive_seconds);
}

int cmosq_disconnect(cmosq_client *client) { return fn.mosquitto_disconnect(client->mosq); }
int cmosq_socket(cmosq_client *client) { return fn.mosquitto_socket(client->mosq); }
bool cmosq_wants_write(cmosq_client *client) { return fn.mosquitto_want_write(client->mosq); }
int cmosq_loop_read(cmosq_client *client) { return fn.mosquitto_loop_read(client->mosq, 1); }
int cmosq_loop_write(cmosq_client *client) { return fn.mosquitto_loop_write(client->mosq, 1); }
int cmosq_loop_misc(cmosq_client *client) { return fn.mosquitto_loop_misc(client->mosq); }

int cmosq_publish(cmosq_client *client, const char *topic, const void *payload, size_t length, bool retain, int *mid) {
    // MQTT's remaining-length bound (268435455 bytes), which an int holds.
    if (length > 268435455u) return MOSQ_ERR_PAYLOAD_SIZE;
    return fn.mosquitto_publish(client->mosq, mid, topic, (int)length, payload, 1, retain);
}

int cmosq_subscribe(cmosq_client *client, const char *pattern) {
    return fn.mosquitto_subscribe(client->mosq, NULL, pattern, 1);
}

const char *cmosq_error_text(int code) { return fn.mosquitto_strerror(code); }
const char *cmosq_connack_text(int code) { return fn.mosquitto_connack_string(code); }
