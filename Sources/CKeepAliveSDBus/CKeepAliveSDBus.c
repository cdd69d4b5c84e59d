#include "CKeepAliveSDBus.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const login1 = "org.freedesktop.login1";
static const char *const manager_path = "/org/freedesktop/login1";
static const char *const manager_interface = "org.freedesktop.login1.Manager";
static const char *const session_interface = "org.freedesktop.login1.Session";

int ka_bus_inhibit(sd_bus *bus, const char *what, const char *who, const char *why, const char *mode, int *fd) {
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, login1, manager_path, manager_interface, "Inhibit", NULL, &reply,
                               "ssss", what, who, why, mode);
    if (r < 0) return r;
    int lock = -1;
    r = sd_bus_message_read(reply, "h", &lock);
    // The fd belongs to the message; the lock must outlive it.
    if (r >= 0) {
        *fd = fcntl(lock, F_DUPFD_CLOEXEC, 3);
        r = *fd < 0 ? -errno : 0;
    }
    sd_bus_message_unref(reply);
    return r;
}

int ka_bus_match_prepare_for_sleep(sd_bus *bus, sd_bus_slot **slot, sd_bus_message_handler_t handler, void *userdata) {
    return sd_bus_match_signal(bus, slot, login1, manager_path, manager_interface, "PrepareForSleep", handler, userdata);
}

int ka_bus_read_bool(sd_bus_message *message, int *value) {
    return sd_bus_message_read(message, "b", value);
}

int ka_bus_match_logind_owner(sd_bus *bus, sd_bus_slot **slot, sd_bus_message_handler_t handler, void *userdata) {
    return sd_bus_add_match(bus, slot,
                            "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                            "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.freedesktop.login1'",
                            handler, userdata);
}

int ka_bus_read_new_owner(sd_bus_message *message, const char **owner) {
    const char *name = NULL, *old_owner = NULL;
    return sd_bus_message_read(message, "sss", &name, &old_owner, owner);
}

// A string read from a message lives only as long as the message: the caller gets a copy.
static int copy_string(const char *value, char **copy) {
    *copy = strdup(value);
    return *copy ? 0 : -ENOMEM;
}

/// Reads a method reply's one string (`signature` "s" or "o") into a malloc'ed copy and lets go
/// of the reply.
static int read_reply_string(sd_bus_message *reply, const char *signature, char **copy) {
    const char *value = NULL;
    int r = sd_bus_message_read(reply, signature, &value);
    if (r >= 0) r = copy_string(value, copy);
    sd_bus_message_unref(reply);
    return r;
}

/// Calls one of the manager's `u` → `o` methods (GetSessionByPID, GetUser).
static int call_for_path(sd_bus *bus, const char *method, uint32_t argument, char **path) {
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, login1, manager_path, manager_interface, method, NULL, &reply, "u", argument);
    return r < 0 ? r : read_reply_string(reply, "o", path);
}

int ka_bus_session_by_pid(sd_bus *bus, uint32_t pid, char **path) {
    return call_for_path(bus, "GetSessionByPID", pid, path);
}

int ka_bus_user_display(sd_bus *bus, uint32_t uid, char **path) {
    char *user_path = NULL;
    int r = call_for_path(bus, "GetUser", uid, &user_path);
    if (r < 0) return r;
    sd_bus_message *reply = NULL;
    r = sd_bus_get_property(bus, login1, user_path, "org.freedesktop.login1.User", "Display", NULL, &reply, "(so)");
    free(user_path);
    if (r < 0) return r;
    const char *id = NULL, *object = NULL;
    r = sd_bus_message_read(reply, "(so)", &id, &object);
    if (r >= 0) r = copy_string(object, path);
    sd_bus_message_unref(reply);
    return r;
}

int ka_bus_session_bool(sd_bus *bus, const char *path, const char *property, int *value) {
    return sd_bus_get_property_trivial(bus, login1, path, session_interface, property, NULL, 'b', value);
}

int ka_bus_session_u64(sd_bus *bus, const char *path, const char *property, uint64_t *value) {
    return sd_bus_get_property_trivial(bus, login1, path, session_interface, property, NULL, 't', value);
}

int ka_bus_match_properties_changed(sd_bus *bus, const char *path, sd_bus_slot **slot, sd_bus_message_handler_t handler, void *userdata) {
    return sd_bus_match_signal(bus, slot, login1, path, "org.freedesktop.DBus.Properties", "PropertiesChanged", handler, userdata);
}

// MARK: - Device reservation

static int request_release(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    (void)error;
    const ka_reservation *reservation = userdata;
    int32_t priority = 0;
    int r = sd_bus_message_read(message, "i", &priority);
    if (r < 0) return r;
    int released = reservation->on_request(reservation->userdata, priority) > 0;
    return sd_bus_reply_method_return(message, "b", released);
}

static const sd_bus_vtable reservation_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("RequestRelease", "i", "b", request_release, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_PROPERTY("Priority", "i", NULL, offsetof(ka_reservation, priority), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("ApplicationName", "s", NULL, offsetof(ka_reservation, application_name), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("ApplicationDeviceName", "s", NULL, offsetof(ka_reservation, application_device_name), SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_VTABLE_END,
};

int ka_bus_export_reservation(sd_bus *bus, sd_bus_slot **slot, const char *path, ka_reservation *reservation) {
    return sd_bus_add_object_vtable(bus, slot, path, "org.freedesktop.ReserveDevice1", reservation_vtable, reservation);
}

static const char *const bus_name = "org.freedesktop.DBus";
static const char *const bus_path = "/org/freedesktop/DBus";

int ka_bus_list_names(sd_bus *bus, char ***names) {
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, bus_name, bus_path, bus_name, "ListNames", NULL, &reply, "");
    if (r < 0) return r;
    r = sd_bus_message_read_strv(reply, names);
    sd_bus_message_unref(reply);
    return r;
}

int ka_bus_name_owner(sd_bus *bus, const char *name, char **owner) {
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, bus_name, bus_path, bus_name, "GetNameOwner", NULL, &reply, "s", name);
    return r < 0 ? r : read_reply_string(reply, "s", owner);
}

int ka_bus_match_reservations(sd_bus *bus, sd_bus_slot **slot, sd_bus_message_handler_t handler, void *userdata) {
    return sd_bus_add_match(bus, slot,
                            "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                            "interface='org.freedesktop.DBus',member='NameOwnerChanged',"
                            "arg0namespace='org.freedesktop.ReserveDevice1'",
                            handler, userdata);
}

int ka_bus_read_owner_change(sd_bus_message *message, const char **name, const char **old_owner, const char **new_owner) {
    return sd_bus_message_read(message, "sss", name, old_owner, new_owner);
}
